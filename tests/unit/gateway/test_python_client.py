"""The Python client (clients/python) against the gateway app over the in-memory
upstream (httpx over ASGI, no sockets): typed chat events, ``ask()``, search, and
errors — before the stream (HTTP status) and inside it (an ``error`` event) — as
exceptions with the API's code, request id and retry-after. The same client against
the real services: tests/e2e/test_client_and_mcp.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, cast

import httpx
import pytest

from groundwire_client import (
    APIConnectionError,
    AsyncClient,
    AuthenticationError,
    CitationsEvent,
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    InvalidRequestError,
    RateLimitError,
    RetrievalEvent,
    StagesEvent,
    UnavailableError,
)
from groundwire_core.errors import Unavailable
from groundwire_gateway import models
from groundwire_gateway.app import create_app
from groundwire_gateway.settings import GatewaySettings
from groundwire_gateway.state import UpstreamApi

from .conftest import FakeUpstream

KEY = "team-key-123456"
Connect = Callable[..., AbstractAsyncContextManager[AsyncClient]]


@pytest.fixture
def connect(upstream: FakeUpstream) -> Connect:
    @asynccontextmanager
    async def make(key: str | None = None, **settings: Any) -> AsyncIterator[AsyncClient]:
        app = create_app(GatewaySettings(**settings), cast(UpstreamApi, upstream))
        async with AsyncClient(
            "http://gateway", key, transport=httpx.ASGITransport(app=app)
        ) as client:
            yield client

    return make


async def test_chat_events_are_typed_and_in_order(connect: Connect) -> None:
    async with connect() as client:
        events = [e async for e in client.chat("How do I install it?")]
    assert [type(e) for e in events] == [
        RetrievalEvent,
        DeltaEvent,
        DeltaEvent,
        DeltaEvent,
        DeltaEvent,
        CitationsEvent,
        StagesEvent,
        DoneEvent,
    ]
    retrieval, done = events[0], events[-1]
    assert isinstance(retrieval, RetrievalEvent) and isinstance(done, DoneEvent)
    assert retrieval.sources[1].url == "https://docs.example.com/limits"
    assert done.answer == "".join(e.text for e in events if isinstance(e, DeltaEvent))


async def test_ask_returns_the_answer_its_citations_and_request_id(
    connect: Connect, upstream: FakeUpstream
) -> None:
    async with connect() as client:
        answer = await client.ask(
            [
                {"role": "user", "content": "How do I install it?"},
                {"role": "assistant", "content": "With pip."},
                {"role": "user", "content": "And the limits?"},
            ],
            collection="team_notes-2",
            filters={"type": ["guide"]},
        )
    assert answer.mode == "generated" and answer.answer.endswith("15 chats [2].")
    assert answer.verified and answer.citations[0].status == "supported"
    cited = answer.source(1)
    assert cited is not None and cited.source_id == "install.md"
    assert [s.name for s in answer.stages] == ["retrieval", "rerank", "answer"]
    assert len(answer.request_id) == 32
    asked = upstream.asks[0]
    assert [m[0] for m in asked["messages"]] == ["user", "assistant", "user"]
    assert asked["collection"] == "team_notes-2" and asked["filters"] == [("type", ["guide"])]


async def test_an_error_inside_the_stream_is_an_event_and_raises_from_ask(
    connect: Connect, upstream: FakeUpstream
) -> None:
    upstream.script = [
        models.RetrievalEvent(sources=[]),
        Unavailable("the LLM is down", dependency="llm"),
    ]
    async with connect() as client:
        events = [e async for e in client.chat("q")]
        with pytest.raises(UnavailableError) as failed:
            await client.ask("q")
    last = events[-1]
    assert isinstance(last, ErrorEvent) and last.code == "unavailable"
    assert failed.value.code == "unavailable" and failed.value.dependency == "llm"
    assert failed.value.status is None and len(failed.value.request_id) == 32


async def test_refusals_carry_code_request_id_and_retry_after(connect: Connect) -> None:
    async with connect(search_rate_limit_per_min=1) as client:
        found = await client.search("install", limit=2)
        with pytest.raises(RateLimitError) as limited:
            await client.search("install")
        with pytest.raises(InvalidRequestError) as invalid:
            await client.search("install", limit=500)
    assert found.results[0].source_id == "s1" and found.stages[0].name == "retrieve"
    assert limited.value.code == "rate_limited" and limited.value.status == 429
    assert limited.value.retry_after is not None and limited.value.retry_after >= 1
    assert len(limited.value.request_id) == 32
    assert invalid.value.code == "invalid_input" and "limit" in invalid.value.message
    assert "rate_limited: " in str(limited.value) and limited.value.request_id in str(limited.value)

    async with connect(api_keys=f"team:{KEY}", require_api_key=True) as anonymous:
        with pytest.raises(AuthenticationError) as refused:
            [e async for e in anonymous.chat("q")]
    assert refused.value.status == 401 and refused.value.code == "unauthenticated"
    async with connect(KEY, api_keys=f"team:{KEY}", require_api_key=True) as keyed:
        assert (await keyed.search("install")).results


async def test_an_unreachable_gateway_is_a_connection_error() -> None:
    # port 9 (discard) on loopback: nothing listens there in the test machines
    async with AsyncClient("http://127.0.0.1:9", timeout=2) as client:
        with pytest.raises(APIConnectionError):
            await client.search("q")


def test_the_clients_source_carries_every_field_the_gateway_sends() -> None:
    # the client ignores unknown fields: a field the gateway added (live, fetched_at)
    # silently vanished from the client's sources until this compared them
    from groundwire_client import models as client_models
    from groundwire_gateway import models as gateway_models

    sent = set(gateway_models.Source.model_fields)
    kept = set(client_models.Source.model_fields)
    assert sent <= kept, sorted(sent - kept)
