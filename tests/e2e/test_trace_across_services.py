"""One `/v1/chat` request is one trace across all five services and the LLM.

The whole cluster runs as processes (LocalCluster), every service exporting its spans
over OTLP/gRPC to a trace receiver this test runs (the collector's TraceService,
implemented on a grpc server on a free port). The reranker serves a tiny random
cross-encoder built here (so the chain really calls it) and the orchestrator's LLM is
the fake Anthropic API (tests/fakes/llm_server.py) as a process: the analysis gets
its JSON, the answer cites [1].

Asserted: the gateway's span of the chat roots one trace; that trace holds spans of
groundwire-gateway, -orchestrator, -embedder, -retriever and -reranker (resource
service.name), forms one tree (every parent is in it), carries the request id on every
gRPC server span, an ``llm.anthropic`` span per LLM call, and the stage spans with
their attributes (candidates in/out, fallback, tokens).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from groundwire_cli.cluster import SERVICES, LocalCluster

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ADMIN_KEY = "e2e-trace-admin-key-1234"
ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}
COLLECTION = "traced"
REQUEST_ID = "trace-e2e-request-1"
PASTA = "# Cooking pasta\n\nBoil salted water, add the spaghetti and cook it for nine minutes."
ROSES = "# Pruning roses\n\nCut each cane above an outward-facing bud in late winter."
ANALYSIS = {
    "rewritten_query": "spaghetti cooking time minutes",
    "hyde_document": "Cook the spaghetti in boiling salted water for nine minutes.",
    "intent": "cooking time of spaghetti",
    "filters": [],
    "negatives": [],
}
ANSWER = "Cook the spaghetti for nine minutes [1]."
GRPC_SERVICES = {f"groundwire-{s}" for s in SERVICES if s != "gateway"}
STAGES = ("analysis", "retrieval", "rerank", "screening", "coverage", "answer", "citations")


@dataclass(frozen=True)
class Span:
    service: str
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    attributes: dict[str, Any]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


class TraceReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    """The OTLP/gRPC trace endpoint of a collector: keeps every span it is sent."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: list[Span] = []

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        received = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        Span(
                            service=str(resource.get("service.name", "")),
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            name=span.name,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                        )
                    )
        with self._lock:
            self._spans.extend(received)
        return trace_service_pb2.ExportTraceServiceResponse()

    def spans(self) -> list[Span]:
        with self._lock:
            return list(self._spans)


@pytest.fixture(scope="module")
def receiver() -> Iterator[tuple[TraceReceiver, int]]:
    servicer = TraceReceiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, port
    server.stop(grace=None)


@pytest.fixture(scope="module")
def reranker_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BERT cross-encoder, exported by the project's build command."""
    from groundwire_reranker.export import build_profile
    from groundwire_reranker.export.tiny import tiny_checkpoint

    text = "\n".join(p.read_text() for p in sorted((ROOT / "samples" / "corpus").glob("*.md")))
    sentences = [s.strip(" #*-`>|") for s in re.split(r"(?<=[.!?])\s+|\n+", text)]
    root = tmp_path_factory.mktemp("trace-reranker")
    checkpoint = tiny_checkpoint("bert", root / "checkpoint", [s for s in sentences if len(s) > 20])
    build_profile("cross-encoder", root / "model", source=checkpoint, log=lambda _: None)
    return root / "model"


@pytest.fixture(scope="module")
def fake_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The fake Anthropic API as a process: the analysis JSON first, then the answer."""
    run = tmp_path_factory.mktemp("trace-llm")
    ready = run / "llm.ready"
    script = {"replies": [{"json": ANALYSIS}], "default": {"text": ANSWER}}
    with (run / "llm.log").open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests" / "fakes" / "llm_server.py"),
                "--port",
                "0",
                "--ready-file",
                str(ready),
                "--script",
                json.dumps(script),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert process.poll() is None, (run / "llm.log").read_text()
            assert time.monotonic() < deadline, "the fake LLM did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{ready.read_text().strip()}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def cluster(
    minilm_dir: Path,
    reranker_model: Path,
    fake_llm: str,
    receiver: tuple[TraceReceiver, int],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LocalCluster]:
    run = tmp_path_factory.mktemp("trace-cluster")
    env = {
        # the batch span processor exports every 100 ms instead of every 5 s
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "GROUNDWIRE_GATEWAY_ADMIN_API_KEYS": f"ops:{ADMIN_KEY}",
        "GROUNDWIRE_EMBEDDER_INTRA_OP_THREADS": "1",
        "GROUNDWIRE_RERANKER_INTRA_OP_THREADS": "1",
        "GROUNDWIRE_RERANKER_MODEL_DIR": str(reranker_model),
        "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_BASE_URL": fake_llm,
        "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_API_KEY": "sk-fake-trace",
        # today's LLM traffic (the judge's call is tested on its own)
        "GROUNDWIRE_ORCHESTRATOR_VERIFY_BEFORE_SHOW": "off",
        "GROUNDWIRE_ORCHESTRATOR_CITATION_VERIFIERS": "similarity",
        # a random model's scores: keep every scored passage, never skip for load
        "GROUNDWIRE_ORCHESTRATOR_RERANK_THRESHOLD": "0",
        "GROUNDWIRE_ORCHESTRATOR_RERANK_BUDGET_MS": "0",
    }
    for name in SERVICES:
        env[f"GROUNDWIRE_{name.upper()}_OTEL_EXPORTER"] = "otlp"
        env[f"GROUNDWIRE_{name.upper()}_OTEL_ENDPOINT"] = f"http://127.0.0.1:{receiver[1]}"
    with LocalCluster.with_free_ports(run, minilm_dir, run / "qdrant", extra_env=env) as local:
        local.start()
        local.wait_ready(timeout_s=180)
        yield local


def _events(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln and not ln.startswith(":")]
        name = next((ln[6:].strip() for ln in lines if ln.startswith("event:")), "message")
        data = [ln[5:].strip() for ln in lines if ln.startswith("data:")]
        if data:
            out.append((name, json.loads("\n".join(data))))
    return out


def _chat_trace(spans: list[Span]) -> list[Span]:
    """The spans of the trace the gateway's request-id-carrying chat span is in."""
    chats = [
        s
        for s in spans
        if s.service == "groundwire-gateway"
        and s.attributes.get("groundwire.request_id") == REQUEST_ID
    ]
    if len(chats) != 1:
        return []
    return [s for s in spans if s.trace_id == chats[0].trace_id]


def _complete(trace: list[Span]) -> bool:
    """Every service reported, the LLM calls and the last stage ended, and every
    span's parent has arrived (spans are exported as they end, in batches)."""
    ids = {s.span_id for s in trace}
    names = [s.name for s in trace]
    return (
        {s.service for s in trace} >= GRPC_SERVICES | {"groundwire-gateway"}
        and names.count("llm.anthropic") >= 2
        and "stage.citations" in names
        and all(s.parent_id in ids for s in trace if s.parent_id)
    )


def test_one_chat_is_one_trace_across_the_five_services_and_the_llm(
    cluster: LocalCluster, receiver: tuple[TraceReceiver, int]
) -> None:
    with httpx.Client(base_url=cluster.gateway_url, timeout=60) as http:
        created = http.post("/v1/admin/collections", json={"name": COLLECTION}, headers=ADMIN)
        assert created.status_code == 201, created.text
        documents = [
            {"source_id": "kitchen.md", "content": PASTA},
            {"source_id": "garden.md", "content": ROSES},
        ]
        ingested = http.post(
            f"/v1/admin/collections/{COLLECTION}/documents",
            json={"documents": documents},
            headers=ADMIN,
            params={"wait": "true"},  # the report, not a job to follow
        )
        assert ingested.status_code == 200 and ingested.json()["ingested"] == 2, ingested.text
        chat = http.post(
            "/v1/chat",
            json={
                "messages": [{"role": "user", "content": "How long should spaghetti cook?"}],
                "collection": COLLECTION,
            },
            headers={"x-request-id": REQUEST_ID},
        )
    assert chat.status_code == 200, chat.text
    events = _events(chat.text)
    assert events[-1][0] == "done", events
    assert events[-1][1]["mode"] == "generated" and events[-1][1]["answer"] == ANSWER

    deadline = time.monotonic() + 30
    trace = _chat_trace(receiver[0].spans())
    while not _complete(trace) and time.monotonic() < deadline:
        time.sleep(0.2)
        trace = _chat_trace(receiver[0].spans())
    received = receiver[0].spans()
    services = {s.service for s in trace}
    assert services == GRPC_SERVICES | {"groundwire-gateway"}, (
        sorted(services),
        sorted({(s.service, s.name) for s in received}),
    )

    # one tree: a single root (the gateway's), every other parent inside the trace (the
    # gateway's client span of Ask included: it ends only once the stream is read out)
    ids = {s.span_id for s in trace}
    roots = [s for s in trace if not s.parent_id]
    assert [(r.service, r.name) for r in roots] == [("groundwire-gateway", "POST /v1/chat")]
    orphans = [(s.service, s.name) for s in trace if s.parent_id and s.parent_id not in ids]
    assert orphans == []

    # every gRPC server span of the chat: the request id, and an OK code
    served = [s for s in trace if "groundwire.rpc.code" in s.attributes]
    assert {s.service for s in served} == GRPC_SERVICES
    assert {s.attributes.get("groundwire.request_id") for s in served} == {REQUEST_ID}
    assert {s.attributes["groundwire.rpc.code"] for s in served} == {"OK"}
    rpcs = {s.name for s in served}
    assert "/groundwire.reranker.v1.RerankerService/Rerank" in rpcs
    assert "/groundwire.retriever.v1.RetrieverService/Search" in rpcs
    assert "/groundwire.embedder.v1.EmbedderService/Embed" in rpcs

    # the LLM: the analysis (fast) and the answer (strong), under their stages
    by_id = {s.span_id: s for s in trace}
    llm = {s.attributes["groundwire.llm.role"]: s for s in trace if s.name == "llm.anthropic"}
    assert set(llm) == {"fast", "strong"}
    assert all(s.service == "groundwire-orchestrator" for s in llm.values())
    assert by_id[llm["fast"].parent_id].name == "stage.analysis"
    assert by_id[llm["strong"].parent_id].name == "stage.answer"
    assert llm["strong"].attributes["groundwire.llm.outcome"] == "ok"
    assert llm["strong"].attributes["groundwire.llm.output_chars"] == len(ANSWER)
    # the SDK's own span of each HTTP call (with the API's token usage) is the LLM span's child
    sdk = [s for s in trace if s.name == "anthropic.messages.create"]
    assert sorted(by_id[s.parent_id].name for s in sdk) == ["llm.anthropic", "llm.anthropic"]
    assert all(s.attributes["gen_ai.usage.output_tokens"] > 0 for s in sdk)
    # the startup rehearsal of the SDK left no stray traces
    assert [s for s in received if s.attributes.get("server.address") == "warm-up.invalid"] == []

    # one span per stage, with the stage report's attributes
    stages = {
        s.name.removeprefix("stage."): s.attributes for s in trace if s.name.startswith("stage.")
    }
    assert set(stages) == set(STAGES)
    assert all(a["groundwire.stage.fallback"] is False for a in stages.values()), stages
    rerank = stages["rerank"]
    assert rerank["groundwire.stage.candidates_in"] >= 1
    assert rerank["groundwire.stage.candidates_out"] == rerank["groundwire.stage.candidates_in"]
    assert (
        stages["screening"]["groundwire.stage.candidates_in"]
        == rerank["groundwire.stage.candidates_out"]
    )
    assert stages["answer"]["groundwire.stage.tokens"] > 0
    assert stages["answer"]["groundwire.stage.detail.provider"] == "anthropic"
