"""Reranker settings: environment variables prefixed GROUNDWIRE_RERANKER_."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from groundwire_core.settings import ModelServiceSettings


class RerankerSettings(ModelServiceSettings):
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
    nli_model_dir: Path | None = Field(
        None,
        description="Folder with an entailment (NLI) cross-encoder built by `groundwire "
        "models build nli`; served by the Entail RPC beside the reranker's model (its own "
        "queue, the same budgets). Unset = Entail answers UNAVAILABLE and the citation "
        "check uses another method. `groundwire up` sets it when GROUNDWIRE_HOME/models/nli "
        "holds a model.",
    )
    max_pair_tokens: int = Field(
        96,
        ge=0,
        description="Cut each (query, passage) pair to this many tokens before scoring "
        "(0 = the model's own limit, 512 for bge-reranker-v2-m3). Cost grows with it: "
        "XLM-RoBERTa large int8 scores ~500 tokens/s per core, so on CPU the cap decides "
        "how many candidates fit the orchestrator's rerank budget (1.5 s). Measured on an "
        "idle 2-core machine with bge-reranker-v2-m3 int8: 13 candidates fit at 96 (~110 "
        "ms a pair), 7 or 8 at 128 (docs/sizing.md). The orchestrator sends each "
        "candidate's best window for the query, not its first tokens.",
    )
    max_batch_tokens: int = Field(
        2048,
        ge=256,
        description="Token budget of one model call (pairs x padded length): queued "
        "requests are packed into a batch up to it, and a longer one runs in several "
        "calls. Large calls lose on CPU: with bge-reranker-v2-m3 int8 on 2 cores, 32 "
        "clients got 0.78x bare ONNX Runtime's pairs/s at 16384 (a call's activations "
        "outgrow the caches), 1.12x at 2048 (docs/sizing.md).",
    )
    max_batch_passages: int = Field(256, ge=1, description="Most passages in one Rerank call.")
    max_queue: int = Field(
        16,
        ge=1,
        description="Rerank requests waiting at most; beyond it Rerank answers "
        "RESOURCE_EXHAUSTED at once. Small: a caller's rerank deadline is short, and "
        "queued work past it is wasted.",
    )
