"""A headless Chromium page on a served gateway, for the page tests that need only one
(Debian's /usr/bin/chromium through playwright: no browser download)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from playwright.async_api import Page, async_playwright

CHROMIUM = "/usr/bin/chromium"


@asynccontextmanager
async def page_at(url: str, profile: Path) -> AsyncIterator[Page]:
    """A page opened on ``url`` in a fresh profile folder; the browser closed after."""
    assert Path(CHROMIUM).exists(), "apt-get install chromium (scripts/ci_system_deps.sh)"  # noqa: ASYNC240
    async with async_playwright() as p:
        context = await p.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
            viewport={"width": 1100, "height": 800},
        )
        try:
            page = await context.new_page()
            await page.goto(url)
            yield page
        finally:
            await context.close()
