"""Acceptance: the web page in headless Chromium (Debian's /usr/bin/chromium driven by
playwright; no browser download), against a gateway process over the fake upstream.
Type a question, see the answer stream in (at least two DOM updates before done), a
citation chip linking to its source, the sources panel and the stage inspector
listing every stage with its details; the collection picker filled from the API; the
search mode's ranked results; an error event shown without breaking the page.

The real-services conversation (three turns, Markdown, upload, axe-core) is
tests/e2e/test_chat_page.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import BrowserContext, async_playwright

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Records every change of the current answer's text, and the state it ended in.
OBSERVE = """
() => {
  window.__updates = [];
  const transcript = document.getElementById('transcript');
  new MutationObserver(() => {
    const answer = document.getElementById('answer');
    if (answer) window.__updates.push({text: answer.textContent, state: answer.dataset.state});
  }).observe(transcript, {childList: true, characterData: true, subtree: true,
                          attributes: true, attributeFilter: ['data-state']});
}
"""


@pytest.fixture(scope="module")
def gateway(gateways: Any, fake_upstream: Any) -> Any:
    (gw,) = gateways.start(**fake_upstream.env())
    return gw


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    assert Path(CHROMIUM).exists(), "apt-get install chromium (scripts/ci_system_deps.sh)"
    return tmp_path / "profile"


@pytest.fixture
async def browser(profile: Path) -> AsyncIterator[BrowserContext]:
    async with async_playwright() as p:
        context = await p.chromium.launch_persistent_context(
            str(profile),  # a fresh --user-data-dir
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
        )
        try:
            yield context
        finally:
            await context.close()


async def test_page_streams_an_answer_with_chips_sources_and_stages(
    browser: BrowserContext, gateway: Any, fake_upstream: Any
) -> None:
    page = await browser.new_page()
    requests: list[str] = []
    problems: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))

    loaded = await page.goto(f"{gateway.url}/")
    assert loaded is not None
    assert "default-src 'self'" in (await loaded.all_headers())["content-security-policy"]
    assert await page.title() == "Groundwire"
    await page.evaluate(OBSERVE)
    await page.get_by_label("Your question").fill("slow please: how do I install it?")
    await page.get_by_role("button", name="Ask").click()
    await page.wait_for_selector("#answer[data-state='done']", timeout=15_000)

    answer = await page.inner_text("#answer")
    assert answer == "Install it with one pip command [1]; each client gets 15 chats a minute [2]."
    updates: list[dict[str, str]] = await page.evaluate("window.__updates")
    before_done = []
    for u in updates:
        if u["state"] == "done":
            break
        before_done.append(u["text"].strip())  # Markdown: the text of a <p>
    partial = [t for t in dict.fromkeys(before_done) if t and t != answer]
    assert len(partial) >= 2, f"the answer did not stream: {updates}"
    assert all(answer.startswith(t) for t in partial)  # it grew, piece by piece

    chips = page.locator("#citations a.chip")
    assert await chips.count() == 2
    assert await chips.nth(0).get_attribute("href") == "https://docs.example.com/install"
    assert await chips.nth(1).get_attribute("href") == "https://docs.example.com/limits"
    assert "[1] Install" in await chips.nth(0).inner_text()
    assert await chips.nth(0).get_attribute("target") == "_blank"

    sources = page.locator("#sources li")
    assert await sources.count() == 3
    assert "guide/limits.md" in await sources.nth(1).inner_text()

    rows = page.locator("#stages tbody tr")
    names = [await rows.nth(i).get_attribute("data-stage") for i in range(await rows.count())]
    assert names == ["analysis", "retrieval", "rerank", "answer"]
    rerank = await rows.nth(2).inner_text()
    assert "4.2 ms" in rerank and "the reranker is unavailable" in rerank
    assert "no" in await rows.nth(1).inner_text()
    # each stage's details are shown: what the retrieval stage found
    assert "candidates out" in await rows.nth(1).inner_text()
    assert "3" in await rows.nth(1).locator("dd").first.inner_text()

    assert await page.inner_text("#status") == "Done."
    assert not problems, problems
    # nothing but the gateway was contacted: no CDN, no fonts, no analytics
    assert requests and all(r.startswith(gateway.url) for r in requests), requests
    asked = fake_upstream.orchestrator.asks[-1]
    assert asked.question == "slow please: how do I install it?" and asked.collection == "docs"


async def test_page_shows_errors_without_breaking(browser: BrowserContext, gateway: Any) -> None:
    page = await browser.new_page()
    await page.goto(f"{gateway.url}/")
    await page.get_by_label("Your question").fill("this will fail")
    await page.get_by_role("button", name="Ask").click()
    await page.wait_for_selector("#answer[data-state='error']", timeout=15_000)
    assert "the llm failed (backend_failure)" in await page.inner_text("#status")
    # the page still works, from the keyboard: Ctrl+Enter sends, and the answer is a
    # turn of its own in the transcript (an aria-live log)
    question = page.get_by_label("Your question")
    await question.fill("and now?")
    await question.press("Control+Enter")
    await page.wait_for_selector("#answer[data-state='done']", timeout=15_000)
    assert await page.locator("#transcript article.turn").count() == 2
    assert await page.get_attribute("#transcript", "aria-live") == "polite"
    # Tab order at rest: question, then the Ask button (enabled again just after the
    # answer's state is written; while disabled, Tab skips it to Stop: ci15)
    await page.wait_for_selector("#send:not([disabled])", timeout=15_000)
    await question.focus()
    await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.id") == "send"


async def test_picker_lists_collections_and_search_mode_ranks(
    browser: BrowserContext, gateway: Any, fake_upstream: Any
) -> None:
    page = await browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    await page.goto(f"{gateway.url}/")
    picker = page.get_by_label("Collection", exact=True)
    await picker.locator("option[value='notes']").wait_for(state="attached", timeout=10_000)
    options = await picker.locator("option").all_inner_texts()
    assert options == ["Server default", "docs", "notes"], options
    await picker.select_option("notes")
    searches = fake_upstream.orchestrator.searches
    await page.get_by_label("Search (ranked passages)").check()
    await page.get_by_label("Your question").fill("rate limits")
    await page.get_by_role("button", name="Search").click()
    await page.wait_for_selector("#answer[data-state='done']", timeout=15_000)
    results = page.locator("#answer ol.results li")
    assert await results.count() == 3
    first = await results.nth(0).inner_text()
    assert "Guide \u203a Install" in first and "score 0.910" in first and "pip install" in first
    assert await results.nth(0).locator("a").get_attribute("href") == (
        "https://docs.example.com/install"
    )
    names = await page.locator("#stages tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.stage)"
    )
    assert names == ["retrieval", "rerank"]
    assert fake_upstream.orchestrator.searches == searches + 1
    assert await page.inner_text("#status") == "3 results."
    assert not problems, problems
