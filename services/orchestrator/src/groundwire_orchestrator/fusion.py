"""Which fusion the retrieval stage asks the retriever for: the configured one
(settings ``FUSION`` and ``FUSION_WEIGHTS``) or a search request's own.

A method is named after the retriever's ``Fusion`` enum ("rrf" for ``FUSION_RRF``,
"weighted" for ``FUSION_WEIGHTED``): the methods are the retriever's, so a method
added there needs no change here. Weights are per path name; the retriever uses them
with the methods that weigh paths (weighted) and gives a path left out 1.0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from groundwire.retriever.v1 import retriever_pb2

__all__ = [
    "AS_CONFIGURED",
    "DEFAULT",
    "METHODS",
    "PATHS",
    "FusionChoice",
    "check_method",
    "check_weights",
    "format_weights",
    "parse_weights",
]

METHODS: tuple[str, ...] = tuple(
    name.removeprefix("FUSION_").lower()
    for name, value in retriever_pb2.Fusion.items()
    if value != retriever_pb2.FUSION_UNSPECIFIED
)
PATHS = ("dense", "sparse", "bm25")


@dataclass(frozen=True)
class FusionChoice:
    """A fusion method and its per-path weights."""

    method: str = ""
    """One of ``METHODS``; "" = the configured one."""
    weights: Mapping[str, float] = field(default_factory=dict)
    """Weight per path name; empty = the configured weights."""

    def over(self, configured: FusionChoice) -> FusionChoice:
        """This choice, with what it leaves unset taken from ``configured``."""
        return FusionChoice(
            self.method or configured.method, dict(self.weights) or dict(configured.weights)
        )


DEFAULT = FusionChoice("weighted", {"dense": 0.4, "sparse": 0.3, "bm25": 0.6})
"""The product's default (the defaults of settings FUSION and FUSION_WEIGHTS, and the
evaluation's ``default`` row). Weighted dense 0.4 / bm25 0.6 scored best on SciFact's
dev claims with MiniLM (nDCG@10 0.754; RRF 0.729; evals/README.md), with the weights
chosen on the tune claims. Sparse (BGE-M3 only) has no measurement here: 0.3 gives it
half of BM25's share."""
AS_CONFIGURED = FusionChoice()
"""A request that leaves the fusion to the settings."""


def check_method(name: str) -> str:
    """``name`` when it is a fusion method. Raises ValueError naming the methods."""
    if name not in METHODS:
        raise ValueError(f"unknown fusion method {name!r}; use one of {', '.join(METHODS)}")
    return name


def check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """A copy in ``PATHS`` order (a protobuf map has none, and reports should not
    change with it); raises ValueError for an unknown path or a weight that is
    negative or not finite."""
    for path, weight in weights.items():
        if path not in PATHS:
            raise ValueError(f"unknown path {path!r} in fusion weights; use {', '.join(PATHS)}")
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"the fusion weight of {path} must be a number >= 0, got {weight}")
    return {path: float(weights[path]) for path in PATHS if path in weights}


def parse_weights(text: str) -> dict[str, float]:
    """``"dense=0.4,bm25=0.6"`` as a dict ("" is none). Raises ValueError for a
    malformed pair, a repeated or unknown path, or a bad weight."""
    weights: dict[str, float] = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        path, sep, number = (part.strip() for part in pair.partition("="))
        if not sep:
            raise ValueError(f"fusion weight {pair!r} is not path=weight")
        if path in weights:
            raise ValueError(f"path {path!r} has two fusion weights")
        try:
            weights[path] = float(number)
        except ValueError:
            raise ValueError(f"fusion weight {pair!r} is not a number") from None
    return check_weights(weights)


def format_weights(weights: Mapping[str, float]) -> str:
    """The text ``parse_weights`` reads: ``"dense=0.4,bm25=0.6"``."""
    return ",".join(f"{path}={weight:g}" for path, weight in weights.items())
