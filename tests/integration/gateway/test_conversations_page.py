"""The page's feedback and past conversations in headless Chromium (/usr/bin/chromium
driven by playwright) against a gateway on a real socket over the in-memory upstream:
an answer is rated wrong with a comment (the report then lists it), a new conversation
starts, and the past one is reopened from the list with its answer, citations and
rating, and a next question continues it."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import BrowserContext, async_playwright

from tests.e2e.test_chat_page import AXE, serious_violations
from tests.integration.gateway.test_conversations import OPERATOR, serve, settings_for

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SCREENSHOTS = Path(tempfile.gettempdir()) / "groundwire-screenshots" / "conversations"
QUESTION = "How do I install it?"


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[str]:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    yield from serve(settings_for(f"sqlite:///{tmp_path / 'state.sqlite3'}"))


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    assert Path(CHROMIUM).exists(), "apt-get install chromium (scripts/ci_system_deps.sh)"
    return tmp_path / "profile"


@pytest.fixture
async def browser(profile: Path) -> AsyncIterator[BrowserContext]:
    async with async_playwright() as p:
        context = await p.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport={"width": 1280, "height": 1000},
        )
        await context.add_init_script(path=str(AXE))  # as the e2e page test: CSP untouched
        try:
            yield context
        finally:
            await context.close()


async def test_rate_an_answer_then_reopen_the_conversation(
    browser: BrowserContext, gateway: str
) -> None:
    page = await browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    await page.goto(f"{gateway}/")
    assert await page.locator("#past-empty").is_visible()

    await page.get_by_label("Your question").fill(QUESTION)
    await page.get_by_role("button", name="Ask").click()
    await page.wait_for_selector("#answer[data-state='done']", timeout=30_000)
    rating = page.get_by_role("group", name="Rate this answer")
    await rating.get_by_role("button", name="Wrong").click()
    await page.wait_for_selector(".feedback-status:has-text('Recorded')", timeout=15_000)
    assert await rating.get_by_role("button", name="Wrong").get_attribute("aria-pressed") == "true"
    await page.get_by_label("Comment on this answer").fill("It is pipx, not pip")
    await page.get_by_role("button", name="Send comment").click()
    await page.wait_for_selector(".feedback-status:has-text('Comment recorded')", timeout=15_000)
    past = page.locator("#conversations button.past")
    await past.first.wait_for(timeout=15_000)
    assert await past.count() == 1 and await past.first.inner_text() == QUESTION
    await page.screenshot(path=str(SCREENSHOTS / "rated.png"), full_page=True)
    assert await serious_violations(page) == []
    print(f"screenshots in {SCREENSHOTS}")

    async with httpx.AsyncClient(base_url=gateway) as client:
        answered = await client.get(
            "/v1/admin/report",
            params={"collection": "docs"},
            headers={"Authorization": f"Bearer {OPERATOR}"},
        )
    report = answered.json()
    assert [(e["question"], e["comments"]) for e in report["marked_wrong"]] == [
        (QUESTION, ["It is pipx, not pip"])
    ]

    await page.get_by_role("button", name="New conversation").click()
    assert await page.locator("#transcript article").count() == 0
    await past.first.click()
    await page.wait_for_selector("#status:has-text('Reopened')", timeout=15_000)
    turns = page.locator("#transcript article")
    assert await turns.count() == 1
    assert QUESTION in await turns.first.inner_text()
    assert "Install it with pip" in await page.inner_text("#answer")
    assert await page.locator("#citations a.chip").count() == 2
    reopened = page.get_by_role("group", name="Rate this answer")
    assert await reopened.get_by_role("button", name="Wrong").get_attribute("aria-pressed") == (
        "true"
    )
    assert await page.locator("#stages tbody tr").count() >= 3
    await page.screenshot(path=str(SCREENSHOTS / "reopened.png"), full_page=True)
    assert await serious_violations(page) == []

    # the next question continues the reopened conversation (one entry, two answers)
    await page.get_by_label("Your question").fill("And on Windows?")
    await page.get_by_role("button", name="Ask").click()
    await page.wait_for_selector("#answer[data-state='done']", timeout=30_000)
    await page.wait_for_selector("#conversations .meta:has-text('2 answer(s)')", timeout=15_000)
    assert await past.count() == 1
    assert problems == []
