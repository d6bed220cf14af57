"""The base of every service's settings: one frozen object from environment variables.

Each service subclasses :class:`ServiceSettings` with its own prefix
(``GROUNDWIRE_EMBEDDER_``, ``GROUNDWIRE_RETRIEVER_``…), builds it once in
``__main__`` and passes it down. Nothing else in the code base reads the environment.
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
OtelExporter = Literal["none", "otlp", "console"]


class ServiceSettings(BaseSettings):
    """Knobs every Groundwire service has; subclasses set ``env_prefix``."""

    model_config = SettingsConfigDict(frozen=True, extra="ignore", env_prefix="GROUNDWIRE_")

    host: str = Field("127.0.0.1", description="Interface the server binds.")
    port: int = Field(0, ge=0, le=65535, description="Port the server binds; 0 picks a free one.")
    log_level: LogLevel = Field("INFO", description="Log level of the service's loggers.")
    log_json: bool = Field(False, description="Log one JSON object per line instead of text.")
    otel_exporter: OtelExporter = Field(
        "none", description="Trace exporter: none (off), otlp (to otel_endpoint) or console."
    )
    otel_endpoint: str = Field(
        "http://127.0.0.1:4317", description="OTLP/gRPC collector endpoint when otel_exporter=otlp."
    )
    metrics_port: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="If set, Prometheus metrics are served over HTTP at /metrics on this "
        "port (0 picks a free one); unset = no metrics endpoint. gRPC services only: the "
        "gateway serves /metrics on its own HTTP port.",
    )
    shutdown_grace_s: float = Field(
        5.0, gt=0, description="Seconds in-flight RPCs get to finish on SIGTERM."
    )
    health_check_interval_s: float = Field(
        5.0,
        ge=0,
        description="Seconds between re-runs of the service's dependency check after "
        "warm-up (the dependencies it cannot do without: today the retriever's Qdrant "
        "server or data folder). While it fails, the service's own gRPC health name (e.g. "
        "groundwire.retriever.v1.RetrieverService: readiness) is NOT_SERVING and the "
        'process-wide "" name (liveness) stays SERVING; 0 = never re-checked.',
    )
    service_token: SecretStr | None = Field(
        None,
        # one name for every service (no service prefix): peers must share it
        validation_alias=AliasChoices("GROUNDWIRE_SERVICE_TOKEN"),
        description="GROUNDWIRE_SERVICE_TOKEN (the same name in every service): the shared "
        "token every gRPC call between services carries (authorization: Bearer <token>); "
        "with it set, a call without it is refused UNAUTHENTICATED (health checks "
        "excepted). Unset = any caller that reaches a port is served (a warning at start). "
        "`groundwire up` generates one per run.",
    )
    ready_file: str | None = Field(
        None,
        description="If set, the bound port is written to this file once the service is "
        "SERVING (used by `groundwire up` to find ports picked by the OS).",
    )


class ModelServiceSettings(ServiceSettings):
    """Knobs of the services that run an ONNX model (embedder, reranker)."""

    intra_op_threads: int = Field(
        0, ge=0, description="ONNX Runtime intra-op threads; 0 = all cores."
    )
    model_lanes: int = Field(
        0,
        ge=0,
        description="Model runs that may go side by side, each on one thread, while "
        "requests wait behind them; a request with nothing behind it runs alone on every "
        "intra-op thread. 0 = one lane per intra-op thread (INTRA_OP_THREADS, or one per "
        "core); 1 = one run at a time. More than 1 keeps a second copy of the weights. "
        "On 2 cores the embedder at 32 clients went from 180 to 214 texts/s (MiniLM fp32) "
        "and 355 to 515 (int8) with two lanes (benchmarks/embedder.md).",
    )

    serve_cost_model: bool = Field(
        False,
        description="Serve a cost model (random weights of the real architecture, from "
        "`groundwire models build PROFILE --random-weights`): for sizing benchmarks only. "
        "Without it the service refuses to start on one, so a cost model never answers.",
    )

    @property
    def lanes(self) -> int:
        """``model_lanes`` resolved: with 0, one lane per thread of the alone session
        (``intra_op_threads``, or with 0 one per core this process may use), so that the
        lanes together use the threads one run alone would."""
        if self.model_lanes > 0:
            return self.model_lanes
        if self.intra_op_threads > 0:
            return self.intra_op_threads
        return max(1, len(os.sched_getaffinity(0)))
