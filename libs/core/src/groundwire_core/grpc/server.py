"""Server bootstrap shared by every gRPC service.

A service implements :class:`GrpcService` (register its servicers, warm up, stop);
:func:`create_server` builds a server with the tracing, metrics and runtime
interceptors, health and reflection, bound to ``host:port`` (port 0 picks a free
one) and returns ``(server, port)``. :func:`serving` runs the whole life cycle —
health says SERVING only after ``start()`` (the warm-up) returned, ``check()`` is
re-run every ``health_check_interval_s`` after it, and /metrics is served on
``metrics_port`` when set — and :func:`serve` adds signal handling for
``python -m groundwire_<svc>``.

Health has two names per service: ``""`` (the process is up and warmed: liveness)
and the service's own name, e.g. ``groundwire.retriever.v1.RetrieverService``
(it can answer now: readiness). A failing ``check()`` turns the second
NOT_SERVING until a check passes again; the first stays SERVING, so an orchestrator
restarts nothing while a dependency such as a Qdrant server is away.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry.instrumentation.grpc import aio_server_interceptor

from groundwire_core.errors import GroundwireError
from groundwire_core.grpc.interceptors import ServerRuntimeInterceptor
from groundwire_core.grpc.observability import ServerObservabilityInterceptor
from groundwire_core.grpc.service_auth import server_interceptors, set_process_token
from groundwire_core.metrics import MetricsServer, serve_metrics
from groundwire_core.settings import ServiceSettings

log = logging.getLogger("groundwire.server")

# Larger than the 4 MiB default: an Embed reply for 64 texts of BGE-M3 ColBERT
# vectors or an ingest of a PDF passes it.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
KEEPALIVE_TIME_MS = 30_000
"""How often a client pings an idle connection (a dead peer found within this plus
the timeout). One number for both sides: the server's ping policy is derived from it."""
KEEPALIVE_TIMEOUT_MS = 20_000


def client_keepalive_options(time_ms: int = KEEPALIVE_TIME_MS) -> list[tuple[str, int]]:
    """A channel's keepalive: a ping every ``time_ms``, also while a long call sends no
    data (a ``?wait=true`` ingest waits minutes for its report)."""
    return [
        ("grpc.keepalive_time_ms", time_ms),
        ("grpc.keepalive_timeout_ms", min(KEEPALIVE_TIMEOUT_MS, time_ms * 2)),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def server_keepalive_options(time_ms: int = KEEPALIVE_TIME_MS) -> list[tuple[str, int]]:
    """The ping policy that accepts :func:`client_keepalive_options` of the same
    ``time_ms``: gRPC's server default (one ping per 5 minutes without data, calls
    only) answered a client pinging every 30 s with GOAWAY ``too_many_pings``, which
    failed a long ingest with 503 (#31). Half the interval as the floor, so a client's
    timer jitter is never a strike."""
    return [
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", time_ms // 2),
        ("grpc.http2.max_ping_strikes", 2),
    ]


class GrpcService(Protocol):
    """What a service gives the runtime."""

    @property
    def name(self) -> str:
        """Short name used in logs and errors, e.g. "embedder"."""
        ...

    @property
    def service_names(self) -> Sequence[str]:
        """Fully qualified gRPC service names, e.g. "groundwire.embedder.v1.EmbedderService"."""
        ...

    def register(self, server: grpc.aio.Server) -> None:
        """Adds the servicers to ``server``; must not load models or open sockets."""

    async def start(self) -> None:
        """Warm-up: load models, open stores, connect. Health is SERVING after it."""

    async def check(self) -> None:
        """Raises a GroundwireError (Unavailable) while the service cannot answer: a
        dependency it has no fallback for is away. Re-run after start() on a timer."""

    async def stop(self) -> None:
        """Releases what start() acquired."""


_HEALTH_PREFIX = f"/{health.SERVICE_NAME}/"


def _traced(details: grpc.HandlerCallDetails) -> bool:
    """Every call but health checks gets a span. OpenTelemetry's own
    ``filters.health_check()`` answers the same but runs typing-Protocol
    ``isinstance`` checks on every call (~0.1 ms of each request's CPU here)."""
    method: str | bytes = details.method
    if isinstance(method, bytes):
        method = method.decode()
    return not method.startswith(_HEALTH_PREFIX)


class PortUnavailable(OSError):
    """The server's address could not be bound; the message says which and why."""


@dataclass
class RunningServer:
    server: grpc.aio.Server
    port: int
    health: health.aio.HealthServicer


def create_server(service: GrpcService, settings: ServiceSettings) -> RunningServer:
    """Builds (does not start) the server for ``service``; health starts NOT_SERVING.

    With ``settings.service_token`` set, every call but health must carry it (see
    ``service_auth``), and the channels this process opens attach it."""
    token = settings.service_token.get_secret_value() if settings.service_token else None
    if token:  # unset keeps what the process has (a test may run several services)
        set_process_token(token)
    server = grpc.aio.server(
        # Health is not traced: the OTel interceptor assumes async-generator streams,
        # and grpc's health Watch writes through context.write() instead. The metrics
        # interceptor sits inside the span (to annotate it) and outside the runtime
        # interceptor (to see the status code errors were mapped to).
        interceptors=[
            aio_server_interceptor(filter_=_traced),
            ServerObservabilityInterceptor(),
            ServerRuntimeInterceptor(),
            # innermost of the runtime ones but before any handler: a refused call
            # is still traced, counted and logged like any other
            *server_interceptors(token, service.name),
        ],
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
            *server_keepalive_options(),
        ],
    )
    service.register(server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*service.service_names, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    address = f"{settings.host}:{settings.port}"
    try:
        port = server.add_insecure_port(address)
    except RuntimeError:  # grpc's "Failed to bind to address": no errno to tell why
        port = 0
    if port == 0:
        raise PortUnavailable(
            f"{service.name} cannot listen on {address}: another process (another "
            f"{service.name}?) has the port, or the address is not this machine's"
        )
    return RunningServer(server, port, health_servicer)


async def _set_health(running: RunningServer, names: Sequence[str], status: int) -> None:
    for name in ("", *names):
        await running.health.set(name, status)


async def _watch(service: GrpcService, running: RunningServer, interval_s: float) -> None:
    """Runs ``service.check()`` every ``interval_s``; while it fails, the service's own
    health names are NOT_SERVING (``""`` is left alone). Logs each change once."""
    ready = True
    while True:
        await asyncio.sleep(interval_s)
        try:
            # a check must not outlive its period: a hung dependency is an absent one
            await asyncio.wait_for(service.check(), timeout=max(interval_s, 1.0))
            problem = None
        except GroundwireError as error:
            problem = error.message
        except TimeoutError:
            problem = f"the health check took longer than {max(interval_s, 1.0):.1f}s"
        except Exception:
            log.exception("%s health check failed", service.name)
            problem = "the health check failed"
        if (problem is None) == ready:
            continue
        ready = problem is None
        answer = health_pb2.HealthCheckResponse
        status = answer.SERVING if ready else answer.NOT_SERVING
        for name in service.service_names:  # not _set_health: "" (liveness) stays as is
            await running.health.set(name, status)
        if ready:
            log.info("%s SERVING again: its health check passes", service.name)
        else:
            log.warning("%s NOT_SERVING: %s", service.name, problem)


@asynccontextmanager
async def serving(service: GrpcService, settings: ServiceSettings) -> AsyncIterator[int]:
    """Starts ``service`` on a real port, warms it up, yields the port; stops gracefully.

    With ``metrics_port`` set, /metrics is served over HTTP on it from before the
    warm-up until the server has stopped.
    """
    running = create_server(service, settings)
    await _set_health(running, service.service_names, health_pb2.HealthCheckResponse.NOT_SERVING)
    await running.server.start()
    log.info("%s listening on %s:%d (warming up)", service.name, settings.host, running.port)
    metrics: MetricsServer | None = None
    watcher: asyncio.Task[None] | None = None
    try:
        if settings.metrics_port is not None:
            metrics = serve_metrics(settings.metrics_port, settings.host)
            log.info("%s metrics on %s:%d/metrics", service.name, settings.host, metrics.port)
        await service.start()
        await _set_health(running, service.service_names, health_pb2.HealthCheckResponse.SERVING)
        log.info("%s SERVING on port %d", service.name, running.port)
        if settings.health_check_interval_s > 0:
            watcher = asyncio.create_task(
                _watch(service, running, settings.health_check_interval_s),
                name=f"{service.name}-health",
            )
        yield running.port
    finally:
        if watcher is not None:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        try:
            await _set_health(
                running, service.service_names, health_pb2.HealthCheckResponse.NOT_SERVING
            )
            await running.server.stop(settings.shutdown_grace_s)
            await service.stop()
        finally:
            if metrics is not None:
                # shutdown() waits for the serving thread's next poll (up to 0.5 s)
                await asyncio.to_thread(metrics.close)
        log.info("%s stopped", service.name)


async def serve(service: GrpcService, settings: ServiceSettings) -> None:
    """Runs ``service`` until SIGINT or SIGTERM, then shuts down gracefully."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with serving(service, settings) as port:
        if settings.ready_file:
            # written last, atomically: its presence means SERVING on this port
            ready = Path(settings.ready_file)
            tmp = ready.with_suffix(".tmp")
            tmp.write_text(str(port))
            tmp.replace(ready)
        await stop.wait()
        log.info("%s shutting down (grace %.1fs)", service.name, settings.shutdown_grace_s)


def run(service: GrpcService, settings: ServiceSettings) -> None:
    """Entry point body of ``python -m groundwire_<svc>``: logging, tracing, serve."""
    from groundwire_core.logs import configure_logging
    from groundwire_core.telemetry import setup_telemetry

    configure_logging(settings, service.name)
    provider = setup_telemetry(settings, service.name)
    try:
        asyncio.run(serve(service, settings))
    # The errors we raise on purpose say what is wrong and what to do (a taken port, a
    # model folder that is not a built model, a data folder that cannot be created):
    # one line each, a traceback would bury it. Anything else keeps its traceback.
    except PortUnavailable as error:
        log.error("%s", error)
        raise SystemExit(1) from None
    except GroundwireError as error:
        log.error("%s cannot start: %s", service.name, error.message)
        raise SystemExit(1) from None
    except Exception:
        log.exception("%s failed", service.name)
        raise SystemExit(1) from None
    finally:
        provider.shutdown()
