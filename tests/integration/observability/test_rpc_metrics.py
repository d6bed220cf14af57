"""Per-RPC metrics and span attributes on a real server (the shared runtime, port 0,
a real channel), read back from the Prometheus registry and over HTTP from the
metrics endpoint that ``metrics_port`` opens.

The service is a fake OrchestratorService: Search (unary) behaves by its query, Ask
(server streaming) sends three events, or fails after one for collection "broken"."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from groundwire.orchestrator.v1 import orchestrator_pb2, orchestrator_pb2_grpc
from groundwire_cli.cluster import free_port
from groundwire_core.context import request_scope
from groundwire_core.errors import Overloaded, Unavailable
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.observability import split_method
from groundwire_core.grpc.server import serving
from groundwire_core.settings import ServiceSettings
from groundwire_embedder.settings import EmbedderSettings

SERVICE = "groundwire.orchestrator.v1.OrchestratorService"
STEP_S = 0.03


class FakeOrchestrator(orchestrator_pb2_grpc.OrchestratorServiceServicer):
    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.ask_remaining: list[float | None] = []

    async def Search(
        self, request: orchestrator_pb2.SearchRequest, context: grpc.aio.ServicerContext
    ) -> orchestrator_pb2.SearchResponse:
        if request.query == "overloaded":
            raise Overloaded("the queue is full", retry_after_s=1)
        if request.query == "crash":
            raise ValueError("secret internal detail")
        if request.query == "wait":
            self.entered.set()
            await self.release.wait()
        return orchestrator_pb2.SearchResponse()

    async def Ask(
        self, request: orchestrator_pb2.AskRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[orchestrator_pb2.AskEvent]:
        self.ask_remaining.append(context.time_remaining())
        for i in range(3):
            await asyncio.sleep(STEP_S)
            yield orchestrator_pb2.AskEvent(delta=orchestrator_pb2.DeltaEvent(text=str(i)))
            if request.collection == "broken":
                raise Unavailable("the retriever is down", dependency="retriever")


class FakeService:
    def __init__(self) -> None:
        self.servicer = FakeOrchestrator()

    @property
    def name(self) -> str:
        return "orchestrator"

    @property
    def service_names(self) -> Sequence[str]:
        return (SERVICE,)

    def register(self, server: grpc.aio.Server) -> None:
        orchestrator_pb2_grpc.add_OrchestratorServiceServicer_to_server(self.servicer, server)

    async def start(self) -> None:
        pass

    async def check(self) -> None:
        pass

    async def stop(self) -> None:
        pass


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def requests(method: str, code: str) -> float:
    return value("groundwire_rpc_requests_total", service=SERVICE, method=method, code=code)


def duration(method: str, suffix: str) -> float:
    return value(f"groundwire_rpc_duration_seconds_{suffix}", service=SERVICE, method=method)


class Running:
    def __init__(self, service: FakeService, port: int, metrics_port: int) -> None:
        self.service = service
        self.port = port
        self.metrics_port = metrics_port


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    settings = ServiceSettings(port=0, metrics_port=free_port(), shutdown_grace_s=0.5)
    assert settings.metrics_port is not None
    service = FakeService()
    async with serving(service, settings) as port:
        yield Running(service, port, settings.metrics_port)


@pytest.fixture
async def stub(running: Running) -> AsyncIterator[orchestrator_pb2_grpc.OrchestratorServiceStub]:
    async with create_channel(f"127.0.0.1:{running.port}") as channel:
        yield orchestrator_pb2_grpc.OrchestratorServiceStub(channel)


async def _code_of(call: object) -> grpc.StatusCode:
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK


async def settled(read: Callable[[], float], expected: float) -> float:
    """``read()`` once it equals ``expected``, else its value after 1000 polls of 10 ms.
    The server records an RPC as its handler unwinds, which can be just after the caller
    has its status (grpc.aio's abort sends the status, then raises through the recording
    interceptor): a read right after the call may be one step early (ci2 read the
    INTERNAL count 0 after the caller got INTERNAL)."""
    for _ in range(1000):
        if (got := read()) == expected:
            return got
        await asyncio.sleep(0.01)
    return read()


def test_split_method() -> None:
    assert split_method("/groundwire.embedder.v1.EmbedderService/Embed") == (
        "groundwire.embedder.v1.EmbedderService",
        "Embed",
    )
    assert split_method("/Bare") == ("unknown", "Bare")


async def test_unary_rpcs_are_counted_by_the_code_the_caller_got(
    stub: orchestrator_pb2_grpc.OrchestratorServiceStub,
) -> None:
    before = {c: requests("Search", c) for c in ("OK", "RESOURCE_EXHAUSTED", "INTERNAL")}
    count_before = duration("Search", "count")
    codes = [
        await _code_of(stub.Search(orchestrator_pb2.SearchRequest(query=q), timeout=5))
        for q in ("fine", "fine", "overloaded", "crash")
    ]
    assert codes == [
        grpc.StatusCode.OK,
        grpc.StatusCode.OK,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.INTERNAL,
    ]
    for code, n in (("OK", 2), ("RESOURCE_EXHAUSTED", 1), ("INTERNAL", 1)):

        def counted(c: str = code) -> float:
            return requests("Search", c) - before[c]

        assert await settled(counted, n) == n, code
    assert await settled(lambda: duration("Search", "count") - count_before, 4) == 4


async def test_a_stream_is_timed_to_its_last_message_and_its_error_counted(
    stub: orchestrator_pb2_grpc.OrchestratorServiceStub,
) -> None:
    ok, unavailable = requests("Ask", "OK"), requests("Ask", "UNAVAILABLE")
    total_before, count_before = duration("Ask", "sum"), duration("Ask", "count")
    events = [e async for e in stub.Ask(orchestrator_pb2.AskRequest(collection="c"), timeout=5)]
    assert len(events) == 3
    assert await settled(lambda: requests("Ask", "OK") - ok, 1) == 1
    assert await settled(lambda: duration("Ask", "count") - count_before, 1) == 1
    # three steps of STEP_S before the last message: the time covers the whole stream
    assert duration("Ask", "sum") - total_before >= 3 * STEP_S * 0.9

    received = []
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        async for event in stub.Ask(orchestrator_pb2.AskRequest(collection="broken"), timeout=5):
            received.append(event)
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE and len(received) == 1
    assert await settled(lambda: requests("Ask", "UNAVAILABLE") - unavailable, 1) == 1


async def test_in_flight_rpcs_are_gauged(
    running: Running, stub: orchestrator_pb2_grpc.OrchestratorServiceStub
) -> None:
    def in_flight() -> float:
        return value("groundwire_rpc_in_flight", service=SERVICE, method="Search")

    assert in_flight() == 0
    call = asyncio.ensure_future(stub.Search(orchestrator_pb2.SearchRequest(query="wait")))
    async with asyncio.timeout(5):
        await running.service.servicer.entered.wait()
    assert in_flight() == 1
    running.service.servicer.release.set()
    await call
    assert await settled(in_flight, 0) == 0


async def test_health_checks_are_not_recorded(running: Running) -> None:
    async with create_channel(f"127.0.0.1:{running.port}") as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5
        )
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    health = {"service": "grpc.health.v1.Health", "method": "Check", "code": "OK"}
    assert REGISTRY.get_sample_value("groundwire_rpc_requests_total", health) is None


async def test_the_server_span_carries_the_request_id_and_the_code(
    running: Running,
    stub: orchestrator_pb2_grpc.OrchestratorServiceStub,
    spans: InMemorySpanExporter,
) -> None:
    with request_scope("rid-observed-1", 5.0):
        code = await _code_of(stub.Search(orchestrator_pb2.SearchRequest(query="overloaded")))
        events = [e async for e in stub.Ask(orchestrator_pb2.AskRequest(collection="c"))]
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and len(events) == 3

    def server_span(method: str):  # type: ignore[no-untyped-def]
        [span] = [
            s
            for s in spans.get_finished_spans()
            if s.name == f"/{SERVICE}/{method}" and s.kind == SpanKind.SERVER
        ]
        return span

    search = server_span("Search")
    assert search.attributes is not None
    assert search.attributes["groundwire.request_id"] == "rid-observed-1"
    assert search.attributes["groundwire.rpc.code"] == "RESOURCE_EXHAUSTED"
    [client] = [
        s
        for s in spans.get_finished_spans()
        if s.name == f"/{SERVICE}/Search" and s.kind == SpanKind.CLIENT
    ]
    # the server span continues the caller's trace
    assert search.parent is not None and search.parent.span_id == client.context.span_id
    assert search.context.trace_id == client.context.trace_id
    ask = server_span("Ask")
    assert ask.attributes is not None
    assert ask.attributes["groundwire.rpc.code"] == "OK"
    assert ask.attributes["groundwire.rpc.messages_sent"] == 3
    # a streaming call carries the request id and the caller's deadline too
    assert ask.attributes["groundwire.request_id"] == "rid-observed-1"
    [remaining] = running.service.servicer.ask_remaining
    assert remaining is not None and remaining <= 5.0


async def test_the_metrics_endpoint_serves_the_registry_over_http(
    running: Running, stub: orchestrator_pb2_grpc.OrchestratorServiceStub
) -> None:
    await stub.Search(orchestrator_pb2.SearchRequest(query="fine"), timeout=5)
    url = f"http://127.0.0.1:{running.metrics_port}/metrics"
    async with httpx.AsyncClient(timeout=5) as http:
        reply = await http.get(url)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain")
    scraped = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(reply.text)
        for sample in family.samples
    }
    key = (
        "groundwire_rpc_requests_total",
        (("code", "OK"), ("method", "Search"), ("service", SERVICE)),
    )
    assert scraped[key] >= 1
    assert scraped[key] == requests("Search", "OK")
    names = {name for name, _ in scraped}
    assert "groundwire_rpc_duration_seconds_bucket" in names


async def test_the_metrics_endpoint_lives_as_long_as_the_server() -> None:
    metrics_port = free_port()
    settings = ServiceSettings(port=0, metrics_port=metrics_port, shutdown_grace_s=0.5)
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    async with httpx.AsyncClient(timeout=5) as http:
        async with serving(FakeService(), settings):
            assert (await http.get(url)).status_code == 200
        with pytest.raises(httpx.ConnectError):
            await http.get(url)


def test_metrics_port_is_off_by_default_and_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert ServiceSettings().metrics_port is None
    monkeypatch.setenv("GROUNDWIRE_EMBEDDER_METRICS_PORT", "9464")
    assert EmbedderSettings().metrics_port == 9464
