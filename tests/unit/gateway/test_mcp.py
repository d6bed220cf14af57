"""The MCP server at /mcp over the in-memory upstream: the SDK's own client (streamable
HTTP over ASGI, no sockets) lists and calls the tools and reads a document resource;
the key check and the limits are the HTTP API's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, cast

import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from groundwire_gateway import models
from groundwire_gateway.app import create_app
from groundwire_gateway.settings import GatewaySettings
from groundwire_gateway.state import UpstreamApi

from .conftest import FakeUpstream

KEY = "team-key-123456"
McpFactory = Callable[..., AbstractAsyncContextManager[Client]]


@pytest.fixture
def mcp_client(upstream: FakeUpstream) -> McpFactory:
    """An MCP client of a fresh gateway app (its lifespan running) with ``settings``."""

    @asynccontextmanager
    async def connect(key: str | None = None, **settings: Any) -> AsyncIterator[Client]:
        app = create_app(GatewaySettings(**settings), cast(UpstreamApi, upstream))
        headers = {"authorization": f"Bearer {key}"} if key else {}
        http = httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app), base_url="http://gateway", headers=headers
        )
        async with app.router.lifespan_context(app), http:
            async with Client(streamable_http_client("http://gateway/mcp", http_client=http)) as c:
                yield c

    return connect


async def test_tools_are_listed_with_descriptions_for_a_model(mcp_client: McpFactory) -> None:
    async with mcp_client() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        templates = (await client.list_resource_templates()).resource_templates
    assert set(tools) == {"search", "ask", "list_collections", "read_document"}
    for tool in tools.values():
        assert tool.description and len(tool.description) > 150, tool.name
        assert tool.output_schema is not None
    assert tools["search"].input_schema["required"] == ["query"]
    assert [t.uri_template for t in templates] == [
        "groundwire://documents/{collection}/{+source_id}"
    ]


async def test_search_and_ask_carry_sources_and_checked_citations(
    mcp_client: McpFactory, upstream: FakeUpstream
) -> None:
    async with mcp_client() as client:
        found = await client.call_tool("search", {"query": "how to install", "limit": 3})
        asked = await client.call_tool("ask", {"question": "How do I install it?"})
        listed = await client.call_tool("list_collections", {})
    assert not found.is_error and found.structured_content is not None
    passage = found.structured_content["passages"][0]
    assert passage["source_id"] == "s1" and passage["url"] == "https://example.com"
    assert passage["resource"] == "groundwire://documents/docs/s1"
    assert upstream.calls[0][0].limit == 3 and upstream.calls[0][1] == "docs"

    assert not asked.is_error and asked.structured_content is not None
    answer = asked.structured_content
    assert answer["mode"] == "generated" and answer["answer"].endswith("15 chats [2].")
    assert answer["citations"][0] == {
        "number": 1,
        "sentence": "Install it with pip [1]",
        "status": "supported",
        "support": 0.9,
        "method": "none",
    }
    assert [s["source_id"] for s in answer["sources"]] == ["install.md", "limits.md"]
    # judged by no method that reads meaning ("none"): never counted as supported
    assert answer["verification"] == "1 citation(s) not checked for meaning"
    assert len(answer["request_id"]) == 32  # the HTTP request's id, as in the gateway's logs
    # the text content is the same JSON, for clients that read text only
    assert json.loads(asked.content[0].text)["answer"] == answer["answer"]  # type: ignore[union-attr]
    assert upstream.asks[0]["messages"] == [("user", "How do I install it?")]

    assert listed.structured_content == {
        "collections": [
            {"name": "docs", "default": True},
            {"name": "team_notes-2", "default": False},
        ]
    }


async def test_read_document_as_tool_and_resource(
    mcp_client: McpFactory, upstream: FakeUpstream
) -> None:
    upstream.documents["guide/a b.md"] = models.StoredDocument(
        collection="docs",
        source_id="guide/a b.md",
        title="Guide",
        url="https://example.com/guide",
        doc_type="markdown",
        chunks=[
            models.StoredChunk(chunk_id="k0", chunk_index=0, heading_path=[], text="Step one."),
            models.StoredChunk(chunk_id="k1", chunk_index=1, heading_path=[], text="Step two."),
        ],
        total=2,
    )
    async with mcp_client() as client:
        read = await client.call_tool("read_document", {"source_id": "guide/a b.md"})
        resource = await client.read_resource("groundwire://documents/docs/guide/a%20b.md")
        missing = await client.call_tool("read_document", {"source_id": "nope.md"})
    assert read.structured_content is not None
    assert read.structured_content["text"] == "Step one.\n\nStep two."
    assert read.structured_content["total_chunks"] == 2
    text = resource.contents[0].text  # type: ignore[union-attr]
    assert text.startswith("# Guide\n\n<https://example.com/guide>") and "Step two." in text
    assert missing.is_error
    assert "not_found: " in missing.content[0].text  # type: ignore[union-attr]


async def test_a_call_without_a_key_is_refused_where_the_api_refuses_it(
    mcp_client: McpFactory, upstream: FakeUpstream
) -> None:
    keys = {"api_keys": f"team:{KEY}", "require_api_key": True}
    with pytest.raises(ExceptionGroup) as refused:
        async with mcp_client(**keys) as client:
            await client.list_tools()
    assert refused.group_contains(MCPError)
    # what the SDK's client was told: the API's own 401 and error body
    app = create_app(GatewaySettings(**keys), cast(UpstreamApi, upstream))
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="http://gateway"
    ) as http:
        raw = await http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"accept": "application/json, text/event-stream"},
        )
    assert raw.status_code == 401 and raw.headers["www-authenticate"] == "Bearer"
    assert raw.json()["error"]["code"] == "unauthenticated"
    assert raw.json()["error"]["request_id"] == raw.headers["x-request-id"]
    async with mcp_client(key=KEY, **keys) as client:
        found = await client.call_tool("search", {"query": "install"})
    assert not found.is_error and upstream.calls


async def test_tool_calls_spend_the_api_rate_limit(mcp_client: McpFactory) -> None:
    async with mcp_client(search_rate_limit_per_min=1) as client:
        first = await client.call_tool("search", {"query": "install"})
        second = await client.call_tool("search", {"query": "install"})
    assert not first.is_error
    assert second.is_error
    assert "rate_limited: " in second.content[0].text  # type: ignore[union-attr]
    assert "retry after" in second.content[0].text  # type: ignore[union-attr]
