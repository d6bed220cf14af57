"""Live sources on every surface (issue #33): the real chain without an LLM behind the
gateway app, a collection of a product's guide, and its reference served on 127.0.0.1
(the collection's allowed domain named in the retriever's LIVE_DOMAINS, 127.0.0.1
allowed through OUTBOUND_ALLOWED_NETWORKS). A question the guide does not cover is
answered from the live reference page, and every surface marks that source live with
its URL and fetch time: the ``/v1/chat`` events and what the CLI prints, the
OpenAI-compatible response, the MCP ``ask`` tool, and the chat page (a "live" badge)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, redirect_stdout
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

import httpx2
import pytest
import pytest_asyncio
import uvicorn
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from groundwire_cli.chat import ChatOutcome, parse_sse
from groundwire_cli.demo import print_answer
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings
from tests.integration.gateway.browser import page_at
from tests.integration.gateway.chain import COLLECTION, serve_chain
from tests.site_server import Reply, Site, serve

pytestmark = pytest.mark.asyncio(loop_scope="module")

DOCS = {
    "install.md": "# Installing Ferry\n\nInstall ferry with pip install ferry. A ferry vault "
    "needs Python 3.11 and 200 MB of disk. The vault holds the copied folders.",
    "configure.md": "# Configuring Ferry\n\nThe ferry.toml file sets the vault folder and the "
    "number of parallel transfers of a vault.",
    "usage.md": "# Using Ferry\n\nRun ferry copy SOURCE DEST to copy a folder into a vault; "
    "ferry status lists the transfers in progress.",
}
QUESTION = "How do I rotate the encryption keys of a ferry vault?"
ROTATE = "ferry keys rotate"


@dataclass
class Served:
    http: httpx2.AsyncClient
    url: str
    """The same app over a real socket (for the browser)."""
    page: str
    """The live page's URL."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with serve(Site()) as served:
        served.html(
            "/reference/encryption-keys.html",
            "Encryption keys",
            f"To rotate the encryption keys of a vault, run {ROTATE} --vault NAME. The old "
            "key stays readable for thirty days.",
        )
        served.pages["/sitemap.xml"] = Reply(
            body=(
                '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/'
                f'sitemap/0.9"><url><loc>{served.base}/reference/encryption-keys.html</loc>'
                "</url></urlset>"
            ).encode(),
            content_type="application/xml",
        )
        yield served


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def served(
    minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory, site: Site
) -> AsyncIterator[Served]:
    def retriever(settings: RetrieverSettings) -> RetrieverService:
        return RetrieverService(
            settings.model_copy(
                update={
                    "outbound_allowed_networks": "127.0.0.1/32",  # the docs site's loopback
                    "live_domains": {COLLECTION: [site.base]},
                }
            )
        )

    async with AsyncExitStack() as stack:
        app = await serve_chain(
            stack,
            minilm_dir=minilm_dir,
            data_path=tmp_path_factory.mktemp("qdrant"),
            docs=DOCS,
            llm_url="http://127.0.0.1:9",
            retriever=retriever,
            # no LLM at all: Groundwire's own lookup, the extractive answer
            orchestrator={"anthropic_api_key": None, "anthropic_base_url": None, "live_docs": True},
        )
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                transport=httpx2.ASGITransport(app=app), base_url="http://gw", timeout=60
            )
        )
        port = _free_port()
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
        )
        task = asyncio.create_task(server.serve())
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.05)
        assert server.started, "the page's server did not start"
        try:
            yield Served(
                http, f"http://127.0.0.1:{port}", f"{site.base}/reference/encryption-keys.html"
            )
        finally:
            server.should_exit = True
            await task


async def test_the_chat_events_and_the_cli_mark_the_source_live(served: Served) -> None:
    body = {"messages": [{"role": "user", "content": QUESTION}]}
    async with served.http.stream("POST", "/v1/chat", json=body) as reply:
        assert reply.status_code == 200
        stream = "".join([chunk async for chunk in reply.aiter_text()])
    outcome = ChatOutcome.from_events(parse_sse(stream.splitlines()))
    assert outcome.mode == "extractive" and ROTATE in outcome.answer, outcome.answer
    assert outcome.cited, "the answer cites the live page"
    for source in outcome.cited:
        assert source.live and source.fetched_at > 0 and source.url == served.page
    printed = StringIO()
    with redirect_stdout(printed):
        print_answer(QUESTION, outcome)
    text = printed.getvalue()
    assert "[live, fetched " in text and served.page in text, text


async def test_the_openai_compatible_response_marks_the_source_live(served: Served) -> None:
    body: dict[str, Any] = {
        "model": "groundwire",
        "messages": [{"role": "user", "content": QUESTION}],
    }
    reply = await served.http.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200
    completion = reply.json()
    assert ROTATE in completion["choices"][0]["message"]["content"]
    [cited] = completion["citations"]
    assert cited["live"] is True and cited["fetched_at"] > 0 and cited["url"] == served.page
    stages = {s["name"]: s for s in completion["groundwire"]["stages"]}
    assert stages["live_docs"]["details"]["lookups"] == "1"


async def test_the_mcp_ask_tool_marks_the_source_live(served: Served) -> None:
    async with McpClient(
        streamable_http_client("http://gw/mcp", http_client=served.http)
    ) as client:
        result = await client.call_tool("ask", {"question": QUESTION})
    assert not result.is_error and result.structured_content is not None
    answer = result.structured_content
    assert ROTATE in answer["answer"], json.dumps(answer)
    [source] = answer["sources"]
    assert source["live"] is True and source["fetched_at"] > 0
    assert source["url"] == served.page and source["resource"] == ""


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    return tmp_path / "profile"


async def test_the_page_shows_a_live_badge(served: Served, profile: Path) -> None:
    async with page_at(f"{served.url}/", profile) as page:
        await page.get_by_label("Your question").fill(QUESTION)
        await page.get_by_role("button", name="Ask").click()
        await page.locator(".answer[data-state='done']").wait_for(timeout=60_000)
        badge = page.locator("#sources .chip.live").first
        await badge.wait_for(timeout=10_000)
        title = await badge.get_attribute("title") or ""
        link = await page.locator("#sources li a").first.get_attribute("href")
    assert "Fetched live from the documentation site" in title, title
    assert link == served.page
