"""The HTTP routes, one module per area; each exposes ``router(state) -> APIRouter``."""

from __future__ import annotations

from typing import Any

from groundwire_gateway import models

_DESCRIPTIONS = {
    401: "No API key, or not a valid one.",
    403: "The API key may not use this route.",
    404: "Not found (route, collection or source).",
    409: "Already exists.",
    413: "The body is over the size limit.",
    422: "Invalid input; `error.message` says where and why.",
    429: "A limit was hit (rate, daily quota, token budget, chat slots).",
    500: "Internal error (no details leave the gateway).",
    502: "A backend failed.",
    503: "A dependency is unavailable; `error.dependency` names it.",
    504: "The deadline passed.",
    507: "The retriever's data disk is nearly full: writes are refused (searches go on) "
    "until space is freed; `error.message` names the data path.",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for error statuses: the one error body, and Retry-After
    on 429 and 507."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        entry: dict[str, Any] = {
            "model": models.ErrorResponse,
            "description": _DESCRIPTIONS[status],
        }
        if status in (429, 507):
            entry["headers"] = {
                "Retry-After": {
                    "description": "Seconds to wait before retrying.",
                    "required": True,
                    "schema": {"type": "integer", "minimum": 1},
                }
            }
        out[status] = entry
    return out


PUBLIC_ERRORS = error_responses(401, 404, 413, 422, 429, 500, 502, 503, 504)
ADMIN_ERRORS = error_responses(401, 403, 404, 409, 413, 422, 500, 502, 503, 504, 507)
