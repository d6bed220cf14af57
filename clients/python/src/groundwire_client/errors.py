"""The client's exceptions: one per kind of refusal the API answers, each carrying the
API's ``code``, ``message``, ``request_id``, the failing ``dependency`` and, for
limits, ``retry_after`` (seconds).

::

    GroundwireError
    ├── APIConnectionError        the gateway could not be reached (or the connection broke)
    ├── ProtocolError             the answer was not what the API documents
    └── APIError                  the API answered with an error (HTTP status or `error` event)
        ├── AuthenticationError   401 unauthenticated
        ├── PermissionDeniedError 403 permission_denied
        ├── NotFoundError         404 not_found
        ├── ConflictError         409 already_exists
        ├── PayloadTooLargeError  413 payload_too_large
        ├── InvalidRequestError   422 invalid_input
        ├── RateLimitError        429 rate_limited, quota_exceeded, token_budget_exceeded,
        │                             too_many_inflight, overloaded
        ├── BackendError          502 backend_failure
        ├── UnavailableError      503 unavailable, cancelled
        ├── DeadlineExceededError 504 deadline_exceeded
        ├── InsufficientStorageError 507 insufficient_storage
        └── InternalServerError   500 internal (and anything else)
"""

from __future__ import annotations

from typing import Any


class GroundwireError(Exception):
    """Every error this package raises."""


class APIConnectionError(GroundwireError):
    """The gateway could not be reached, or the connection failed mid-answer."""


class ProtocolError(GroundwireError):
    """The gateway's answer did not have the documented shape."""


class APIError(GroundwireError):
    """The API refused or failed a request.

    ``status`` is the HTTP status (None for an ``error`` event inside a stream, whose
    HTTP status was already 200)."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status: int | None = None,
        request_id: str = "",
        dependency: str | None = None,
        retry_after: float | None = None,
        details: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.request_id = request_id
        self.dependency = dependency
        self.retry_after = retry_after
        self.details = details

    def __str__(self) -> str:
        where = f" [{self.dependency}]" if self.dependency else ""
        retry = f" (retry after {self.retry_after:g} s)" if self.retry_after is not None else ""
        rid = f" (request {self.request_id})" if self.request_id else ""
        return f"{self.code}: {self.message}{where}{retry}{rid}"


class AuthenticationError(APIError):
    """No API key, or not a valid one (401)."""


class PermissionDeniedError(APIError):
    """The key may not use this route, e.g. a tenant key on an admin route (403)."""


class NotFoundError(APIError):
    """No such collection, source, job or route (404)."""


class ConflictError(APIError):
    """It already exists (409)."""


class PayloadTooLargeError(APIError):
    """The request body is over the gateway's limit (413)."""


class InvalidRequestError(APIError):
    """The request is invalid; ``message`` says where and why (422)."""


class RateLimitError(APIError):
    """A limit was hit: rate, daily quota, token budget or chat slots (429). Wait
    ``retry_after`` seconds."""


class BackendError(APIError):
    """A service behind the gateway failed (502)."""


class UnavailableError(APIError):
    """A dependency is unavailable; ``dependency`` names it (503)."""


class DeadlineExceededError(APIError):
    """The request's deadline passed (504)."""


class InsufficientStorageError(APIError):
    """The retriever's disk is nearly full: writes are refused (507)."""


class InternalServerError(APIError):
    """The gateway failed (500); no details leave it."""


BY_CODE: dict[str, type[APIError]] = {
    "unauthenticated": AuthenticationError,
    "permission_denied": PermissionDeniedError,
    "not_found": NotFoundError,
    "already_exists": ConflictError,
    "payload_too_large": PayloadTooLargeError,
    "invalid_input": InvalidRequestError,
    "bad_request": InvalidRequestError,
    "rate_limited": RateLimitError,
    "quota_exceeded": RateLimitError,
    "token_budget_exceeded": RateLimitError,
    "too_many_inflight": RateLimitError,
    "overloaded": RateLimitError,
    "backend_failure": BackendError,
    "unavailable": UnavailableError,
    "cancelled": UnavailableError,
    "deadline_exceeded": DeadlineExceededError,
    "insufficient_storage": InsufficientStorageError,
    "internal": InternalServerError,
}
BY_STATUS: dict[int, type[APIError]] = {
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: InvalidRequestError,
    429: RateLimitError,
    502: BackendError,
    503: UnavailableError,
    504: DeadlineExceededError,
    507: InsufficientStorageError,
}


def error_class(code: str, status: int | None) -> type[APIError]:
    """The exception for an API error: by its code, else by its HTTP status."""
    if code in BY_CODE:
        return BY_CODE[code]
    if status is not None and status in BY_STATUS:
        return BY_STATUS[status]
    return InternalServerError
