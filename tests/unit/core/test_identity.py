"""The caller's identity: its metadata form, and its trip across two real gRPC hops
through the shared interceptors (as gateway → orchestrator → retriever)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.interceptors import ServerRuntimeInterceptor
from groundwire_core.identity import (
    GROUPS_KEY,
    Identity,
    bind_identity,
    current_identity,
    identity_scope,
)

BOB = Identity(tenant="acme corp", user="bob@acme.example", groups=frozenset({"eng", "a,b"}))


def test_metadata_round_trip_quotes_every_value() -> None:
    pairs = BOB.to_metadata()
    assert dict(pairs)[GROUPS_KEY].count(",") == 1  # a comma inside a group is quoted
    assert Identity.from_metadata(pairs) == BOB
    admin = Identity(tenant="acme", unrestricted=True)
    assert Identity.from_metadata(admin.to_metadata()) == admin
    assert Identity.from_metadata([("x-request-id", "r1")]) is None
    assert Identity.from_metadata(None) is None


def test_access_entries() -> None:
    assert BOB.access() == ("public", "user:bob@acme.example", "group:a,b", "group:eng")
    assert Identity(tenant="acme").access() == ("public",)
    assert Identity(unrestricted=True).access() is None


def test_scope_undoes_a_bind_made_inside_it() -> None:
    assert current_identity() is None
    with identity_scope(None):
        bind_identity(BOB)
        assert current_identity() == BOB
    assert current_identity() is None


def _unary(handler: object) -> grpc.GenericRpcHandler:
    return grpc.method_handlers_generic_handler(
        "test.Hop",
        {"Call": grpc.unary_unary_rpc_method_handler(handler)},  # type: ignore[arg-type]
    )


async def _server(handler: object) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server(interceptors=[ServerRuntimeInterceptor()])
    server.add_generic_rpc_handlers([_unary(handler)])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


@pytest.fixture
async def hops() -> AsyncIterator[tuple[str, list[Identity | None]]]:
    """``outer`` (an orchestrator) calls ``inner`` (a retriever), passing nothing on by
    hand; ``inner`` records the identity it sees."""
    seen: list[Identity | None] = []

    async def inner_handler(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        seen.append(current_identity())
        return b"ok"

    inner, inner_addr = await _server(inner_handler)
    channel = create_channel(inner_addr)
    call = channel.unary_unary("/test.Hop/Call")

    async def outer_handler(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return bytes(await call(request))

    outer, outer_addr = await _server(outer_handler)
    yield outer_addr, seen
    await channel.close()
    await outer.stop(None)
    await inner.stop(None)


async def test_identity_crosses_two_hops(hops: tuple[str, list[Identity | None]]) -> None:
    outer_addr, seen = hops
    async with create_channel(outer_addr) as channel:
        call = channel.unary_unary("/test.Hop/Call")
        with identity_scope(BOB):
            assert await call(b"x") == b"ok"
        assert await call(b"x") == b"ok"  # outside any user request: no identity
    assert seen == [BOB, None]
