"""Acceptance (issue #32, 1): without a checker that reads meaning, no surface says a
citation is "verified" or "supported". The real chain in extractive mode (no LLM, the
similarity verifier only: a verbatim quote scores ~1.0 against its own chunk by
construction) behind the gateway app, and the output of every surface grepped:

- ``POST /v1/chat``'s server-sent events (the ``citations`` event, the stage report);
- ``POST /v1/chat/completions`` streamed and not (``citations`` and ``groundwire``);
- the MCP ``ask`` tool's result (its ``verification`` line included);
- what the CLI prints for the answer (``groundwire chat`` / ``demo``);
- the chat page's transcript in headless Chromium (chips, their titles, the stages).

Each citation is ``quoted`` (verbatim, nothing judged), and each surface says so.

The gateway requires a key here, as a tenant's would: the page carries it on every
call, the citation chips included (the source view 404'd for tenant keys), and the
source view and the search results show the Markdown rendered (a screenshot of the
view is written to SCREENSHOT).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import AsyncIterator
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
from tests.integration.gateway.browser import page_at
from tests.integration.gateway.chain import serve_chain

pytestmark = pytest.mark.asyncio(loop_scope="module")

DOCS = {
    "limits.md": "# Rate limits\n\nRate limits are enforced **per API key**. Each API key may "
    "send sixty requests per minute; beyond that the gateway answers with HTTP 429.\n\n"
    "## Raising a limit\n\nSet a higher limit in `groundwire.toml` and restart:\n\n"
    "```toml\n[gateway]\nrate_per_minute = 120\n```\n\n"
    "| setting | default |\n|---|---|\n| `rate_per_minute` | 60 |\n",
    "roses.md": "# Pruning roses\n\nCut each cane just above an outward-facing bud in late "
    "winter, removing dead and crossing stems first.",
}
QUESTION = "How many requests per minute may one API key send?"
OVERSTATED = re.compile(r"\b(verified|supported)\b", re.IGNORECASE)
KEY = "acme-tenant-key-honest-labels"
SCREENSHOT = Path("/tmp/source-view-markdown.png")


@dataclass
class Served:
    http: httpx2.AsyncClient
    url: str
    """The same app over a real socket (for the browser)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def served(
    minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Served]:
    async with AsyncExitStack() as stack:
        app = await serve_chain(
            stack,
            minilm_dir=minilm_dir,
            data_path=tmp_path_factory.mktemp("qdrant"),
            docs=DOCS,
            llm_url="http://127.0.0.1:9",  # never called: no key
            orchestrator={"anthropic_api_key": None},
            gateway={"api_keys": f"acme:{KEY}", "require_api_key": True},
        )
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                transport=httpx2.ASGITransport(app=app),
                base_url="http://gw",
                timeout=60,
                headers={"authorization": f"Bearer {KEY}"},
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
            yield Served(http, f"http://127.0.0.1:{port}")
        finally:
            server.should_exit = True
            await task


def _clean(where: str, text: str) -> None:
    found = OVERSTATED.findall(text)
    assert not found, f"{where} says {found} of similarity-only citations: {text[:2000]}"


async def _chat(http: httpx2.AsyncClient) -> str:
    body = {"messages": [{"role": "user", "content": QUESTION}]}
    async with http.stream("POST", "/v1/chat", json=body) as reply:
        assert reply.status_code == 200
        return "".join([chunk async for chunk in reply.aiter_text()])


async def test_the_chat_events_and_the_cli_say_quoted_not_supported(served: Served) -> None:
    stream = await _chat(served.http)
    outcome = ChatOutcome.from_events(parse_sse(stream.splitlines()))
    assert outcome.mode == "extractive" and "sixty requests per minute" in outcome.answer
    assert outcome.citations and {c.status for c in outcome.citations} == {"quoted"}
    assert {c.method for c in outcome.citations} == {"similarity"}
    _clean("the SSE stream of /v1/chat", stream)

    printed = StringIO()
    with redirect_stdout(printed):
        print_answer(QUESTION, outcome)
    text = printed.getvalue()
    assert "QUOTED" in text and "chosen by similarity" in text
    _clean("the CLI", text)


async def test_the_openai_compatible_extras_say_quoted_not_supported(served: Served) -> None:
    body: dict[str, Any] = {
        "model": "groundwire",
        "messages": [{"role": "user", "content": QUESTION}],
    }
    plain = await served.http.post("/v1/chat/completions", json=body)
    assert plain.status_code == 200
    completion = plain.json()
    assert completion["groundwire"]["mode"] == "extractive" and completion["citations"]
    _clean("/v1/chat/completions", plain.text)
    async with served.http.stream(
        "POST", "/v1/chat/completions", json={**body, "stream": True}
    ) as reply:
        assert reply.status_code == 200
        streamed = "".join([chunk async for chunk in reply.aiter_text()])
    assert '"groundwire"' in streamed
    _clean("/v1/chat/completions (stream)", streamed)


async def test_the_mcp_ask_tool_says_quoted_passages_chosen_by_similarity(
    served: Served,
) -> None:
    async with McpClient(
        streamable_http_client("http://gw/mcp", http_client=served.http)
    ) as client:
        result = await client.call_tool("ask", {"question": QUESTION})
    assert not result.is_error and result.structured_content is not None
    answer = result.structured_content
    assert answer["mode"] == "extractive"
    assert {c["status"] for c in answer["citations"]} == {"quoted"}
    assert "quoted passage" in answer["verification"]
    assert "chosen by similarity; none checked for meaning" in answer["verification"]
    _clean("the MCP ask tool", json.dumps(answer))
    _clean("the MCP ask tool's text", " ".join(getattr(c, "text", "") for c in result.content))


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    return tmp_path / "profile"


async def test_the_page_says_quoted_passages_and_its_chips_open_with_the_key(
    served: Served, profile: Path
) -> None:
    async with page_at(f"{served.url}/", profile) as page:
        await page.get_by_label("API key (if the server requires one)").fill(KEY)
        await page.get_by_label("Your question").fill(QUESTION)
        await page.get_by_role("button", name="Ask").click()
        await page.locator(".answer[data-state='done']").wait_for(timeout=60_000)
        chips = page.locator("#citations .chip")
        await chips.first.wait_for(timeout=10_000)
        shown = await page.locator("body").inner_text()
        titles = await chips.evaluate_all("chips => chips.map(c => c.title)")
        # the chip opens the stored document with the key (no URL: the source view)
        async with page.context.expect_page() as opened:
            await chips.first.click()
        tab = await opened.value
        await tab.locator("section.chunk.cited").wait_for(timeout=30_000)
        view = await tab.content()
        await tab.screenshot(path=str(SCREENSHOT), full_page=True)
        # search mode: a result's Markdown is rendered, code in <pre>
        await page.get_by_label("Search (ranked passages)").check()
        await page.get_by_label("Your question").fill("raise the rate limit toml")
        await page.get_by_role("button", name="Search").click()
        result = page.locator("ol.results li .snippet").first
        await result.wait_for(timeout=60_000)
        snippet = await result.inner_html()
    assert "Quoted passages chosen by similarity" in shown
    assert titles and all("Quoted verbatim" in t for t in titles), titles
    _clean("the page", shown + "\n" + "\n".join(titles))
    assert "<strong>per API key</strong>" in view and "<pre><code" in view
    assert "rate_per_minute = 120" in view and "```" not in view
    assert '<mark class="evidence">' in view, "the quoted sentence is marked"
    assert "<strong>" in snippet or "<pre>" in snippet or "<code>" in snippet, snippet
    assert "```" not in snippet and "**" not in snippet, snippet
