"""Reranker settings: environment variables prefixed GROUNDWIRE_RERANKER_."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from groundwire_core.settings import ServiceSettings


class RerankerSettings(ServiceSettings):
    model_config = SettingsConfigDict(
        frozen=True, extra="ignore", env_prefix="GROUNDWIRE_RERANKER_"
    )

    port: int = Field(50052, ge=0, le=65535, description="gRPC port; 0 picks a free one.")
    model_dir: Path | None = Field(
        None,
        description="Folder with a cross-encoder built by `groundwire models build "
        "bge-reranker-v2-m3` (or `cross-encoder`); unset = no model: the service runs, "
        "reports ready=false, and callers use fused order.",
    )
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
    max_batch_tokens: int = Field(
        16384,
        ge=256,
        description="Token budget for packing queued requests into one model batch "
        "(pairs x padded length); one request is never split.",
    )
    max_batch_passages: int = Field(256, ge=1, description="Most passages in one Rerank call.")
    max_queue: int = Field(
        16,
        ge=1,
        description="Rerank requests waiting at most; beyond it Rerank answers "
        "RESOURCE_EXHAUSTED at once. Small: a caller's rerank deadline is short, and "
        "queued work past it is wasted.",
    )
