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
        description="Folder with a cross-encoder built by `groundwire models build`; unset = "
        "no model: the service runs, reports ready=false, and callers use fused order.",
    )
    max_batch_passages: int = Field(256, ge=1, description="Most passages in one Rerank call.")
