"""Real processes for the gateway's integration tests: a ``redis-server`` on a free
port, gateways started as ``python -m groundwire_gateway`` with environment settings
(as ``groundwire up`` starts them), and a fake orchestrator + retriever: the
generated gRPC servicers on a real loopback port, in this process, scripted by the
question and recording every Ask (including when its caller cancelled it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from groundwire.common.v1 import common_pb2
from groundwire.orchestrator.v1 import orchestrator_pb2 as opb
from groundwire.orchestrator.v1 import orchestrator_pb2_grpc as ogrpc
from groundwire.retriever.v1 import retriever_pb2 as rpb
from groundwire.retriever.v1 import retriever_pb2_grpc as rgrpc
from tests.redis_server import RedisServer

ADMIN_KEY = "admin-key-0123456789"
TENANT_KEY = "tenant-key-0123456789"


# --- Redis ------------------------------------------------------------------------------


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        yield server
    finally:
        server.stop()


# --- the fake orchestrator and retriever ----------------------------------------------------

SOURCES = [
    opb.Source(
        number=1,
        chunk_id="c-install",
        source_id="guide/install.md",
        title="Install",
        heading_path=["Guide", "Install"],
        url="https://docs.example.com/install",
        text="Run pip install groundwire.",
        score=0.91,
    ),
    opb.Source(
        number=2,
        chunk_id="c-limits",
        source_id="guide/limits.md",
        title="Rate limits",
        heading_path=["Guide", "Rate limits"],
        url="https://docs.example.com/limits",
        text="Every client gets 15 chats a minute.",
        score=0.74,
    ),
    opb.Source(
        number=3,
        chunk_id="c-faq",
        source_id="faq.md",
        title="FAQ",
        heading_path=["FAQ"],
        url="https://docs.example.com/faq",
        text="Questions people ask.",
        score=0.33,
    ),
]
DELTAS = [
    "Install it ",
    "with one pip ",
    "command [1]; ",
    "each client ",
    "gets 15 chats ",
    "a minute [2].",
]
STAGES = [
    common_pb2.StageReport(
        name="analysis", ms=41.0, fallback=True, reason="no LLM configured", dependency="llm"
    ),
    common_pb2.StageReport(name="retrieval", ms=12.5, details={"candidates_out": "3"}),
    common_pb2.StageReport(
        name="rerank",
        ms=4.2,
        fallback=True,
        reason="the reranker is unavailable",
        dependency="reranker",
    ),
    common_pb2.StageReport(name="answer", ms=230.0),
]
STAGE_NAMES = [s.name for s in STAGES]


@dataclass
class AskRecord:
    question: str
    collection: str
    started: float
    ended: float | None = None
    finished: bool = False
    cancelled_at: float | None = None


class FakeOrchestrator(ogrpc.OrchestratorServiceServicer):  # type: ignore[misc]
    """Ask streams retrieval, six deltas, citations, stages, done. The question picks
    the pace: "slow" spaces deltas 150 ms apart, "hang" sends 200 deltas 100 ms
    apart, "fail" ends with an error event after the first delta."""

    def __init__(self) -> None:
        self.asks: list[AskRecord] = []
        self.searches = 0
        self.lock = threading.Lock()

    def Ask(self, request: Any, context: Any) -> Iterator[Any]:
        question = request.messages[-1].content if request.messages else ""
        record = AskRecord(question, request.collection, time.monotonic())
        with self.lock:
            self.asks.append(record)
        gone = threading.Event()

        def on_end() -> None:
            record.ended = time.monotonic()
            if not record.finished:
                record.cancelled_at = record.ended
            gone.set()

        context.add_callback(on_end)
        delay, deltas = 0.0, DELTAS
        if "slow" in question:
            delay = 0.15
        if "hang" in question:
            delay, deltas = 0.1, [f"word{i} " for i in range(200)]
        yield opb.AskEvent(retrieval=opb.RetrievalEvent(sources=SOURCES))
        for i, text in enumerate(deltas):
            if delay and gone.wait(delay):
                return
            yield opb.AskEvent(delta=opb.DeltaEvent(text=text))
            if "fail" in question and i == 0:
                record.finished = True
                yield opb.AskEvent(
                    error=common_pb2.ErrorInfo(
                        code="backend_failure", message="the llm failed", dependency="llm"
                    )
                )
                return
        yield opb.AskEvent(
            citations=opb.CitationsEvent(
                sources=SOURCES[:2],
                citations=[
                    opb.Citation(
                        number=1,
                        sentence="Install it with one pip command [1]",
                        status=opb.VERIFICATION_STATUS_SUPPORTED,
                        support=0.8,
                    ),
                    opb.Citation(
                        number=2,
                        sentence="each client gets 15 chats a minute [2]",
                        status=opb.VERIFICATION_STATUS_SUPPORTED,
                        support=0.7,
                    ),
                ],
            )
        )
        yield opb.AskEvent(stages=opb.StagesEvent(stages=STAGES))
        record.finished = True
        yield opb.AskEvent(
            done=opb.DoneEvent(mode=opb.ANSWER_MODE_GENERATED, answer="".join(deltas))
        )

    def Search(self, request: Any, context: Any) -> Any:
        with self.lock:
            self.searches += 1
        limit = request.limit or 10
        # an analysis call, and a listwise call on top with reasons (made-up counts)
        spent = opb.LlmUsage(
            input_tokens=600 if request.reasons else 200,
            output_tokens=150 if request.reasons else 50,
            estimated=True,
        )
        return opb.SearchResponse(results=SOURCES[:limit], stages=STAGES[1:3], llm_usage=spent)

    def Dependencies(self, request: Any, context: Any) -> Any:
        return opb.DependenciesResponse(
            dependencies=[
                opb.Dependency(name="embedder", status=opb.DEPENDENCY_STATUS_SERVING, target="x"),
                opb.Dependency(name="reranker", status=opb.DEPENDENCY_STATUS_DISABLED),
                opb.Dependency(name="llm", status=opb.DEPENDENCY_STATUS_DISABLED),
            ]
        )

    def Info(self, request: Any, context: Any) -> Any:
        return opb.InfoResponse()


class FakeRetriever(rgrpc.RetrieverServiceServicer):  # type: ignore[misc]
    """Collections in a dict; ingest and delete answer plausibly."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.collections: dict[str, list[str]] = {
            "docs": ["source_id", "doc_type", "title"],
            "notes": ["source_id", "doc_type", "title", "team"],
        }
        self.storage_warning = ""  # non-empty: a low data disk (Info says so, writes fail)
        self.jobs: dict[str, Any] = {}  # by id: jobs done at once (StartJob)

    def Info(self, request: Any, context: Any) -> Any:
        return rpb.InfoResponse(
            engine="edge", location="/data/qdrant", storage_warning=self.storage_warning
        )

    def _refuse_if_low(self, context: Any) -> None:
        """What the real retriever's interceptor sends for InsufficientStorage."""
        if self.storage_warning:
            context.set_trailing_metadata(
                (("gw-error-code", "insufficient_storage"), ("gw-retry-after", "60"))
            )
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, self.storage_warning)

    def _collection(self, name: str) -> Any:
        return rpb.Collection(
            name=name,
            dense_dims=384,
            bm25=True,
            filterable=self.collections[name],
            embedder_model="fake",
            chunks=3,
            sources=2,
        )

    def _missing(self, context: Any, name: str) -> None:
        context.abort(grpc.StatusCode.NOT_FOUND, f"no collection '{name}'")

    def CreateCollection(self, request: Any, context: Any) -> Any:
        with self.lock:
            if request.name in self.collections:
                context.abort(grpc.StatusCode.ALREADY_EXISTS, f"'{request.name}' exists")
            self.collections[request.name] = ["source_id", "doc_type", "title", *request.filterable]
            return self._collection(request.name)

    def ListCollections(self, request: Any, context: Any) -> Any:
        with self.lock:
            return rpb.ListCollectionsResponse(
                collections=[self._collection(n) for n in self.collections]
            )

    def DescribeCollection(self, request: Any, context: Any) -> Any:
        with self.lock:
            if request.name not in self.collections:
                self._missing(context, request.name)
            return self._collection(request.name)

    def DropCollection(self, request: Any, context: Any) -> Any:
        with self.lock:
            if self.collections.pop(request.name, None) is None:
                self._missing(context, request.name)
            return rpb.DropCollectionResponse()

    def Ingest(self, request: Any, context: Any) -> Iterator[Any]:
        self._refuse_if_low(context)
        with self.lock:
            if request.collection not in self.collections:
                if not request.create_collection:
                    self._missing(context, request.collection)
                self.collections[request.collection] = ["source_id", "doc_type", "title"]
        results = [
            rpb.DocumentResult(source_id=d.source_id, status=rpb.DOCUMENT_STATUS_INGESTED, chunks=1)
            for d in request.documents
        ]
        for i, result in enumerate(results):
            yield rpb.IngestEvent(
                progress=rpb.IngestProgress(done=i + 1, total=len(results), document=result)
            )
        yield rpb.IngestEvent(
            report=rpb.IngestReport(
                documents=results, ingested=len(results), chunks_written=len(results), seconds=0.01
            )
        )

    def StartJob(self, request: Any, context: Any) -> Any:
        """A job done at once (an ingest through the fake's Ingest; a sync that finds
        nothing to do), kept for GetJob."""
        self._refuse_if_low(context)
        if request.WhichOneof("job") == "sync":
            job = rpb.Job(
                id=f"{len(self.jobs) + 1:032x}",
                collection=request.collection,
                kind=rpb.JOB_KIND_SYNC,
                state=rpb.JOB_STATE_SUCCEEDED,
                created_at=time.time(),
                delta=rpb.JobDelta(),
            )
            with self.lock:
                self.jobs[job.id] = job
            return job
        spec = request.ingest
        ingest = rpb.IngestRequest(
            collection=request.collection,
            documents=spec.documents,
            create_collection=spec.create_collection,
        )
        report = list(self.Ingest(ingest, context))[-1].report
        job = rpb.Job(
            id=f"{len(self.jobs) + 1:032x}",
            collection=request.collection,
            kind=rpb.JOB_KIND_INGEST,
            state=rpb.JOB_STATE_SUCCEEDED,
            created_at=time.time(),
            started_at=time.time(),
            finished_at=time.time(),
            counts=rpb.JobCounts(
                total=len(report.documents),
                done=len(report.documents),
                ingested=report.ingested,
                chunks_written=report.chunks_written,
            ),
            documents=[
                rpb.JobDocument(source_id=d.source_id, outcome="ingested", chunks=d.chunks)
                for d in report.documents
            ],
        )
        with self.lock:
            self.jobs[job.id] = job
        return job

    def Sync(self, request: Any, context: Any) -> Iterator[Any]:
        """A sync that finds nothing to do (its report)."""
        self._refuse_if_low(context)
        yield rpb.SyncEvent(
            report=rpb.SyncReport(
                collection=request.collection, dry_run=request.dry_run, complete=True
            )
        )

    def GetJob(self, request: Any, context: Any) -> Any:
        with self.lock:
            job = self.jobs.get(request.id)
        if job is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"job {request.id!r} does not exist")
        return job

    def WatchJob(self, request: Any, context: Any) -> Iterator[Any]:
        yield self.GetJob(request, context)

    def CancelJob(self, request: Any, context: Any) -> Any:
        return self.GetJob(request, context)

    def ListJobs(self, request: Any, context: Any) -> Any:
        with self.lock:
            jobs = [j for j in self.jobs.values() if request.collection in ("", j.collection)]
        return rpb.ListJobsResponse(jobs=jobs[::-1][: request.limit or 100])

    def DeleteBySource(self, request: Any, context: Any) -> Any:
        with self.lock:
            if request.collection not in self.collections:
                self._missing(context, request.collection)
        return rpb.DeleteBySourceResponse(deleted=1)

    def ListSources(self, request: Any, context: Any) -> Any:
        with self.lock:
            if request.collection not in self.collections:
                self._missing(context, request.collection)
        return rpb.ListSourcesResponse(
            sources=[rpb.SourceSummary(source_id="guide/install.md", title="Install", chunks=2)],
            total=1,
        )

    def ReadSource(self, request: Any, context: Any) -> Any:
        with self.lock:
            if request.collection not in self.collections:
                self._missing(context, request.collection)
        if request.source_id != "guide/install.md":
            context.abort(grpc.StatusCode.NOT_FOUND, f"no source '{request.source_id}'")
        return rpb.ReadSourceResponse(
            chunks=[
                rpb.Chunk(chunk_id=f"c{i}", source_id=request.source_id, text=f"Step {i}.")
                for i in range(2)
            ],
            total=2,
        )


@dataclass
class FakeUpstream:
    """Both fakes on one port (the gateway's orchestrator and retriever address)."""

    orchestrator: FakeOrchestrator
    retriever: FakeRetriever
    port: int
    server: Any = field(repr=False)
    health: Any = field(repr=False)  # grpc's HealthServicer: tests may flip a name

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return {"ORCHESTRATOR_ADDR": self.addr, "RETRIEVER_ADDR": self.addr}


SERVICES = ((opb, "OrchestratorService"), (rpb, "RetrieverService"))


@pytest.fixture(scope="module")
def fake_upstream() -> Iterator[FakeUpstream]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
    orchestrator, retriever = FakeOrchestrator(), FakeRetriever()
    ogrpc.add_OrchestratorServiceServicer_to_server(orchestrator, server)
    rgrpc.add_RetrieverServiceServicer_to_server(retriever, server)
    health_servicer = health.HealthServicer()
    for name in ("", *(pb.DESCRIPTOR.services_by_name[n].full_name for pb, n in SERVICES)):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield FakeUpstream(orchestrator, retriever, port, server, health_servicer)
    finally:
        server.stop(grace=None)


# --- gateway processes ------------------------------------------------------------------


@dataclass
class GatewayProcess:
    process: subprocess.Popen[bytes]
    log_path: Path
    ready_path: Path
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


class Gateways:
    """Starts gateway processes with settings as environment variables."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[GatewayProcess] = []

    def start(self, count: int = 1, **settings: str) -> list[GatewayProcess]:
        """Starts ``count`` replicas with the same settings; waits until they serve."""
        prefix = "GROUNDWIRE_GATEWAY_"
        batch: list[GatewayProcess] = []
        for _ in range(count):
            n = len(self.started)
            log_path = self.workdir / f"gateway-{n}.log"
            ready = self.workdir / f"gateway-{n}.ready"
            ready.unlink(missing_ok=True)
            env = {k: v for k, v in os.environ.items() if not k.startswith(prefix)}
            values = {
                "HOST": "127.0.0.1",
                "PORT": "0",
                "READY_FILE": str(ready),
                "LOG_LEVEL": "INFO",
                **settings,
            }
            env.update({prefix + k.upper(): v for k, v in values.items()})
            env["PYTHONUNBUFFERED"] = "1"
            self.workdir.mkdir(parents=True, exist_ok=True)
            with log_path.open("ab") as log:
                process = subprocess.Popen(
                    [sys.executable, "-m", "groundwire_gateway"],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            gateway = GatewayProcess(process, log_path, ready)
            self.started.append(gateway)
            batch.append(gateway)
        deadline = time.monotonic() + 60
        for gateway in batch:
            while not gateway.ready_path.exists():
                code = gateway.process.poll()
                if code is not None:
                    raise RuntimeError(f"gateway exited with {code}:\n{gateway.log_tail()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"gateway not ready in 60 s:\n{gateway.log_tail()}")
                time.sleep(0.05)
            gateway.port = int(gateway.ready_path.read_text())
        return batch

    def stop_all(self) -> None:
        for gateway in self.started:
            if gateway.process.poll() is None:
                gateway.process.send_signal(signal.SIGTERM)
        for gateway in self.started:
            try:
                gateway.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                gateway.process.kill()
                gateway.process.wait()


@pytest.fixture(scope="module")
def gateways(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateways]:
    g = Gateways(tmp_path_factory.mktemp("gateways"))
    try:
        yield g
    finally:
        g.stop_all()


def metric(url: str, name: str, **labels: str) -> float:
    """Sum of one Prometheus series (samples whose labels include ``labels``)."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        base, _, rest = series.partition("{")
        if base != name:
            continue
        if all(f'{k}="{v}"' in rest for k, v in labels.items()):
            total += float(value)
    return total


@pytest.fixture
def read_metric() -> Any:
    return metric
