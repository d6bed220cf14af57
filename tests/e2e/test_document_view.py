"""Acceptance, every source opens and sources keep their identity, through the real
services (local cluster as processes, MiniLM, embedded Qdrant, no LLM: extractive
answers): files uploaded without URLs, two ``index.html`` of one site kept apart by
their relative paths, a changed upload reported as ``updated``, the sources listing
with counts and hashes, and in headless Chromium a citation chip that opens the
stored document with the cited chunk highlighted and scrolled into view."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from playwright.async_api import BrowserContext, async_playwright

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_cli.cluster import LocalCluster
from groundwire_core.grpc.client import create_channel

pytestmark = pytest.mark.e2e

ADMIN_KEY = "e2e-admin-key-docview"
ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}
COLLECTION = "handbook"
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SCREENSHOT = Path("/tmp/docview.png")
TOPICS = (
    "hay storage",
    "water troughs",
    "fence repair",
    "hoof care",
    "visitor paths",
    "night patrols",
    "vaccination records",
    "feeding schedules",
    "shade structures",
    "foal weaning",
)


def _page(title: str, sections: list[tuple[str, str]]) -> bytes:
    body = "".join(f"<h2>{h}</h2><p>{p}</p>" for h, p in sections)
    head = f"<html><head><title>{title}</title></head>"
    return f"{head}<body><h1>{title}</h1>{body}</body></html>".encode()


def _handbook() -> bytes:
    """A long page whose last section alone answers the question asked below."""
    sections = [
        (
            topic.title(),
            " ".join(
                f"Rule {n} of {topic}: keepers check the {topic} log every morning, note what "
                f"changed since the previous shift, and report any problem with {topic} to the "
                "head keeper before noon."
                for n in range(1, 7)
            ),
        )
        for topic in TOPICS
    ]
    sections.append(
        (
            "The lighthouse",
            "The lighthouse on Quagga Point is kept by Marisol Ventana, who climbs its 112 "
            "steps at dusk to light the lamp for the ferry from the archipelago.",
        )
    )
    return _page("Zebra keeper handbook", sections)


@pytest.fixture(scope="module")
def cluster(minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    run = tmp_path_factory.mktemp("docview-cluster")
    cluster = LocalCluster.with_free_ports(
        run,
        minilm_dir,
        run / "qdrant",
        extra_env={"GROUNDWIRE_GATEWAY_ADMIN_API_KEYS": f"ops:{ADMIN_KEY}"},
    )
    with cluster:
        cluster.start()
        cluster.wait_ready(timeout_s=120)
        yield cluster


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
            viewport={"width": 1100, "height": 700},
        )
        try:
            yield context
        finally:
            await context.close()


async def _upload(
    http: httpx.AsyncClient, files: dict[str, bytes], create: bool = False
) -> dict[str, Any]:
    response = await http.post(
        f"/v1/admin/collections/{COLLECTION}/files",
        files=[("files", (name, data, "text/html")) for name, data in files.items()],
        data={"create_collection": "true" if create else "false"},
        headers=ADMIN,
        params={"wait": "true"},  # the report, not a job to follow
    )
    assert response.status_code == 200, response.text
    report: dict[str, Any] = response.json()
    return report


async def test_sources_keep_their_ids_and_every_citation_opens(
    cluster: LocalCluster, browser: BrowserContext
) -> None:
    async with httpx.AsyncClient(base_url=cluster.gateway_url, timeout=60) as http:
        first = await _upload(
            http,
            {
                "keepers/index.html": _handbook(),
                "visitors/index.html": _page(
                    "Visitor guide", [("Hours", "The zoo opens at nine and closes at six.")]
                ),
            },
            create=True,
        )
        assert [(d["source_id"], d["status"]) for d in first["documents"]] == [
            ("keepers/index.html", "ingested"),
            ("visitors/index.html", "ingested"),
        ]
        changed = await _upload(
            http,
            {
                "visitors/index.html": _page(
                    "Visitor guide", [("Hours", "The zoo opens at ten and closes at six.")]
                )
            },
        )
        assert (changed["updated"], changed["ingested"]) == (1, 0), changed
        listed = await http.get(f"/v1/admin/collections/{COLLECTION}/sources", headers=ADMIN)
        assert listed.status_code == 200, listed.text
        sources = listed.json()["sources"]
        assert [s["source_id"] for s in sources] == ["keepers/index.html", "visitors/index.html"]
        assert sources[0]["chunks"] >= 4 and sources[1]["chunks"] == 1
        assert all(len(s["content_hash"]) == 64 and s["url"] == "" for s in sources)

    page = await browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    await page.goto(f"{cluster.gateway_url}/")
    picker = page.get_by_label("Collection", exact=True)  # filled from GET /v1/models
    await picker.locator(f"option[value='{COLLECTION}']").wait_for(state="attached")
    await picker.select_option(COLLECTION)
    await page.get_by_label("Your question").fill("Who keeps the lighthouse on Quagga Point?")
    await page.get_by_role("button", name="Ask").click()
    await page.wait_for_selector("#answer[data-state='done']", timeout=60_000)

    chip = page.locator("#citations a.chip").first
    href = await chip.get_attribute("href")
    assert href is not None and href.startswith("/v1/sources/view?"), href
    query = parse_qs(urlsplit(href).query)
    assert query["source_id"] == ["keepers/index.html"] and query["collection"] == [COLLECTION]
    assert urlsplit(href).fragment == "cited"
    listed_href = await page.locator("#sources li a").first.get_attribute("href")
    assert listed_href is not None and listed_href.startswith("/v1/sources/view?")

    async with browser.expect_page() as opened:
        await chip.click()
    view = await opened.value
    await view.wait_for_load_state("load")
    assert view.url.startswith(f"{cluster.gateway_url}/v1/sources/view?")
    marked = view.locator(".chunk.cited")
    assert await marked.count() == 1
    shown = await marked.locator(".text").inner_text()
    async with create_channel(cluster.addr("retriever")) as channel:
        stored = await retriever_pb2_grpc.RetrieverServiceStub(channel).ReadSource(
            retriever_pb2.ReadSourceRequest(collection=COLLECTION, source_id="keepers/index.html")
        )
    cited = next(c for c in stored.chunks if c.chunk_id == query["chunk"][0])
    assert shown == cited.text, "the highlighted passage is the cited chunk"
    assert "Marisol Ventana" in shown
    assert await marked.get_attribute("id") == f"chunk-{cited.chunk_index}"
    assert cited.chunk_index >= 3, "the cited chunk is far down the document"
    box = await view.evaluate(
        """() => {
          const r = document.querySelector('.chunk.cited').getBoundingClientRect();
          return {top: r.top, bottom: r.bottom, height: innerHeight, scrolled: scrollY};
        }"""
    )
    assert box["scrolled"] > 0, box
    assert 0 <= box["top"] < box["height"] and box["bottom"] > 0, f"not in view: {box}"
    assert await view.locator(".chunk").count() == len(stored.chunks)
    await view.screenshot(path=str(SCREENSHOT))
    assert not problems, problems
