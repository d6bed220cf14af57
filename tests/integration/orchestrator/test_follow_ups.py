"""Acceptance (#25): a follow-up carries its context, over the sample corpus.

Through the real gRPC OrchestratorService with the real MiniLM embedder and the real
retriever (embedded Qdrant) in-process, samples/corpus ingested for real, and a
reranker served over real gRPC that records the query each Rerank call carries:

- without an LLM, "And across several gateway replicas?" after "How do I limit
  requests per client?" retrieves rate-limits.md first, the cross-encoder and the
  extractive answer get the combined question, and the analysis report shows it; two
  more follow-ups that searched alone find the wrong document find the right one;
- with the fake LLM, the cross-encoder receives the analysis' standalone question.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from pydantic import SecretStr

from groundwire.orchestrator.v1 import orchestrator_pb2, orchestrator_pb2_grpc
from groundwire.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.server import serving
from groundwire_core.settings import ServiceSettings
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_orchestrator.server import OrchestratorService
from groundwire_orchestrator.settings import OrchestratorSettings
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings
from tests.fakes.llm_server import FakeLLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.asyncio(loop_scope="module")

pb = orchestrator_pb2
FIRST = "How do I limit requests per client?"
FOLLOW = "And across several gateway replicas?"
REWRITE = "How do I limit requests per client across several gateway replicas?"
RIGHT = "rate-limits.md"


class RecordingReranker(reranker_pb2_grpc.RerankerServiceServicer):
    """A reranker over gRPC that keeps the fused order and records each query."""

    name = "reranker"
    service_names: Sequence[str] = (
        reranker_pb2.DESCRIPTOR.services_by_name["RerankerService"].full_name,
    )

    def __init__(self) -> None:
        self.queries: list[str] = []

    def register(self, server: grpc.aio.Server) -> None:
        reranker_pb2_grpc.add_RerankerServiceServicer_to_server(self, server)

    async def start(self) -> None:
        return None

    async def check(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def Rerank(self, request, context):  # type: ignore[no-untyped-def]
        self.queries.append(request.query)
        results = [
            reranker_pb2.RerankResult(index=i, score=0.9 - i * 0.001)
            for i in range(len(request.passages))
        ]
        return reranker_pb2.RerankResponse(results=results[: request.top_n or None])

    async def Info(self, request, context):  # type: ignore[no-untyped-def]
        return reranker_pb2.InfoResponse(
            model_id="fake/cross-encoder", ready=True, max_batch_passages=256
        )


def _llm_reply(request: RecordedRequest) -> Reply:
    """The fast model analyses (with a standalone question); the strong one answers."""
    system = request.body.get("system", "")
    text = system if isinstance(system, str) else " ".join(b["text"] for b in system)
    if text.startswith("You analyse search queries"):
        return Reply(
            json={
                "rewritten_query": "rate limit replicas shared counters Redis",
                "hyde_document": "Every gateway replica shares its counters in Redis.",
                "intent": "limits across replicas",
                "filters": [],
                "negatives": [],
                "standalone_question": REWRITE,
            }
        )
    return Reply(text="The replicas share their counters in Redis [1].")


@dataclass
class Cluster:
    ports: dict[str, int]
    reranker: RecordingReranker
    llm: FakeLLMServer


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def cluster(
    minilm_dir: Path, repo_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Cluster]:
    async with AsyncExitStack() as stack:
        llm = await stack.enter_async_context(FakeLLMServer(default=_llm_reply))
        ports: dict[str, int] = {}
        embedder = EmbedderSettings(port=0, model_dir=minilm_dir)
        ports["embedder"] = await stack.enter_async_context(
            serving(EmbedderService(embedder), EmbedderSettings(port=0))
        )
        reranker = RecordingReranker()
        ports["reranker"] = await stack.enter_async_context(
            serving(reranker, ServiceSettings(port=0))
        )
        retriever = RetrieverSettings(
            port=0,
            data_path=tmp_path_factory.mktemp("qdrant"),
            embedder_addr=f"127.0.0.1:{ports['embedder']}",
        )
        ports["retriever"] = await stack.enter_async_context(
            serving(RetrieverService(retriever), retriever)
        )
        corpus = sorted((repo_root / "samples" / "corpus").glob("*.md"))
        documents = [
            retriever_pb2.Document(source_id=p.name, filename=p.name, content=p.read_bytes())
            for p in corpus
        ]
        async with create_channel(f"127.0.0.1:{ports['retriever']}") as ch:
            stub = retriever_pb2_grpc.RetrieverServiceStub(ch)
            request = retriever_pb2.IngestRequest(
                collection="docs", documents=documents, create_collection=True
            )
            events = [e async for e in stub.Ingest(request)]
            assert events[-1].report.ingested == len(corpus)
        common: dict[str, Any] = {
            "port": 0,
            "embedder_addr": f"127.0.0.1:{ports['embedder']}",
            "retriever_addr": f"127.0.0.1:{ports['retriever']}",
            "reranker_addr": f"127.0.0.1:{ports['reranker']}",
            "rerank_budget_ms": 1000.0,
            "rerank_min_candidates": 2,
        }
        plain = OrchestratorSettings(**common)
        ports["plain"] = await stack.enter_async_context(serving(OrchestratorService(plain), plain))
        with_llm = OrchestratorSettings(
            **common,
            anthropic_api_key=SecretStr("test-key"),
            anthropic_base_url=llm.url,
            anthropic_fast_model="claude-fast",
            anthropic_strong_model="claude-strong",
            llm_order="anthropic",
            llm_timeout_s=5.0,
            analysis_timeout_s=2.0,
            verify_before_show="off",  # today's streaming; tested on its own
            citation_verifiers="similarity",
        )
        ports["llm"] = await stack.enter_async_context(
            serving(OrchestratorService(with_llm), with_llm)
        )
        yield Cluster(ports, reranker, llm)


async def ask(cluster: Cluster, target: str, *messages: str) -> list[pb.AskEvent]:
    roles = [pb.ROLE_USER, pb.ROLE_ASSISTANT]
    request = pb.AskRequest(
        collection="docs",
        messages=[pb.Message(role=roles[i % 2], content=m) for i, m in enumerate(messages)],
    )
    cluster.reranker.queries.clear()
    async with create_channel(f"127.0.0.1:{cluster.ports[target]}") as ch:
        stub = orchestrator_pb2_grpc.OrchestratorServiceStub(ch)
        return [e async for e in stub.Ask(request, timeout=60)]


def of(events: Sequence[pb.AskEvent], kind: str) -> list[Any]:
    return [getattr(e, kind) for e in events if e.WhichOneof("event") == kind]


def ranked_sources(events: Sequence[pb.AskEvent]) -> list[str]:
    return [s.source_id for s in of(events, "retrieval")[0].sources]


def stage(events: Sequence[pb.AskEvent], name: str) -> Any:
    [stages] = of(events, "stages")
    return next(s for s in stages.stages if s.name == name)


async def test_without_an_llm_the_follow_up_finds_the_document_of_its_question(
    cluster: Cluster,
) -> None:
    events = await ask(cluster, "plain", FIRST, "Limits are per API key [1].", FOLLOW)
    sources = ranked_sources(events)
    assert sources[0] == RIGHT, sources
    combined = f"{FIRST} {FOLLOW}"
    # the ranking and the extractive answer's unit selection both ask the cross-encoder
    assert cluster.reranker.queries and set(cluster.reranker.queries) == {combined}, (
        "the cross-encoder scores the combination"
    )
    analysis = stage(events, "analysis")
    assert analysis.details["standalone_question"] == combined
    assert "previous question" in analysis.details["follow_up"]
    assert not stage(events, "rerank").fallback
    done = events[-1].done
    assert done.mode == pb.ANSWER_MODE_EXTRACTIVE, done
    [cited] = of(events, "citations")
    assert RIGHT in {s.source_id for s in cited.sources}, "the extractive answer quotes it"
    assert "Redis" in done.answer, done.answer


@pytest.mark.parametrize(
    ("first", "follow_up", "right"),
    [
        (
            "How do I deploy Groundwire on Kubernetes?",
            "How many replicas should it run?",
            "kubernetes.md",
        ),
        (
            "How do I stop one client from sending too many requests?",
            "What status code does it get?",
            RIGHT,
        ),
    ],
)
async def test_a_follow_up_searched_alone_misses_what_its_context_finds(
    cluster: Cluster, first: str, follow_up: str, right: str
) -> None:
    alone = ranked_sources(await ask(cluster, "plain", follow_up))
    assert alone[0] != right, alone
    both = ranked_sources(await ask(cluster, "plain", first, "See [1].", follow_up))
    assert both[0] == right, both


async def test_with_the_llm_the_cross_encoder_receives_the_rewritten_question(
    cluster: Cluster,
) -> None:
    cluster.llm.requests.clear()
    events = await ask(cluster, "llm", FIRST, "Limits are per API key [1].", FOLLOW)
    assert cluster.reranker.queries == [REWRITE]
    analysis = stage(events, "analysis")
    assert not analysis.fallback
    assert analysis.details["standalone_question"] == REWRITE
    assert analysis.details["follow_up"] == "rewritten by the LLM"
    assert ranked_sources(events)[0] == RIGHT
    # the answering model still gets the message as written, with the conversation
    answer = [r.body for r in cluster.llm.requests if "<excerpt" in str(r.body)]
    assert answer, [r.body for r in cluster.llm.requests]
    assert FOLLOW in str(answer[0]["messages"][-1]["content"])
    assert FIRST in str(answer[0]["messages"])
