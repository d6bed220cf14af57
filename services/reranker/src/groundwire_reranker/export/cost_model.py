"""Cost models: the real cross-encoders' architectures and sizes with random weights.

bge-reranker-v2-m3 is XLM-RoBERTa large (567M parameters): scoring 50 candidates of 256
tokens costs ~25 core-seconds int8 on CPU, and nothing measured with a tiny model says
so. A cost model has the real model's layers, widths, heads, embedding table and
position range, and random weights: it measures cost and mechanics, never quality. Its
manifest says ``cost_model``; the reranker refuses it unless ``SERVE_COST_MODEL`` is set.

The tokenizer is ``tiny``'s, trained on Groundwire's own sample sentences (ids inside the
real vocabulary, more pieces per word than the real one): compare costs per token.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from groundwire_reranker.export.tiny import Architecture, tiny_checkpoint


@dataclass(frozen=True)
class CrossEncoderShape:
    """A checkpoint's architecture and sizes (its config.json)."""

    architecture: Architecture
    hidden_size: int
    layers: int
    heads: int
    intermediate_size: int
    vocab_size: int
    max_positions: int


COST_SHAPES: dict[str, CrossEncoderShape] = {
    # BAAI/bge-reranker-v2-m3: XLM-RoBERTa large
    "bge-reranker-v2-m3": CrossEncoderShape("xlm-roberta", 1024, 24, 16, 4096, 250_002, 8192),
    # cross-encoder/ms-marco-MiniLM-L6-v2
    "cross-encoder": CrossEncoderShape("bert", 384, 6, 12, 1536, 30_522, 512),
    # cross-encoder/nli-deberta-v3-xsmall
    "nli": CrossEncoderShape("deberta-v2", 384, 12, 6, 1536, 128_100, 512),
}


@contextmanager
def random_checkpoint(
    shape: CrossEncoderShape, sentences: list[str], labels: tuple[str, ...] = ()
) -> Iterator[Path]:
    """A random checkpoint of ``shape`` in a temporary folder, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="groundwire-cost-model-") as folder:
        yield tiny_checkpoint(
            shape.architecture,
            Path(folder),
            sentences,
            hidden_size=shape.hidden_size,
            layers=shape.layers,
            heads=shape.heads,
            intermediate_size=shape.intermediate_size,
            model_vocab_size=shape.vocab_size,
            max_tokens=shape.max_positions,
            initializer_range=0.02,  # the real models' init; the tiny default is wider
            id2label=labels,
        )
