"""The embedder's side of the shared batching engine: OnnxEncoder as a Backend.

The queue, token-budget batching and overload answers live in
groundwire_core.batching; this module adapts the encoder's three steps to it and
splits a batch's outputs into per-text results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from groundwire_core.batching import BatchingEngine
from groundwire_embedder.models.manifest import ModelManifest
from groundwire_embedder.models.onnx_backend import (
    EncodedBatch,
    EncoderOutput,
    GraphOutputs,
    SparseWeights,
)

# Characters kept per text before tokenizing: a token is rarely longer than 16
# characters, so this never cuts text the model would have seen, and a 1 MB text
# costs a bounded tokenizer pass instead of a megabyte-sized one.
CHARS_PER_TOKEN_BOUND = 16


class Encoder(Protocol):
    """What the engine needs from a model (see models.onnx_backend.OnnxEncoder)."""

    def load(self) -> None: ...

    @property
    def manifest(self) -> ModelManifest: ...

    def tokenize(self, texts: Sequence[str]) -> EncodedBatch: ...

    def infer(self, batch: EncodedBatch, shared: bool = False) -> GraphOutputs: ...

    def postprocess(self, batch: EncodedBatch, raw: GraphOutputs) -> EncoderOutput: ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...


@dataclass(frozen=True)
class TextVectors:
    """The vectors of one text."""

    dense: np.ndarray  # float32 [dense_dims]
    sparse: SparseWeights | None
    multi_vector: np.ndarray | None  # float32 [tokens - 1, multi_vector_dims]


class EncoderBackend:
    """Adapts an Encoder to groundwire_core.batching.Backend."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder

    def load(self) -> None:
        self.encoder.load()

    def estimate_tokens(self, item: str) -> int:
        # about 4 characters a token, capped: packing needs an estimate before tokenizing
        return min(self.encoder.manifest.max_tokens, len(item) // 4 + 2)

    def tokenize(self, items: Sequence[str]) -> EncodedBatch:
        limit = self.encoder.manifest.max_tokens * CHARS_PER_TOKEN_BOUND
        return self.encoder.tokenize([t[:limit] for t in items])

    def token_counts(self, batch: EncodedBatch) -> list[int]:
        return list(batch.token_counts)

    def infer(self, batch: EncodedBatch, shared: bool = False) -> GraphOutputs:
        return self.encoder.infer(batch, shared)

    def postprocess(self, batch: EncodedBatch, raw: GraphOutputs) -> list[TextVectors]:
        out = self.encoder.postprocess(batch, raw)
        return [
            TextVectors(
                dense=out.dense[i],
                sparse=out.sparse[i] if out.sparse is not None else None,
                multi_vector=out.multi_vector[i] if out.multi_vector is not None else None,
            )
            for i in range(out.dense.shape[0])
        ]


def build_engine(
    encoder: Encoder,
    *,
    max_batch_tokens: int,
    max_batch_texts: int,
    max_queue: int,
    lanes: int = 1,
) -> BatchingEngine[str, TextVectors]:
    return BatchingEngine(
        EncoderBackend(encoder),
        name="embedder",
        max_batch_tokens=max_batch_tokens,
        max_batch_items=max_batch_texts,
        max_queue=max_queue,
        lanes=lanes,
        warm_up=["warm-up query", "a longer warm-up passage " * 8],
    )
