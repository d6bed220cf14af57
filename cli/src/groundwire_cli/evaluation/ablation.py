"""The ablation: which configurations run, the weight grid of the weighted fusion, and
the evaluation's settings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from groundwire_cli.config import settings_class
from groundwire_cli.evaluation.metrics import DEPTH
from groundwire_core.clients.embedder import EmbedderInfo

WEIGHT_GRID = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
"""Dense weights tried for the weighted fusion on the tune part; lexical paths share
the rest."""
RERANK_DEPTH = 100


@dataclass(frozen=True)
class Configuration:
    """One row of the ablation."""

    name: str
    paths: tuple[str, ...]
    fusion: str = "rrf"
    weights: Mapping[str, float] = field(default_factory=dict)
    rerank: bool = False
    skipped: str = ""
    """Why it was not run (empty when it ran)."""

    @property
    def label(self) -> str:
        if self.fusion == "weighted" and self.weights:
            shown = ", ".join(f"{p} {w:.2f}" for p, w in self.weights.items())
            return f"{self.name} ({shown})"
        return self.name


def ablation(info: EmbedderInfo, *, reranker_reason: str) -> list[Configuration]:
    """The configurations: single paths, the two fusions, and hybrid + rerank.

    ``reranker_reason`` is empty when a reranker model is ready, else why not.
    """
    has_sparse = "sparse" in info.outputs
    lexical = ("sparse", "bm25") if has_sparse else ("bm25",)
    hybrid = ("dense", *lexical)
    no_sparse = (
        f"the embedder's model ({info.model_id or info.profile}) has no learned sparse output"
    )
    return [
        Configuration("bm25", ("bm25",)),
        Configuration("dense", ("dense",)),
        Configuration("sparse", ("sparse",), skipped="" if has_sparse else no_sparse),
        Configuration("hybrid-rrf", hybrid),
        Configuration("hybrid-weighted", hybrid, fusion="weighted"),
        product_default(hybrid),
        Configuration("hybrid-rrf+rerank", hybrid, rerank=True, skipped=reranker_reason),
    ]


def product_default(paths: tuple[str, ...]) -> Configuration:
    """The row of what the product serves: the orchestrator's default FUSION and
    FUSION_WEIGHTS, read from its settings class (not the environment), so the
    measured default is the shipped one. Skipped when the orchestrator is not installed."""
    settings = settings_class("orchestrator")
    if settings is None:
        return Configuration("product-default", paths, skipped="the orchestrator is not installed")
    choice = settings.model_construct().fusion_choice  # the class defaults, no environment
    return Configuration("product-default", paths, fusion=choice.method, weights=choice.weights)


def weight_candidates(paths: Sequence[str]) -> list[dict[str, float]]:
    """The weight grid: the dense weight varies, the lexical paths share the rest."""
    lexical = [p for p in paths if p != "dense"]
    grid: list[dict[str, float]] = []
    for dense in WEIGHT_GRID:
        weights = {"dense": dense}
        weights.update({p: round((1.0 - dense) / len(lexical), 4) for p in lexical})
        grid.append(weights)
    return grid


@dataclass(frozen=True)
class EvalSettings:
    path_limit: int = 100
    """Candidates per path (>= 100 so that Recall@100 means something)."""
    rrf_k: int = 60
    dense_floor: float = 0.0
    """Cosine floor of the dense path. The service's default (0.3) guards chat
    answers against junk; a ranking metric wants every path's full candidate list."""
    dev_fraction: float = 0.2
    depth: int = DEPTH
    rerank_depth: int = RERANK_DEPTH
    chunk_max_tokens: int | None = None
    """Passed to the retriever (GROUNDWIRE_RETRIEVER_CHUNK_MAX_TOKENS); None keeps its
    default."""
    weights: Mapping[str, float] | None = None
    """Fixed weights for the weighted fusion; None chooses them on the tune part."""
