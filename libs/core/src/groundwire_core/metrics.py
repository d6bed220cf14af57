"""Prometheus metrics every Groundwire gRPC service exports.

Recorded by the server interceptor (per RPC: :mod:`groundwire_core.grpc.observability`),
the batching engine (queue depth, batch size, tokens), the orchestrator's pipeline
(per stage) and its LLM wrapper (per provider call); served on ``metrics_port`` when
set (:func:`serve_metrics`). Names are shared with deploy/grafana/groundwire.json.

All of them live in prometheus_client's default registry: one process is one
service, and the ``service`` label of the RPC metrics is the fully qualified gRPC
service (``groundwire.embedder.v1.EmbedderService``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import Counter, Gauge, Histogram, start_http_server

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# An LLM call lasts from a few hundred milliseconds to a minute (a long streamed answer).
LLM_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)

RPC_REQUESTS = Counter(
    "groundwire_rpc_requests_total", "RPCs served, by outcome code", ["service", "method", "code"]
)
RPC_LATENCY = Histogram(
    "groundwire_rpc_duration_seconds",
    "Time to serve one RPC (a streaming RPC: until its last message)",
    ["service", "method"],
    buckets=LATENCY_BUCKETS,
)
RPC_IN_FLIGHT = Gauge("groundwire_rpc_in_flight", "RPCs being served now", ["service", "method"])
STAGE_LATENCY = Histogram(
    "groundwire_stage_duration_seconds",
    "Time of one chain stage, as its stage report gives it",
    ["stage"],
    buckets=LATENCY_BUCKETS,
)
STAGE_FALLBACKS = Counter(
    "groundwire_stage_fallbacks_total", "Stages that took their fallback", ["stage", "dependency"]
)
QUEUE_DEPTH = Gauge("groundwire_batch_queue_depth", "Requests waiting for the model", ["service"])
BATCH_SIZE = Histogram(
    "groundwire_batch_size",
    "Items per model batch",
    ["service"],
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
)
TOKENS = Counter("groundwire_tokens_total", "Tokens run through the model", ["service"])
LLM_CALLS = Counter(
    "groundwire_llm_calls_total",
    "LLM calls, by the provider that served them (or the chain, when none did), "
    "model role and outcome (ok or an error code)",
    ["provider", "role", "outcome"],
)
LLM_LATENCY = Histogram(
    "groundwire_llm_duration_seconds",
    "Time of one LLM call, to its last token",
    ["provider", "role"],
    buckets=LLM_BUCKETS,
)


@dataclass
class MetricsServer:
    """The running /metrics endpoint; :meth:`close` stops it and frees the port."""

    port: int
    _httpd: WSGIServer
    _thread: threading.Thread

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def serve_metrics(port: int, host: str = "0.0.0.0") -> MetricsServer:
    """Starts the /metrics HTTP endpoint in a daemon thread (port 0 picks a free one).

    Errors: OSError when the address cannot be bound.
    """
    httpd, thread = start_http_server(port, addr=host)
    return MetricsServer(int(httpd.server_port), httpd, thread)
