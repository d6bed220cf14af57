"""Cost models: BGE-M3's real architecture and sizes with random weights.

No BGE weights can be had where Groundwire is sized, and capacity measured with MiniLM
says nothing about the default model (XLM-RoBERTa large, 567M parameters, ~2,400 tokens/s
int8 on 16 cores). A cost model has the real model's layers, widths, heads, embedding
table and position range — so the same FLOPs and memory per token — and random weights,
so it measures cost and mechanics, never quality. Its manifest says ``cost_model``; the
embedder refuses to serve it unless ``SERVE_COST_MODEL`` is set (benchmarks only).

The tokenizer is ``tiny``'s Unigram trained on Groundwire's own sentences (600 pieces,
XLM-R's special-token ids), whose ids are all inside the real vocabulary: it splits words
into more pieces than XLM-R's 250k SentencePiece, so a benchmark should count cost per
token (every report carries token counts), not per text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from groundwire_embedder.export.tiny import build_tiny_bge_m3

COST_MODEL_ID = "cost-model:BAAI/bge-m3"


@dataclass(frozen=True)
class EncoderShape:
    """The sizes of an XLM-RoBERTa encoder (its config.json)."""

    hidden_size: int
    layers: int
    heads: int
    intermediate_size: int
    vocab_size: int
    max_tokens: int


BGE_M3 = EncoderShape(
    hidden_size=1024,
    layers=24,
    heads=16,
    intermediate_size=4096,
    vocab_size=250_002,
    max_tokens=8192,
)
"""BAAI/bge-m3's config.json (XLM-RoBERTa large; ColBERT head 1024 wide)."""


def random_bge_m3(out_dir: Path, shape: EncoderShape = BGE_M3, *, seed: int = 0) -> Path:
    """A random checkpoint of ``shape`` with BGE-M3's heads, in FlagEmbedding's layout."""
    return build_tiny_bge_m3(
        out_dir,
        seed=seed,
        hidden_size=shape.hidden_size,
        layers=shape.layers,
        heads=shape.heads,
        intermediate_size=shape.intermediate_size,
        colbert_dim=shape.hidden_size,
        model_vocab_size=shape.vocab_size,
        max_tokens=shape.max_tokens,
    )
