"""Acceptance (issue #21, 3): verify before show through the real orchestrator over
gRPC (the MiniLM embedder, the retriever on Qdrant edge, each over gRPC), the fake LLM
(tests/fakes/llm_server.py, the real Anthropic SDK) writing the answer and judging its
claims. The judge marks the sentence that changes the passage's figure contradicted:
the client never receives it in any delta (over gRPC, and as the gateway's SSE), the
citations event lists it as withheld, and every span points at text that exists."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from google.protobuf.json_format import MessageToDict
from pydantic import SecretStr

from groundwire.orchestrator.v1 import orchestrator_pb2, orchestrator_pb2_grpc
from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.server import serving
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_gateway.app import create_app
from groundwire_gateway.settings import GatewaySettings
from groundwire_orchestrator.server import OrchestratorService
from groundwire_orchestrator.settings import OrchestratorSettings
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings
from tests.fakes.llm_server import FakeLLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.asyncio(loop_scope="module")

DOCS = {
    "limits.md": "# Rate limits\n\nRate limits are enforced per API key. Each key may send "
    "sixty requests per minute, e.g. from one client; beyond that the gateway answers 429.",
    "roses.md": "# Pruning roses\n\nCut each cane just above an outward-facing bud in late "
    "winter, removing dead and crossing stems first.",
}
SUPPORTED = "Rate limits are enforced per API key [{n}]."
CONTRADICTED = "Each key may send twenty requests per minute [{n}]."
QUESTION = "how many requests per minute may one API key send?"


def _system(body: dict[str, Any]) -> str:
    system = body.get("system", "")
    return system if isinstance(system, str) else " ".join(b["text"] for b in system)


def _user(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)


def _judge(request: RecordedRequest) -> Reply:
    """Verdicts like a careful judge: a claim changing the passage's figure is
    contradicted, the rest supported, each with the passage sentence it rests on."""
    claims = re.findall(r'<claim number="(\d+)"[^>]*>(.*?)</claim>', _user(request.body))
    verdicts = [
        {
            "claim": int(n),
            "verdict": "contradicted",
            "confidence": 0.9,
            "evidence": "Each key may send sixty requests per minute, e.g. from one client;",
        }
        if "twenty" in text
        else {
            "claim": int(n),
            "verdict": "supported",
            "confidence": 0.95,
            "evidence": "Rate limits are enforced per API key.",
        }
        for n, text in claims
    ]
    return Reply(json={"verdicts": verdicts})


@dataclass
class Model:
    """The fake model: analysis gets no JSON (the raw query passes through), the judge
    answers with :func:`_judge` (or ``judge_reply``), the answer is ``answer`` with the
    number of the limits excerpt filled in, streamed word by word."""

    answer: str = ""
    judge_reply: Reply | None = None
    judged: list[str] = field(default_factory=list)

    def __call__(self, request: RecordedRequest) -> Reply:
        system = _system(request.body)
        if system.startswith("You check claims"):
            self.judged.append(_user(request.body))
            return self.judge_reply or _judge(request)
        if not system.startswith("You answer questions"):
            return Reply(text="no json here")
        blob = json.dumps(request.body["messages"])
        n = next(
            m.group(1)
            for m in re.finditer(r'<excerpt n=\\"(\d+)\\"[^>]*>(.*?)</excerpt>', blob)
            if "sixty requests" in m.group(2)
        )
        return Reply(text=self.answer.format(n=n), token_delay_s=0.005)


@dataclass
class Stack:
    port: int
    model: Model
    retriever: int


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def stack(minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    async with AsyncExitStack() as exits:
        model = Model()
        llm = await exits.enter_async_context(FakeLLMServer(default=model))
        embedder_settings = EmbedderSettings(port=0, model_dir=minilm_dir)
        embedder = await exits.enter_async_context(
            serving(EmbedderService(embedder_settings), embedder_settings)
        )
        retriever_settings = RetrieverSettings(
            port=0,
            data_path=tmp_path_factory.mktemp("qdrant"),
            embedder_addr=f"127.0.0.1:{embedder}",
        )
        retriever = await exits.enter_async_context(
            serving(RetrieverService(retriever_settings), retriever_settings)
        )
        async with create_channel(f"127.0.0.1:{retriever}") as channel:
            documents = [
                retriever_pb2.Document(source_id=n, filename=n, content=t.encode())
                for n, t in DOCS.items()
            ]
            request = retriever_pb2.IngestRequest(
                collection="docs", documents=documents, create_collection=True
            )
            stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
            events = [e async for e in stub.Ingest(request, timeout=60)]
            assert events[-1].report.ingested == len(DOCS)
        settings = OrchestratorSettings(
            port=0,
            embedder_addr=f"127.0.0.1:{embedder}",
            retriever_addr=f"127.0.0.1:{retriever}",
            reranker_addr=None,
            dense_floor=-1.0,
            anthropic_api_key=SecretStr("test-key"),
            anthropic_base_url=llm.url,
            llm_order="anthropic",
            llm_timeout_s=5.0,
            analysis_timeout_s=1.0,
            verify_before_show="auto",  # on: the LLM judge is the first verifier available
            citation_verifiers="nli,llm,similarity",
            citation_judge_timeout_s=5.0,
        )
        port = await exits.enter_async_context(serving(OrchestratorService(settings), settings))
        yield Stack(port, model, retriever)


async def _chat(stack: Stack, answer: str, judge: Reply | None = None) -> dict[str, Any]:
    """The Ask stream's events as JSON (the first of each kind, and every delta)."""
    stack.model.answer, stack.model.judge_reply = answer, judge
    stack.model.judged.clear()
    pb = orchestrator_pb2
    request = pb.AskRequest(
        collection="docs", messages=[pb.Message(role=pb.ROLE_USER, content=QUESTION)]
    )
    async with create_channel(f"127.0.0.1:{stack.port}") as channel:
        stub = orchestrator_pb2_grpc.OrchestratorServiceStub(channel)
        events = [e async for e in stub.Ask(request, timeout=30)]
    by_kind: dict[str, Any] = {"deltas": [], "resets": []}
    for event in events:
        kind = event.WhichOneof("event")
        data = MessageToDict(
            getattr(event, kind),
            preserving_proto_field_name=True,
            always_print_fields_with_no_presence=True,
            use_integers_for_enums=False,
        )
        if kind == "delta":
            by_kind["deltas"].append(data["text"])
        elif kind == "reset":
            by_kind["resets"].append(data)
        by_kind.setdefault(kind, data)
    return by_kind


def _spans_point_at_text(got: dict[str, Any]) -> None:
    """Every answer_span is its sentence in the final answer; every source_span a
    whole sentence of the cited source's text."""
    answer = got["done"]["answer"]
    sources = {s["number"]: s for s in got["citations"]["sources"]}
    for c in got["citations"]["citations"]:
        start, end = c["answer_span"]["start"], c["answer_span"]["end"]
        assert answer[start:end] == c["sentence"]
        start, end = c["source_span"]["start"], c["source_span"]["end"]
        evidence = sources[c["number"]]["text"][start:end]
        assert evidence and evidence[-1] in ".;!?" and evidence[0].isupper(), evidence


async def test_the_contradicted_sentence_is_never_sent_and_is_listed_as_withheld(
    stack: Stack,
) -> None:
    got = await _chat(stack, f"{SUPPORTED} {CONTRADICTED}")
    shown = "".join(got["deltas"])
    assert not any("twenty" in d for d in got["deltas"]), got["deltas"]
    assert re.fullmatch(r"Rate limits are enforced per API key \[\d+\]\.", shown)
    assert got["done"]["answer"] == shown and got["done"]["mode"] == "ANSWER_MODE_GENERATED"
    [withheld] = got["citations"]["withheld"]
    assert withheld["sentence"].startswith("Each key may send twenty requests")
    assert withheld["status"] == "VERIFICATION_STATUS_CONTRADICTED" and withheld["numbers"]
    assert "judged by llm" in withheld["reason"]
    [citation] = got["citations"]["citations"]
    assert citation["status"] == "VERIFICATION_STATUS_SUPPORTED" and citation["method"] == "llm"
    _spans_point_at_text(got)
    [source] = got["citations"]["sources"]
    start, end = citation["source_span"]["start"], citation["source_span"]["end"]
    assert source["text"][start:end] == "Rate limits are enforced per API key."
    stages = {s["name"]: s for s in got["stages"]["stages"]}
    assert stages["citations"]["details"]["withheld"] == "1"
    assert stages["citations"]["details"]["verify_before_show"] == "on"
    # each sentence is judged as soon as it is complete (the next one has begun)
    assert [m.count("<claim ") for m in stack.model.judged] == [1, 1]


async def test_an_answer_whose_every_claim_is_withheld_is_a_decline(stack: Stack) -> None:
    got = await _chat(stack, CONTRADICTED)
    assert not any("twenty" in d for d in got["deltas"])
    assert got["done"]["mode"] == "ANSWER_MODE_DECLINED"
    assert got["done"]["answer"].startswith("I can't answer that from the available documents")
    assert got["done"]["answer"] == "".join(got["deltas"])
    assert got["citations"]["citations"] == [] and len(got["citations"]["withheld"]) == 1


async def test_a_judge_that_answers_badly_falls_back_to_similarity(stack: Stack) -> None:
    # similarity cannot see the contradiction: both sentences pass, labelled by method
    got = await _chat(stack, f"{SUPPORTED} {CONTRADICTED}", judge=Reply(text="Looks fine!"))
    assert got["citations"]["withheld"] == []
    assert {c["method"] for c in got["citations"]["citations"]} == {"similarity"}
    stages = {s["name"]: s for s in got["stages"]["stages"]}
    assert stages["citations"]["fallback"] and "not valid JSON" in stages["citations"]["reason"]
    _spans_point_at_text(got)


def _sse(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = block.split("\n")
        name = next((ln[6:].strip() for ln in lines if ln.startswith("event:")), "")
        data = [ln[5:].strip() for ln in lines if ln.startswith("data:")]
        if name and data:
            out.append((name, json.loads("\n".join(data))))
    return out


async def test_over_the_gateway_the_sse_client_never_sees_it_either(stack: Stack) -> None:
    stack.model.answer, stack.model.judge_reply = f"{SUPPORTED} {CONTRADICTED}", None
    app = create_app(
        GatewaySettings(
            orchestrator_addr=f"127.0.0.1:{stack.port}",
            retriever_addr=f"127.0.0.1:{stack.retriever}",
            default_collection="docs",
        )
    )
    # the app's lifespan in the test's own task (its task groups must exit where entered)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://gw"
    ) as gateway:
        reply = await gateway.post(
            "/v1/chat", json={"messages": [{"role": "user", "content": QUESTION}]}
        )
    assert reply.status_code == 200, reply.text
    events = _sse(reply.text)
    deltas = [d["text"] for name, d in events if name == "delta"]
    assert deltas and not any("twenty" in d for d in deltas)
    [citations] = [d for name, d in events if name == "citations"]
    [done] = [d for name, d in events if name == "done"]
    assert done["answer"] == "".join(deltas)
    [withheld] = citations["withheld"]
    assert withheld["status"] == "contradicted" and "twenty" in withheld["sentence"]
    [citation] = citations["citations"]
    assert citation["method"] == "llm" and citation["status"] == "supported"
    start, end = citation["answer_span"]
    assert done["answer"][start:end] == citation["sentence"]
    start, end = citation["source_span"]
    assert citations["sources"][0]["text"][start:end] == "Rate limits are enforced per API key."
