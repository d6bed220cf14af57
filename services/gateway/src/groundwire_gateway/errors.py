"""The one table from the error hierarchy to HTTP, and the JSON error body.

The shared hierarchy (``groundwire_core.errors``) is extended here only with what
exists at the HTTP edge alone: the abuse controls' rejections (all ``Overloaded``, so
429 with ``Retry-After``, each with its own code). ``Unauthenticated`` and
``PermissionDenied`` are re-exported from it: the retriever refuses by access list too.
"""

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
    InsufficientStorage,
    InvalidInput,
    NotFound,
    Overloaded,
    Unavailable,
)
from groundwire_core.errors import PermissionDenied as PermissionDenied
from groundwire_core.errors import Unauthenticated as Unauthenticated


class PayloadTooLarge(GroundwireError):
    """The request body is over the configured limit."""

    code = "payload_too_large"


class RateLimited(Overloaded):
    """The client sent more requests than its sliding window allows."""

    code = "rate_limited"


class QuotaExceeded(Overloaded):
    """The daily quota of the tenant (or of the callers without an API key) is spent;
    it resets at 00:00 UTC."""

    code = "quota_exceeded"


class TokenBudgetExceeded(Overloaded):
    """The tenant's daily token budget is spent; it resets at 00:00 UTC."""

    code = "token_budget_exceeded"


class TooManyInflight(Overloaded):
    """Every chat slot is taken."""

    code = "too_many_inflight"


# Order matters: the first class an error is an instance of decides.
HTTP_STATUS: dict[type[GroundwireError], int] = {
    Unauthenticated: 401,
    PermissionDenied: 403,
    PayloadTooLarge: 413,
    InvalidInput: 422,
    NotFound: 404,
    AlreadyExists: 409,
    InsufficientStorage: 507,  # the retriever's data disk is nearly full: writes refused
    Overloaded: 429,
    Unavailable: 503,
    DeadlineExceeded: 504,
    BackendFailure: 502,
    Cancelled: 503,
    GroundwireError: 500,
}

# Statuses raised by the framework itself (routing, body limits), with their codes.
FRAMEWORK_CODES: dict[int, str] = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def http_status(error: GroundwireError) -> int:
    return next(code for cls, code in HTTP_STATUS.items() if isinstance(error, cls))


def error_body(
    code: str, message: str, *, dependency: str | None = None, details: Any = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message, "request_id": current_request_id()}
    if dependency:
        body["dependency"] = dependency
    if details is not None:
        body["details"] = details
    return {"error": body}


def error_headers(error: GroundwireError) -> dict[str, str]:
    headers: dict[str, str] = {}
    if isinstance(error, Overloaded):
        headers["Retry-After"] = str(max(1, math.ceil(error.retry_after_s)))
    if isinstance(error, Unauthenticated):
        headers["WWW-Authenticate"] = "Bearer"
    return headers


def error_response(error: GroundwireError) -> JSONResponse:
    """The HTTP response for ``error``: status from the table, a JSON body, no trace."""
    return JSONResponse(
        error_body(error.code, error.message, dependency=error.dependency),
        status_code=http_status(error),
        headers=error_headers(error),
    )
