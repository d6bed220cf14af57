"""Acceptance (#25): the chat page as a product, in headless Chromium against the
real services (local cluster as processes, MiniLM, embedded Qdrant) with the fake
LLM (tests/fakes/llm_server.py) answering as a model would, citing the excerpts it
was given:

- as admin, upload a file from the page's upload panel into a new collection; the
  collection picker (filled from the API) offers it;
- a three-turn conversation in it: answers stream in as Markdown (a list, then a code
  block), each question is sent with the turns before it, the transcript keeps them;
- a citation chip opens the stored source with the cited chunk marked and the
  supporting sentence highlighted;
- switching the collection asks the next question of the other collection;
- axe-core (vendored under tests/fixtures/axe) finds no serious or critical
  violations, on the page with the conversation and on the source view.

Screenshots go to a folder the test prints (``SCREENSHOTS``).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from playwright.async_api import BrowserContext, Page, async_playwright

from groundwire_cli.cluster import LocalCluster
from tests.e2e.fault_support import FAST_MODEL, STRONG_MODEL, role_reply
from tests.fakes.llm_server import RecordedRequest, Reply
from tests.fakes.llm_thread import ThreadedFakeLLM

pytestmark = pytest.mark.e2e

ADMIN_KEY = "e2e-admin-key-chatpage"
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
AXE = Path(__file__).resolve().parent.parent / "fixtures" / "axe" / "axe.min.js"
SCREENSHOTS = Path(tempfile.gettempdir()) / "groundwire-screenshots" / "chat-page"
RUNBOOK = """\
# Gateway runbook

## Limits per client

The gateway limits each client with a sliding window of requests per minute.
A client over its limit gets HTTP 429 with a Retry-After header.

## Several replicas

Replicas share their counters in Redis, so a client spread over four replicas still \
gets one limit.

## Setting it up

Point every replica at the same Redis with one environment variable.

```bash
export GROUNDWIRE_GATEWAY_REDIS_URL=redis://redis:6379/0
```
"""
QUESTIONS = (
    "How are requests per client limited?",
    "And across several replicas?",
    "How do I set it up?",
)
CODE = "export GROUNDWIRE_GATEWAY_REDIS_URL=redis://redis:6379/0"
# (the answer's Markdown, written with {n} for the excerpt holding each phrase)
ANSWERS = {
    QUESTIONS[0]: (
        "The gateway limits each client with a sliding window of requests per minute [{a}].\n\n"
        "- A client over its limit gets HTTP 429 with a Retry-After header [{b}].\n",
        {"a": "sliding window", "b": "Retry-After"},
    ),
    QUESTIONS[1]: (
        "Replicas share their counters in Redis, so a client spread over four replicas "
        "still gets one limit [{a}].",
        {"a": "share their counters"},
    ),
    QUESTIONS[2]: (
        "Point every replica at the same Redis with one environment variable [{a}].\n\n"
        f"```bash\n{CODE}\n```\n[{{a}}]\n",  # a code block's marker: on a line of its own
        {"a": "GROUNDWIRE_GATEWAY_REDIS_URL"},
    ),
    "What do clients see over a limit?": (
        "A request over a limit is rejected immediately with HTTP **429 Too Many "
        "Requests** and a `Retry-After` header saying how many seconds to wait [{a}].",
        {"a": "rejected immediately"},
    ),
}
_EXCERPT = re.compile(r'<excerpt n="(\d+)"[^>]*>(.*?)</excerpt>', re.DOTALL)
_QUESTION = re.compile(r"<question>\s*(.*?)\s*</question>", re.DOTALL)


def _last_user_text(request: RecordedRequest) -> str:
    content = request.body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content)


def model_reply(request: RecordedRequest) -> Reply:
    """Analysis as a pass-through (fault_support.role_reply); an answer cites the
    excerpts that hold its phrases; anything else (a judge) gets no usable verdict."""
    if request.body.get("model") == FAST_MODEL:
        return role_reply(request)
    text = _last_user_text(request)
    asked = _QUESTION.search(text)
    if asked is None or asked.group(1) not in ANSWERS:
        return Reply(text="(no verdict)")
    template, phrases = ANSWERS[asked.group(1)]
    excerpts = {int(n): body for n, body in _EXCERPT.findall(text)}
    numbers = {
        key: next((n for n, body in sorted(excerpts.items()) if phrase in body), 1)
        for key, phrase in phrases.items()
    }
    # streamed in small pieces, as a model does
    answer = template.format(**numbers)
    return Reply(text=[answer[i : i + 12] for i in range(0, len(answer), 12)])


@pytest.fixture(scope="module")
def llm() -> Iterator[ThreadedFakeLLM]:
    fake = ThreadedFakeLLM(model_reply).start()
    try:
        yield fake
    finally:
        fake.close()


@pytest.fixture(scope="module")
def cluster(
    minilm_dir: Path,
    repo_root: Path,
    llm: ThreadedFakeLLM,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LocalCluster]:
    run = tmp_path_factory.mktemp("chat-page-cluster")
    cluster = LocalCluster.with_free_ports(
        run,
        minilm_dir,
        run / "qdrant",
        extra_env={
            "GROUNDWIRE_GATEWAY_ADMIN_API_KEYS": f"ops:{ADMIN_KEY}",
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_API_KEY": "fake-anthropic-key",
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_BASE_URL": llm.url,
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_FAST_MODEL": FAST_MODEL,
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_STRONG_MODEL": STRONG_MODEL,
            "GROUNDWIRE_ORCHESTRATOR_LLM_ORDER": "anthropic",
        },
    )
    with cluster:
        cluster.start()
        cluster.wait_ready(timeout_s=120)
        corpus = repo_root / "samples" / "corpus"
        files = [
            ("files", (name, (corpus / name).read_bytes(), "text/markdown"))
            for name in ("rate-limits.md", "installation.md")
        ]
        response = httpx.post(
            f"{cluster.gateway_url}/v1/admin/collections/docs/files",
            params={"wait": "true"},  # the report, not a job to follow
            files=files,
            data={"create_collection": "true"},
            headers={"authorization": f"Bearer {ADMIN_KEY}"},
            timeout=120,
        )
        assert response.status_code == 200, response.text
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
            viewport={"width": 1280, "height": 900},
        )
        # axe-core is added as an init script (through the DevTools protocol, not the
        # page): the page's CSP stays exactly as served
        await context.add_init_script(path=str(AXE))
        try:
            yield context
        finally:
            await context.close()


async def serious_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's violations of impact serious or critical (WCAG 2 A/AA rules)."""
    found: list[dict[str, Any]] = await page.evaluate(
        """async () => {
          const result = await axe.run(document, {
            runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']},
          });
          return result.violations.map(v => ({
            id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5),
          }));
        }"""
    )
    return [v for v in found if v["impact"] in ("serious", "critical")]


async def ask(page: Page, text: str, turn: int) -> None:
    await page.get_by_label("Your question").fill(text)
    await page.get_by_role("button", name="Ask").click()
    turns = page.locator("#transcript article.turn")
    await turns.nth(turn).locator(".answer[data-state='done']").wait_for(timeout=60_000)


async def test_upload_converse_cite_and_switch_collection(
    cluster: LocalCluster, browser: BrowserContext, llm: ThreadedFakeLLM, tmp_path: Path
) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {SCREENSHOTS}")
    page = await browser.new_page()
    problems: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    await page.goto(f"{cluster.gateway_url}/")
    picker = page.get_by_label("Collection", exact=True)
    await picker.locator("option[value='docs']").wait_for(state="attached", timeout=10_000)
    assert await page.locator("#upload").is_hidden(), "no upload panel without an admin key"

    # --- upload as admin, into a new collection
    await page.get_by_label("API key (if the server requires one)").fill(ADMIN_KEY)
    await page.get_by_label("API key (if the server requires one)").press("Tab")
    await page.locator("#upload").wait_for(state="visible", timeout=10_000)
    runbook = tmp_path / "runbook.md"
    runbook.write_text(RUNBOOK)
    await page.get_by_label("Files (Markdown, text, HTML, PDF…)").set_input_files(runbook)
    await page.get_by_label("Into collection").fill("runbook")
    await page.get_by_role("button", name="Upload").click()
    status = page.locator("#upload-status")
    await status.filter(has_text="Into runbook").wait_for(timeout=60_000)
    assert "1 new" in await status.inner_text()
    assert "runbook.md: ingested" in await page.locator("#upload-report").inner_text()
    await picker.locator("option[value='runbook']").wait_for(state="attached", timeout=10_000)
    await picker.select_option("runbook")

    # --- a three-turn conversation
    served = llm.served
    for turn, question in enumerate(QUESTIONS):
        await ask(page, question, turn)
    turns = page.locator("#transcript article.turn")
    assert await turns.count() == 3
    first = turns.nth(0).locator(".answer")
    assert await first.locator("ul > li").count() == 1, "a Markdown list"
    assert "HTTP 429 with a Retry-After header" in await first.locator("li").inner_text()
    assert "sliding window" in await first.locator("p").inner_text()
    code = turns.nth(2).locator(".answer pre > code")
    assert await code.count() == 1, await turns.nth(2).inner_html()
    assert (await code.inner_text()).strip() == CODE
    assert await code.get_attribute("class") == "language-bash"
    for i, question in enumerate(QUESTIONS):
        assert question in await turns.nth(i).locator(".msg.user").inner_text()

    # each question was sent with the turns before it: the answering model saw them
    answers = [
        r.body
        for r in llm.server.requests[served:]
        if r.body.get("model") == STRONG_MODEL and "<question>" in str(r.body["messages"][-1])
    ]
    assert len(answers) == 3, [r.body.get("model") for r in llm.server.requests[served:]]
    last = answers[-1]["messages"]
    said = " ".join(str(m["content"]) for m in last[:-1])
    assert QUESTIONS[0] in said and QUESTIONS[1] in said, last
    assert "share their counters in Redis" in said, "the earlier answers are sent too"
    assert [m["role"] for m in last[:-1]] == ["user", "assistant", "user", "assistant"]

    # the stage inspector shows each stage's details, the follow-up's question included
    rows = page.locator("#stages tbody tr")
    stage_names = await rows.evaluate_all("rows => rows.map(r => r.dataset.stage)")
    assert {"analysis", "retrieval", "answer"} <= set(stage_names), stage_names
    retrieval = await page.locator("#stages tr[data-stage='retrieval']").inner_text()
    assert "candidates" in retrieval, retrieval
    await page.screenshot(path=str(SCREENSHOTS / "conversation.png"), full_page=True)
    violations = await serious_violations(page)
    assert not violations, violations

    # --- a chip opens the stored source, the cited chunk marked and its span highlighted
    chip = turns.nth(1).locator(".chips a.chip").first
    href = await chip.get_attribute("href")
    assert href is not None and href.startswith("/v1/sources/view?"), href
    query = parse_qs(urlsplit(href).query)
    assert query["source_id"] == ["runbook.md"] and query["collection"] == ["runbook"]
    async with browser.expect_page() as opened:
        await chip.click()
    view = await opened.value
    await view.wait_for_load_state("load")
    cited = view.locator(".chunk.cited")
    # with a key typed in, the page opens a blank tab, fetches the view with the key and
    # writes it there: "load" is the blank tab's (CI: 0 chunks found at that moment)
    await cited.first.wait_for(timeout=30_000)
    assert await cited.count() == 1
    cited_text = await cited.locator(".text").inner_text()
    assert "share their counters in Redis" in cited_text
    if "start" in query:
        start, end = int(query["start"][0]), int(query["end"][0])
        mark = cited.locator("mark")
        assert await mark.count() == 1
        marked = await mark.inner_text()
        assert "share their counters in Redis" in marked
        assert marked == cited_text[start:end]
    await view.screenshot(path=str(SCREENSHOTS / "source-view.png"))
    # the page wrote the view into a blank tab (it fetched it with the caller's key): axe,
    # injected into the blank document before the write, still reads that document's
    # (absent) title, so the title is checked here instead
    assert await view.title() == "Gateway runbook · Groundwire"
    violations = [v for v in await serious_violations(view) if v["id"] != "document-title"]
    assert not violations, violations
    await view.close()

    # --- switch the collection: the next question goes to the other one, afresh
    await picker.select_option("docs")
    assert "a new conversation" in await page.locator("#transcript .divider").inner_text()
    served = llm.served
    await ask(page, "What do clients see over a limit?", 3)
    fourth = turns.nth(3)
    assert "Groundwire · docs" in await fourth.locator(".who").last.inner_text()
    assert "429 Too Many Requests" in await fourth.locator(".answer strong").inner_text()
    assert await page.locator("#sources li").filter(has_text="rate-limits.md").count() >= 1
    # a source with a URL (the sample's front matter) opens its URL
    chip_href = await fourth.locator(".chips a.chip").first.get_attribute("href")
    assert chip_href == "https://groundwire.dev/docs/rate-limits", chip_href
    [body] = [
        r.body
        for r in llm.server.requests[served:]
        if r.body.get("model") == STRONG_MODEL and "<question>" in str(r.body["messages"][-1])
    ]
    assert len(body["messages"]) == 1, "after the switch the earlier turns are not sent"

    # --- search mode: ranked passages of the collection
    await page.get_by_label("Search (ranked passages)").check()
    await page.get_by_label("Your question").fill("Retry-After header")
    await page.get_by_role("button", name="Search").click()
    results = turns.nth(4).locator("ol.results li")
    await results.first.wait_for(timeout=30_000)
    assert "rate-limits.md" in await results.first.inner_text()
    await page.screenshot(path=str(SCREENSHOTS / "search.png"), full_page=True)
    violations = await serious_violations(page)
    assert not violations, violations

    assert not problems, problems
    assert all(r.startswith(cluster.gateway_url) for r in requests), "nothing from a CDN"
