"""The service token's pieces without a model: an open server warns, a wrong or
missing token is refused by digest (never echoed), health is exempt, and a client
call carries ``authorization: Bearer <token>`` once (an earlier copy is replaced)."""

from __future__ import annotations

import logging
from typing import Any

import grpc
import pytest

from groundwire_core.grpc.service_auth import (
    ServiceTokenInterceptor,
    client_interceptors,
    server_interceptors,
    token_metadata,
)


class Details:
    def __init__(self, method: str, metadata: tuple[tuple[str, str], ...]) -> None:
        self.method = method
        self.invocation_metadata = metadata


def test_an_open_server_says_so(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="groundwire.server"):
        assert server_interceptors(None, "retriever") == []
    assert "retriever accepts gRPC calls from anyone" in caplog.text
    assert len(server_interceptors("t0k3n-t0k3n", "retriever")) == 1
    with pytest.raises(ValueError):
        ServiceTokenInterceptor("")


def test_the_token_is_checked_and_health_is_exempt() -> None:
    check = ServiceTokenInterceptor("t0k3n-t0k3n")
    rpc = "/groundwire.retriever.v1.RetrieverService/DropCollection"
    assert check.allows(Details(rpc, token_metadata("t0k3n-t0k3n")))  # type: ignore[arg-type]
    for metadata in ((), token_metadata("wrong"), (("authorization", "t0k3n-t0k3n"),)):
        assert not check.allows(Details(rpc, metadata))  # type: ignore[arg-type]
    assert check.allows(Details("/grpc.health.v1.Health/Check", ()))  # type: ignore[arg-type]
    reflection = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
    assert not check.allows(Details(reflection, ()))  # type: ignore[arg-type]


async def test_a_client_call_carries_the_token_once() -> None:
    assert client_interceptors(None) == []
    unary, _stream = client_interceptors("t0k3n-t0k3n")
    seen: list[Any] = []

    async def continuation(details: grpc.aio.ClientCallDetails, request: Any) -> str:
        seen.append(list(details.metadata or ()))
        return "ok"

    details = grpc.aio.ClientCallDetails(
        "/x.Y/Z", None, grpc.aio.Metadata(("authorization", "Bearer old"), ("a", "b")), None, None
    )
    assert await unary.intercept_unary_unary(continuation, details, object()) == "ok"  # type: ignore[attr-defined]
    assert seen[0] == [("a", "b"), ("authorization", "Bearer t0k3n-t0k3n")]
