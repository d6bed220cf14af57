"""The one table from the error hierarchy to HTTP, and the JSON error body."""

from __future__ import annotations

import math
from typing import Any

from fastapi.responses import JSONResponse

from groundwire_core.context import current_request_id
from groundwire_core.errors import (
    AlreadyExists,
    BackendFailure,
    Cancelled,
    DeadlineExceeded,
    GroundwireError,
    InvalidInput,
    NotFound,
    Overloaded,
    Unavailable,
)

HTTP_STATUS: dict[type[GroundwireError], int] = {
    InvalidInput: 422,
    NotFound: 404,
    AlreadyExists: 409,
    Overloaded: 429,
    Unavailable: 503,
    DeadlineExceeded: 504,
    BackendFailure: 502,
    Cancelled: 503,
    GroundwireError: 500,
}


def error_body(
    code: str, message: str, *, dependency: str | None = None, details: Any = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message, "request_id": current_request_id()}
    if dependency:
        body["dependency"] = dependency
    if details is not None:
        body["details"] = details
    return {"error": body}


def error_response(error: GroundwireError) -> JSONResponse:
    """The HTTP response for ``error``: status from the table, a JSON body, no trace."""
    status = next(code for cls, code in HTTP_STATUS.items() if isinstance(error, cls))
    headers = {}
    if isinstance(error, Overloaded):
        headers["Retry-After"] = str(max(1, math.ceil(error.retry_after_s)))
    return JSONResponse(
        error_body(error.code, error.message, dependency=error.dependency),
        status_code=status,
        headers=headers,
    )
