"""Embedder settings: environment variables prefixed GROUNDWIRE_EMBEDDER_."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from groundwire_core.settings import ModelServiceSettings


class EmbedderSettings(ModelServiceSettings):
    model_config = SettingsConfigDict(
        frozen=True, extra="ignore", env_prefix="GROUNDWIRE_EMBEDDER_"
    )

    port: int = Field(50051, ge=0, le=65535, description="gRPC port; 0 picks a free one.")
    model_dir: Path = Field(
        Path("var/models/minilm"),
        description="Folder with model.onnx, tokenizer.json and groundwire-model.json "
        "(built by `groundwire models build PROFILE`).",
    )
    inter_op_threads: int = Field(1, ge=1, description="ONNX Runtime inter-op threads.")
    ort_allow_spinning: bool = Field(
        True,
        description="Let ONNX Runtime's idle threads spin between operators (its default): "
        "a single query runs ~2 ms faster on 2 cores; turn off when other processes need "
        "the cores more than the embedder does.",
    )
    max_batch_tokens: int = Field(
        512,
        ge=256,
        description="Token budget of one model call (texts x padded length). Small on "
        "CPU: MiniLM on 2 cores ran 168-185 texts/s in calls of 64-512 tokens and 118 "
        "at 8,192 (short texts; long ones 25-26 vs 14 at 16,384; "
        "benchmarks/embedder_call_size.py). A larger request is cut into calls of this "
        "size; a smaller one is merged with what waits behind it.",
    )
    max_batch_texts: int = Field(256, ge=1, description="Most texts accepted in one Embed call.")
    tokenize_max_chars: int = Field(
        65_536,
        ge=1024,
        description="Tokenize counts at most this many characters of a text (the count is "
        "then a lower bound and the reply says the text was truncated): one 8 MiB text took "
        "8.6 s and kept 680 MB. Chunk sizing needs exact counts only up to a chunk's size.",
    )
    max_queue: int = Field(
        64,
        ge=1,
        description="Requests waiting at most; beyond it Embed answers RESOURCE_EXHAUSTED "
        "with a retry-after at once.",
    )
