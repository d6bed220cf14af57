"""Live documentation (issue #33) through the real services: a docs site served on
127.0.0.1 (pages, sitemap, robots.txt, an off-domain redirect, a page over the size
limit), a collection synced from half of it by the retriever's website sync, the real
MiniLM embedder, the retriever's LookupLive through the guarded outbound client (the
test allows 127.0.0.1 through OUTBOUND_ALLOWED_NETWORKS), and the orchestrator's
live_docs stage over gRPC, without an LLM and with the fake LLM in Anthropic mode."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from pydantic import SecretStr

from groundwire.orchestrator.v1 import orchestrator_pb2, orchestrator_pb2_grpc
from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.server import serving
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_orchestrator.domain import Candidate
from groundwire_orchestrator.llm.base import WebSearch, warm_up
from groundwire_orchestrator.server import OrchestratorService
from groundwire_orchestrator.settings import OrchestratorSettings
from groundwire_orchestrator.stages.answer import AnswerFinished, AnswerInput, GroundedAnswerStage
from groundwire_orchestrator.text.ledger import SourceLedger
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings
from tests.fakes.llm_server import FakeLLMServer, RecordedRequest, Reply
from tests.integration.llm.conftest import make_provider
from tests.site_server import Reply as SiteReply
from tests.site_server import Site, serve

pytestmark = pytest.mark.asyncio(loop_scope="module")

pb = orchestrator_pb2
COLLECTION = "ferry"
PAGE_LIMIT = 4096
"""The retriever's LIVE_MAX_PAGE_BYTES in this test."""
IN_DOMAIN = "How do I rotate the encryption keys of a ferry vault?"
OUT_OF_SCOPE = "Which wine goes best with grilled salmon at a summer dinner?"
NAMED_ELSEWHERE = "How do I rotate the encryption keys of a Kubernetes cluster?"
"""Words of the site's keys page, but about another product (a name no passage holds)."""
ROTATE = "ferry keys rotate"
"""Words only the unsynced half of the site holds."""


def build_site(site: Site) -> None:
    """The guide (synced into the collection) and the reference (left on the site)."""
    site.html(
        "/guide/",
        "Ferry guide",
        "Ferry copies folders between machines into a ferry vault.",
        ("install.html", "configure.html", "usage.html"),
    )
    site.html(
        "/guide/install.html",
        "Installing Ferry",
        "Install ferry with pip install ferry. A ferry vault needs Python 3.11 and 200 MB "
        "of disk. The vault holds the copied folders and their metadata.",
    )
    site.html(
        "/guide/configure.html",
        "Configuring Ferry",
        "The ferry.toml file sets the vault folder, the number of parallel transfers and "
        "the cipher of a vault (aes-256-gcm by default).",
    )
    site.html(
        "/guide/usage.html",
        "Using Ferry",
        "Run ferry copy SOURCE DEST to copy a folder into a vault; ferry status lists the "
        "transfers in progress.",
    )
    site.html(
        "/reference/encryption-keys.html",
        "Encryption keys",
        f"To rotate the encryption keys of a vault, run {ROTATE} --vault NAME. The old "
        "key stays readable for thirty days, then ferry deletes it.",
    )
    site.html(
        "/reference/bandwidth.html",
        "Bandwidth",
        "Ferry caps transfers at 50 MB/s unless ferry.toml raises the limit.",
    )
    # an old URL of the keys page, now redirecting off the allowed domain
    site.redirect("/reference/keys-moved.html", "http://localhost:9/keys.html")
    # the full key reference: larger than the lookup's page limit
    site.html(
        "/reference/encryption-keys-full.html",
        "Encryption keys (full reference)",
        "rotate encryption keys " * (PAGE_LIMIT // 10),
    )
    site.html("/private/rotate-keys.html", "Internal", "rotate the keys by hand")
    pages = [
        "/guide/",
        "/guide/install.html",
        "/guide/configure.html",
        "/guide/usage.html",
        "/reference/encryption-keys-full.html",
        "/reference/encryption-keys.html",
        "/private/rotate-keys.html",
        "/reference/keys-moved.html",
        "/reference/bandwidth.html",
    ]
    urls = "".join(f"<url><loc>{site.base}{p}</loc></url>" for p in pages)
    site.pages["/sitemap.xml"] = _xml(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{urls}</urlset>"
    )
    robots = f"User-agent: *\nDisallow: /private/\nSitemap: {site.base}/sitemap.xml\n"
    site.pages["/robots.txt"] = _text(robots)


def _xml(body: str) -> SiteReply:
    return SiteReply(body=body.encode(), content_type="application/xml")


def _text(body: str) -> SiteReply:
    return SiteReply(body=body.encode(), content_type="text/plain")


def _answer_or_analysis(request: RecordedRequest) -> Reply:
    """The fake LLM: the query analysis passes the question through; answers cite [1]."""
    body = request.body
    system = body.get("system", "")
    system = system if isinstance(system, str) else " ".join(b["text"] for b in system)
    if system.startswith("You analyse search queries"):
        return Reply(
            json={
                "rewritten_query": IN_DOMAIN,
                "hyde_document": IN_DOMAIN,
                "intent": "",
                "filters": [],
                "negatives": [],
            }
        )
    return Reply(text="Ferry copies folders into a vault [1].")


@dataclass
class Stack:
    site: Site
    llm: FakeLLMServer
    ports: dict[str, int]


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with serve(Site()) as served:
        build_site(served)
        yield served


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def stack(
    minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory, site: Site
) -> AsyncIterator[Stack]:
    async with AsyncExitStack() as exits:
        llm = await exits.enter_async_context(FakeLLMServer(default=_answer_or_analysis))
        ports: dict[str, int] = {}
        ports["embedder"] = await exits.enter_async_context(
            serving(
                EmbedderService(EmbedderSettings(port=0, model_dir=minilm_dir)),
                EmbedderSettings(port=0),
            )
        )
        retriever_settings = RetrieverSettings(
            port=0,
            data_path=tmp_path_factory.mktemp("live-qdrant"),
            embedder_addr=f"127.0.0.1:{ports['embedder']}",
            outbound_allowed_networks="127.0.0.1/32",  # the docs site is on loopback
            live_max_page_bytes=PAGE_LIMIT,
        )
        ports["retriever"] = await exits.enter_async_context(
            serving(RetrieverService(retriever_settings), retriever_settings)
        )
        await _sync_guide(ports["retriever"], site)
        common: dict[str, Any] = {
            "port": 0,
            "embedder_addr": f"127.0.0.1:{ports['embedder']}",
            "retriever_addr": f"127.0.0.1:{ports['retriever']}",
            "live_docs": True,
            "live_docs_max_lookups": 3,
        }
        plain = OrchestratorSettings(**common)
        ports["plain"] = await exits.enter_async_context(serving(OrchestratorService(plain), plain))
        anthropic = OrchestratorSettings(
            **common,
            anthropic_api_key=SecretStr("test-key"),
            anthropic_base_url=llm.url,
            anthropic_fast_model="claude-fast",
            anthropic_strong_model="claude-strong",
            llm_order="anthropic",
            verify_before_show="off",
            citation_verifiers="similarity",
        )
        ports["anthropic"] = await exits.enter_async_context(
            serving(OrchestratorService(anthropic), anthropic)
        )
        yield Stack(site, llm, ports)


async def _sync_guide(port: int, site: Site) -> None:
    """The collection: the guide half of the site, by the retriever's website sync."""
    definition = retriever_pb2.SyncDefinition(
        kind=retriever_pb2.SYNC_SOURCE_KIND_WEB, location=f"{site.base}/guide/", delay_s=0
    )
    async with create_channel(f"127.0.0.1:{port}") as channel:
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        request = retriever_pb2.SyncRequest(collection=COLLECTION, definition=definition)
        events = [e async for e in stub.Sync(request)]
    report = events[-1].report
    assert len(report.delta.new) == 4, report
    assert all("/guide/" in s for s in report.delta.new)


async def ask(stack: Stack, question: str, target: str) -> list[pb.AskEvent]:
    request = pb.AskRequest(
        collection=COLLECTION, messages=[pb.Message(role=pb.ROLE_USER, content=question)]
    )
    async with create_channel(f"127.0.0.1:{stack.ports[target]}") as channel:
        stub = orchestrator_pb2_grpc.OrchestratorServiceStub(channel)
        return [e async for e in stub.Ask(request, timeout=60)]


def of(events: Sequence[pb.AskEvent], kind: str) -> list[Any]:
    return [getattr(e, kind) for e in events if e.WhichOneof("event") == kind]


def stages(events: Sequence[pb.AskEvent]) -> dict[str, Any]:
    [report] = of(events, "stages")
    return {s.name: s for s in report.stages}


async def test_a_thinly_covered_in_domain_question_is_answered_from_live_pages(
    stack: Stack,
) -> None:
    site, base = stack.site, stack.site.base
    before = len(site.requested)
    events = await ask(stack, IN_DOMAIN, "plain")
    report = stages(events)
    coverage, live = report["coverage"].details, report["live_docs"].details
    # half its words are in the synced pages: covered thinly (weak evidence, no decline),
    # which is what sends an in-domain question to the live pages
    assert coverage["covered"] == "yes" and coverage["thin"] == "yes", coverage
    assert live.get("skipped", "") == "", live
    # three lookups: the oversized page, the keys page, the off-domain redirect; the
    # robots.txt-disallowed page is refused without a fetch (and not counted)
    assert live["lookups"] == "3", live
    assert live["pages_fetched"] == "1"
    assert live["fetched"] == f"{base}/reference/encryption-keys.html"
    refused = live["refused"]
    oversized = f"{base}/reference/encryption-keys-full.html"
    assert f"{oversized}: refused: the page is over the limit of {PAGE_LIMIT} bytes" in refused
    off_domain = "redirects off the allowed domains to http://localhost:9/keys.html"
    assert f"{base}/reference/keys-moved.html: refused: {off_domain}" in refused
    assert f"{base}/private/rotate-keys.html: refused: robots.txt disallows it" in refused
    fetched_now = site.requested[before:]
    assert "/private/rotate-keys.html" not in fetched_now
    assert "/reference/bandwidth.html" not in fetched_now, "no question word in its URL"
    pages = [p for p in fetched_now if p.startswith(("/reference/", "/private/", "/guide/"))]
    assert len(pages) <= 3
    # without an LLM the extractive answer answers from the live page, cited and live
    [done] = of(events, "done")
    assert done.mode == pb.ANSWER_MODE_EXTRACTIVE, done
    assert ROTATE in done.answer
    [citations] = of(events, "citations")
    assert citations.sources, "the answer cites its live source"
    for source in citations.sources:
        assert source.live and source.fetched_at > 0
        assert source.url == f"{base}/reference/encryption-keys.html"
    [retrieval] = of(events, "retrieval")
    assert any(s.live for s in retrieval.sources)


async def test_live_pages_are_not_written_into_the_collection(stack: Stack) -> None:
    await ask(stack, IN_DOMAIN, "plain")
    async with create_channel(f"127.0.0.1:{stack.ports['retriever']}") as channel:
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        listed = await stub.ListSources(retriever_pb2.ListSourcesRequest(collection=COLLECTION))
    assert len(listed.sources) == 4
    assert all("/guide/" in s.source_id for s in listed.sources)


@pytest.mark.parametrize("question", [OUT_OF_SCOPE, NAMED_ELSEWHERE])
async def test_an_out_of_scope_question_is_declined_with_no_lookup(
    stack: Stack, question: str
) -> None:
    site = stack.site
    before = len(site.requested)
    events = await ask(stack, question, "plain")
    live = stages(events)["live_docs"].details
    assert live["lookups"] == "0"
    assert live["skipped"].startswith("out of scope"), live
    assert site.requested[before:] == [], "nothing fetched, not even robots.txt"
    [done] = of(events, "done")
    assert done.mode == pb.ANSWER_MODE_DECLINED
    [citations] = of(events, "citations")
    assert not citations.sources


async def test_anthropic_gets_the_web_search_tool_on_the_allowed_domains(stack: Stack) -> None:
    site = stack.site
    stack.llm.requests.clear()
    before = len(site.requested)
    events = await ask(stack, IN_DOMAIN, "anthropic")
    live = stages(events)["live_docs"].details
    assert live["method"] == "provider web search", live
    answers = [
        r.body
        for r in stack.llm.requests
        if r.api == "anthropic" and r.body.get("model") == "claude-strong"
    ]
    assert answers, [r.body.get("model") for r in stack.llm.requests]
    tools = answers[-1].get("tools", [])
    [search] = [t for t in tools if t.get("name") == "web_search"]
    assert search["type"].startswith("web_search_")
    assert search["allowed_domains"] == ["127.0.0.1"]
    assert search["max_uses"] == 3
    # the provider does the lookup: Groundwire fetched no page itself
    assert site.requested[before:] == []


async def test_an_out_of_scope_question_offers_no_web_search(stack: Stack) -> None:
    stack.llm.requests.clear()
    await ask(stack, OUT_OF_SCOPE, "anthropic")
    assert stack.llm.requests, "the LLM was asked (analysis at least)"
    for request in stack.llm.requests:
        assert not any(t.get("name") == "web_search" for t in request.body.get("tools", []))


async def test_a_provider_refusing_web_search_is_asked_once_more_without_it() -> None:
    """Web search not enabled for the account (the provider refuses the tool): the
    answer is asked once more without it, from the excerpts, and the report says so."""
    seeded = Candidate(
        chunk_id="c1",
        source_id="guide.html",
        title="Ferry guide",
        heading_path=("Ferry guide",),
        url="https://d.test/guide.html",
        text="Ferry copies folders into a vault.",
        score=1.0,
    )
    async with FakeLLMServer(default=Reply(text="Ferry copies folders [1].")) as fake:
        fake.reject_tools = True
        provider = make_provider("anthropic", fake)
        await warm_up(provider)
        try:
            ledger = SourceLedger()
            ledger.add([seeded])
            stage = GroundedAnswerStage(
                provider, timeout_s=10, max_tokens=200, context_tokens=2000, history_tokens=500
            )
            inp = AnswerInput(IN_DOMAIN, (), ledger, web_search=WebSearch(("d.test",), 3))
            events = [e async for e in stage.run(inp)]
        finally:
            await provider.aclose()
    refused, retried = [r for r in fake.requests if r.body.get("messages")][-2:]
    assert [t["name"] for t in refused.body["tools"]] == ["web_search"]
    assert "tools" not in retried.body
    finished = events[-1]
    assert isinstance(finished, AnswerFinished), finished
    assert finished.text == "Ferry copies folders [1]."
    assert finished.report.details["tools_retry"].startswith("retried without tools")
