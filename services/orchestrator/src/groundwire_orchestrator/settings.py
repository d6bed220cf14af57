"""Orchestrator settings: environment variables prefixed GROUNDWIRE_ORCHESTRATOR_."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from groundwire_core.settings import ServiceSettings


class OrchestratorSettings(ServiceSettings):
    model_config = SettingsConfigDict(
        frozen=True, extra="ignore", env_prefix="GROUNDWIRE_ORCHESTRATOR_"
    )

    port: int = Field(50054, ge=0, le=65535, description="gRPC port; 0 picks a free one.")
    embedder_addr: str = Field("127.0.0.1:50051", description="gRPC address of the embedder.")
    retriever_addr: str = Field("127.0.0.1:50053", description="gRPC address of the retriever.")
    reranker_addr: str | None = Field(
        "127.0.0.1:50052", description="gRPC address of the reranker; empty disables reranking."
    )
    call_timeout_s: float = Field(
        10.0,
        gt=0,
        description="Upper bound of one call to a dependency (the caller's deadline wins).",
    )
    rerank_timeout_s: float = Field(
        2.0, gt=0, description="Rerank stage budget; past it the fused order is used."
    )
    candidates: int = Field(50, ge=1, le=500, description="Fused candidates passed to rerank.")
    rerank_keep: int = Field(20, ge=1, description="Results kept after rerank.")
    rerank_threshold: float = Field(0.5, ge=0, le=1, description="Reranker score floor.")
    dense_floor: float = Field(0.3, ge=-1, le=1, description="Cosine floor on the dense path.")
    rrf_k: int = Field(60, ge=1, description="RRF constant k.")
    path_limit: int = Field(100, ge=1, description="Candidates per retrieval path.")
