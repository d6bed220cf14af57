"""The one error hierarchy shared by every Groundwire service.

Logic raises these; transports map them exactly once: to gRPC status in
``groundwire_core.grpc.errors`` (server interceptor and client mapper) and to HTTP
in the gateway. Messages are written for the caller: they never carry stack traces
or internal exception text.
"""

from __future__ import annotations


class GroundwireError(Exception):
    """Base of every error a Groundwire service reports to its callers.

    ``code`` is a stable machine-readable string (it crosses the wire); ``message``
    is a human reason; ``dependency`` names the service or store that failed, when
    one did.
    """

    code = "internal"

    def __init__(self, message: str, *, dependency: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.dependency = dependency

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, dependency={self.dependency!r})"


class InvalidInput(GroundwireError):
    """The request is malformed or out of bounds; retrying it unchanged fails again."""

    code = "invalid_input"


class NotFound(GroundwireError):
    """A named thing (collection, source, model) does not exist."""

    code = "not_found"


class AlreadyExists(GroundwireError):
    """A named thing already exists and the request would replace it."""

    code = "already_exists"


class Overloaded(GroundwireError):
    """The service is at capacity; retry after ``retry_after_s`` seconds."""

    code = "overloaded"

    def __init__(
        self, message: str, *, retry_after_s: float = 1.0, dependency: str | None = None
    ) -> None:
        super().__init__(message, dependency=dependency)
        self.retry_after_s = retry_after_s


class InsufficientStorage(Overloaded):
    """A store's disk is nearly full: it refuses writes (reads go on) until space is
    freed. A kind of ``Overloaded`` (gRPC RESOURCE_EXHAUSTED; HTTP 507 at the gateway):
    retrying helps only once someone frees space, so ``retry_after_s`` is long."""

    code = "insufficient_storage"


class Unavailable(GroundwireError):
    """A dependency (or this service's own backend) cannot be reached or is not ready."""

    code = "unavailable"


class DeadlineExceeded(GroundwireError):
    """The request's deadline passed before the work finished."""

    code = "deadline_exceeded"


class BackendFailure(GroundwireError):
    """A backend (model runtime, store) failed while serving a valid request."""

    code = "backend_failure"


class Cancelled(GroundwireError):
    """The caller went away; the work was abandoned."""

    code = "cancelled"


class Unauthenticated(GroundwireError):
    """The caller's credential (API key, end-user token, service token) is missing,
    expired or not valid. The message says which check failed, never the credential."""

    code = "unauthenticated"


class PermissionDenied(GroundwireError):
    """The caller is known but may not do this (a role or an access list refuses it).
    The message names nothing the caller may not see."""

    code = "permission_denied"


ERRORS_BY_CODE: dict[str, type[GroundwireError]] = {
    cls.code: cls
    for cls in (
        GroundwireError,
        InvalidInput,
        NotFound,
        AlreadyExists,
        Overloaded,
        InsufficientStorage,
        Unavailable,
        DeadlineExceeded,
        BackendFailure,
        Cancelled,
        Unauthenticated,
        PermissionDenied,
    )
}
