"""The one mapping between the error hierarchy and gRPC status, both ways.

Servers map a GroundwireError to a status code plus trailing metadata (code,
dependency, retry-after) in the server interceptor; clients map an AioRpcError back
to the same GroundwireError with :func:`from_rpc_error`, so a failure deep in the
chain reaches the gateway with its original code and the dependency that failed.
"""

from __future__ import annotations

import grpc

from groundwire.common.v1 import common_pb2
from groundwire_core.errors import (
    ERRORS_BY_CODE,
    AlreadyExists,
    BackendFailure,
    Cancelled,
    DeadlineExceeded,
    GroundwireError,
    InvalidInput,
    NotFound,
    Overloaded,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)

CODE_KEY = "gw-error-code"
DEPENDENCY_KEY = "gw-dependency"
RETRY_AFTER_KEY = "gw-retry-after"

STATUS_BY_ERROR: dict[type[GroundwireError], grpc.StatusCode] = {
    InvalidInput: grpc.StatusCode.INVALID_ARGUMENT,
    NotFound: grpc.StatusCode.NOT_FOUND,
    AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    Overloaded: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Unavailable: grpc.StatusCode.UNAVAILABLE,
    DeadlineExceeded: grpc.StatusCode.DEADLINE_EXCEEDED,
    BackendFailure: grpc.StatusCode.INTERNAL,
    Cancelled: grpc.StatusCode.CANCELLED,
    Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    GroundwireError: grpc.StatusCode.INTERNAL,
}

# What a bare status (no Groundwire metadata: a connection failure, a foreign
# server) means when it comes back to a client.
ERROR_BY_STATUS: dict[grpc.StatusCode, type[GroundwireError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidInput,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.RESOURCE_EXHAUSTED: Overloaded,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNIMPLEMENTED: BackendFailure,
}


def to_status(error: GroundwireError) -> tuple[grpc.StatusCode, str, tuple[tuple[str, str], ...]]:
    """Status code, details and trailing metadata for ``error``."""
    status = next(code for cls, code in STATUS_BY_ERROR.items() if isinstance(error, cls))
    metadata: list[tuple[str, str]] = [(CODE_KEY, error.code)]
    if error.dependency:
        metadata.append((DEPENDENCY_KEY, error.dependency))
    if isinstance(error, Overloaded):
        metadata.append((RETRY_AFTER_KEY, f"{error.retry_after_s:g}"))
    return status, error.message, tuple(metadata)


def from_rpc_error(error: grpc.aio.AioRpcError, callee: str) -> GroundwireError:
    """The GroundwireError an RPC to ``callee`` failed with.

    A failure the callee reported keeps its code and dependency; a transport failure
    (connection refused, deadline) names the callee as the failed dependency.
    """
    metadata = {k: v for k, v in (error.trailing_metadata() or ()) if isinstance(v, str)}
    code = metadata.get(CODE_KEY)
    dependency = metadata.get(DEPENDENCY_KEY)
    cls = ERRORS_BY_CODE.get(code or "") or ERROR_BY_STATUS.get(error.code(), BackendFailure)
    if code is None:
        # Not one of ours: a transport-level failure talking to the callee.
        message = _transport_message(error, callee)
        dependency = callee
    else:
        message = error.details() or cls.code
    if issubclass(cls, Overloaded):  # InsufficientStorage too: keep its retry-after
        retry = float(metadata.get(RETRY_AFTER_KEY, "1") or 1)
        return cls(message, retry_after_s=retry, dependency=dependency or callee)
    return cls(message, dependency=dependency)


def _transport_message(error: grpc.aio.AioRpcError, callee: str) -> str:
    status = error.code()
    if status == grpc.StatusCode.UNAVAILABLE:
        return f"{callee} is unavailable"
    if status == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"{callee} did not answer before the deadline"
    if status == grpc.StatusCode.CANCELLED:
        return f"the call to {callee} was cancelled"
    return f"{callee} failed ({status.name.lower()})"


def to_error_info(error: GroundwireError) -> common_pb2.ErrorInfo:
    """The in-stream form of ``error`` (for server-streaming RPCs' error events)."""
    return common_pb2.ErrorInfo(
        code=error.code,
        message=error.message,
        dependency=error.dependency or "",
        retry_after_s=error.retry_after_s if isinstance(error, Overloaded) else 0.0,
    )


def from_error_info(info: common_pb2.ErrorInfo) -> GroundwireError:
    """The GroundwireError an in-stream error event carries."""
    cls = ERRORS_BY_CODE.get(info.code, GroundwireError)
    if issubclass(cls, Overloaded):
        return cls(
            info.message,
            retry_after_s=info.retry_after_s or 1.0,
            dependency=info.dependency or None,
        )
    return cls(info.message, dependency=info.dependency or None)
