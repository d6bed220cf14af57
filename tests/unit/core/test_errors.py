"""The error hierarchy across the gRPC boundary: to_status on the server, the
AioRpcError a client sees, from_rpc_error back to the same error; and the in-stream
ErrorInfo form."""

from __future__ import annotations

import grpc
import pytest

from groundwire.common.v1 import common_pb2
from groundwire_core.errors import (
    ERRORS_BY_CODE,
    AlreadyExists,
    BackendFailure,
    Cancelled,
    DeadlineExceeded,
    GroundwireError,
    InsufficientStorage,
    InvalidInput,
    NotFound,
    Overloaded,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)
from groundwire_core.grpc.errors import (
    CODE_KEY,
    DEPENDENCY_KEY,
    RETRY_AFTER_KEY,
    from_error_info,
    from_rpc_error,
    to_error_info,
    to_status,
)


def _over_the_wire(error: GroundwireError) -> grpc.aio.AioRpcError:
    """The AioRpcError a client gets when a server aborts with ``error``."""
    status, details, trailing = to_status(error)
    return grpc.aio.AioRpcError(status, grpc.aio.Metadata(), grpc.aio.Metadata(*trailing), details)


def _bare(status: grpc.StatusCode, details: str = "") -> grpc.aio.AioRpcError:
    """A status without Groundwire metadata (a transport failure, a foreign server)."""
    return grpc.aio.AioRpcError(status, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


ROUND_TRIP_CASES = [
    (InvalidInput("query is empty"), grpc.StatusCode.INVALID_ARGUMENT),
    (NotFound("no collection 'docs'", dependency="retriever"), grpc.StatusCode.NOT_FOUND),
    (AlreadyExists("collection 'docs' exists"), grpc.StatusCode.ALREADY_EXISTS),
    (
        Overloaded("queue full", retry_after_s=3, dependency="reranker"),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    ),
    (
        Overloaded("queue full", retry_after_s=0.25, dependency="embedder"),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    ),
    (
        InsufficientStorage("the data disk is nearly full", retry_after_s=60, dependency="qdrant"),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    ),
    (Unavailable("embedder is unavailable", dependency="embedder"), grpc.StatusCode.UNAVAILABLE),
    (DeadlineExceeded("too slow", dependency="llm"), grpc.StatusCode.DEADLINE_EXCEEDED),
    (BackendFailure("onnx runtime failed", dependency="embedder"), grpc.StatusCode.INTERNAL),
    (Cancelled("caller went away"), grpc.StatusCode.CANCELLED),
    (Unauthenticated("the service token is missing"), grpc.StatusCode.UNAUTHENTICATED),
    (PermissionDenied("a signed-in end user is required"), grpc.StatusCode.PERMISSION_DENIED),
    (GroundwireError("something odd"), grpc.StatusCode.INTERNAL),
]


@pytest.mark.parametrize(("error", "status"), ROUND_TRIP_CASES, ids=lambda v: repr(v))
def test_round_trip_through_status(error: GroundwireError, status: grpc.StatusCode) -> None:
    code, details, _ = to_status(error)
    assert code == status
    assert details == error.message

    back = from_rpc_error(_over_the_wire(error), "some-callee")

    assert type(back) is type(error)
    assert back.message == error.message
    assert back.code == error.code
    assert back.dependency == error.dependency
    if isinstance(error, Overloaded):
        assert isinstance(back, Overloaded)
        assert back.retry_after_s == error.retry_after_s


def test_to_status_metadata() -> None:
    _, _, trailing = to_status(Overloaded("busy", retry_after_s=2.5, dependency="reranker"))
    assert dict(trailing) == {
        CODE_KEY: "overloaded",
        DEPENDENCY_KEY: "reranker",
        RETRY_AFTER_KEY: "2.5",
    }
    _, _, plain = to_status(InvalidInput("bad"))
    assert dict(plain) == {CODE_KEY: "invalid_input"}


def test_overloaded_without_dependency_names_the_callee() -> None:
    back = from_rpc_error(_over_the_wire(Overloaded("busy", retry_after_s=4)), "reranker")
    assert isinstance(back, Overloaded)
    assert back.dependency == "reranker"
    assert back.retry_after_s == 4


def test_error_without_dependency_keeps_none() -> None:
    back = from_rpc_error(_over_the_wire(InvalidInput("limit must be positive")), "orchestrator")
    assert isinstance(back, InvalidInput)
    assert back.dependency is None


def test_bare_unavailable_names_the_callee() -> None:
    back = from_rpc_error(
        _bare(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses; secret ip"),
        "embedder",
    )
    assert type(back) is Unavailable
    assert back.dependency == "embedder"
    assert back.message == "embedder is unavailable"
    # transport details (addresses, resolver text) do not leak into the message
    assert "secret" not in back.message


@pytest.mark.parametrize(
    ("status", "cls", "message"),
    [
        (grpc.StatusCode.DEADLINE_EXCEEDED, DeadlineExceeded, "retriever did not answer"),
        (grpc.StatusCode.CANCELLED, Cancelled, "the call to retriever was cancelled"),
        (grpc.StatusCode.UNIMPLEMENTED, BackendFailure, "retriever failed (unimplemented)"),
        (grpc.StatusCode.UNKNOWN, BackendFailure, "retriever failed (unknown)"),
        (grpc.StatusCode.INVALID_ARGUMENT, InvalidInput, "retriever failed (invalid_argument)"),
    ],
)
def test_bare_status_maps_to_the_hierarchy(
    status: grpc.StatusCode, cls: type[GroundwireError], message: str
) -> None:
    back = from_rpc_error(_bare(status, "raw details"), "retriever")
    assert type(back) is cls
    assert back.dependency == "retriever"
    assert back.message.startswith(message)


def test_bare_resource_exhausted_is_overloaded_with_default_retry() -> None:
    back = from_rpc_error(_bare(grpc.StatusCode.RESOURCE_EXHAUSTED), "reranker")
    assert isinstance(back, Overloaded)
    assert back.retry_after_s == 1.0
    assert back.dependency == "reranker"


def test_unknown_code_in_metadata_falls_back_to_status() -> None:
    error = grpc.aio.AioRpcError(
        grpc.StatusCode.NOT_FOUND,
        grpc.aio.Metadata(),
        grpc.aio.Metadata((CODE_KEY, "from_the_future"), (DEPENDENCY_KEY, "store")),
        "no such source",
    )
    back = from_rpc_error(error, "retriever")
    assert type(back) is NotFound
    assert back.message == "no such source"
    assert back.dependency == "store"


@pytest.mark.parametrize(("error", "status"), ROUND_TRIP_CASES, ids=lambda v: repr(v))
def test_error_info_round_trip(error: GroundwireError, status: grpc.StatusCode) -> None:
    info = to_error_info(error)
    assert info.code == error.code
    assert info.message == error.message
    assert info.dependency == (error.dependency or "")

    wire = common_pb2.ErrorInfo.FromString(info.SerializeToString())
    back = from_error_info(wire)

    assert type(back) is type(error)
    assert (back.message, back.dependency) == (error.message, error.dependency)
    if isinstance(error, Overloaded):
        assert isinstance(back, Overloaded)
        assert back.retry_after_s == error.retry_after_s
    else:
        assert info.retry_after_s == 0.0


def test_error_info_unknown_code_is_the_base_error() -> None:
    back = from_error_info(common_pb2.ErrorInfo(code="from_the_future", message="odd"))
    assert type(back) is GroundwireError
    assert back.message == "odd" and back.dependency is None


def test_error_info_overloaded_without_retry_defaults_to_one_second() -> None:
    back = from_error_info(common_pb2.ErrorInfo(code="overloaded", message="busy"))
    assert isinstance(back, Overloaded)
    assert back.retry_after_s == 1.0


def test_error_info_keeps_insufficient_storage_and_its_retry_after() -> None:
    back = from_error_info(
        to_error_info(InsufficientStorage("disk nearly full", retry_after_s=60, dependency="x"))
    )
    assert type(back) is InsufficientStorage
    assert back.retry_after_s == 60
    assert back.dependency == "x"


def test_codes_are_unique_and_registered() -> None:
    classes = [
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
        GroundwireError,
    ]
    assert {cls.code for cls in classes} == set(ERRORS_BY_CODE)
    assert all(ERRORS_BY_CODE[cls.code] is cls for cls in classes)


def test_repr_and_str_carry_the_message() -> None:
    error = Unavailable("embedder is unavailable", dependency="embedder")
    assert str(error) == "embedder is unavailable"
    assert repr(error) == "Unavailable('embedder is unavailable', dependency='embedder')"
