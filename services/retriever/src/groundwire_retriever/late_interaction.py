"""Late interaction: MaxSim rescoring of the fused candidates with ColBERT vectors.

A model with multi-vectors (BGE-M3) gives one vector per token. For collections
indexed with one while KEEP_MULTI_VECTORS is on, ingest stores them as a Qdrant
multivector (``MULTI_VECTOR``, MAX_SIM comparator, no HNSW graph: it is never searched,
only read back). A search that asks for it (``SearchQuery.late_interaction_depth``)
rescores its top fused candidates by

    MaxSim(q, d) = sum over query tokens i of max over document tokens j of cos(q_i, d_j)

and reorders them by it; candidates past the depth keep their fused order after them.
It is the cheaper precision step between fusion and the cross-encoder: the document
side was computed at ingest, so a query costs one read of ``depth`` points' vectors and
one matrix product per candidate. Its time is reported (``LateInteractionReport.ms``);
it has not been measured at scale against the cross-encoder.

The score is computed here with numpy on vectors fetched by id (``Engine.multi_vectors``)
rather than by a Qdrant multivector query restricted to the candidate ids: the same code
on both engines, and one read instead of a second search.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from groundwire_core.errors import InvalidInput
from groundwire_retriever.domain import CollectionSpec, LateInteractionReport, SearchQuery
from groundwire_retriever.fusion import FusedHit

if TYPE_CHECKING:  # the store imports this module
    from groundwire_retriever.store.engine import Engine

__all__ = ["MAX_DEPTH", "max_sim", "multi_values", "rerank", "rescore", "unit_rows", "widened"]

MAX_DEPTH = 1000
"""The most candidates one search may rescore (each is a vector read)."""


def _matrix(rows: Sequence[Sequence[float]], what: str) -> np.ndarray:
    """``rows`` as a float32 matrix. Raises InvalidInput for an empty, ragged or
    non-finite matrix."""
    try:
        matrix = np.asarray(rows, dtype=np.float32)
    except ValueError:
        raise InvalidInput(f"{what} is ragged (vectors of different lengths)") from None
    if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] == 0:
        raise InvalidInput(f"{what} must be a non-empty list of vectors")
    if not np.isfinite(matrix).all():
        raise InvalidInput(f"{what} has a non-finite value")
    return matrix


def unit_rows(rows: Sequence[Sequence[float]], what: str) -> np.ndarray:
    """``rows`` as a float32 matrix with unit-length rows (the engines store the
    multivector under cosine distance, i.e. normalised). Raises InvalidInput for an
    empty, ragged or non-finite matrix."""
    matrix = _matrix(rows, what)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0.0, norms, 1.0)


def max_sim(query: np.ndarray, document: np.ndarray) -> float:
    """ColBERT's MaxSim of two unit-row matrices (see the module docstring)."""
    return float((query @ document.T).max(axis=1).sum())


def rerank(
    candidates: Sequence[FusedHit],
    query: np.ndarray,
    stored: Mapping[Hashable, Sequence[Sequence[float]]],
    depth: int,
) -> tuple[list[FusedHit], dict[Hashable, float]]:
    """``candidates`` (best first) with the top ``depth`` reordered by MaxSim against
    their ``stored`` multi-vectors (by point id), and the MaxSim score of each rescored
    one. A head candidate without stored vectors (written before the collection kept
    them) follows the scored ones; the order is stable on equal scores."""
    head, tail = list(candidates[:depth]), list(candidates[depth:])
    scores: dict[Hashable, float] = {}
    for candidate in head:
        vectors = stored.get(candidate.point_id)
        if vectors:
            matrix = unit_rows(vectors, "a stored multi-vector")
            scores[candidate.point_id] = max_sim(query, matrix)
    scored = sorted(
        (c for c in head if c.point_id in scores), key=lambda c: scores[c.point_id], reverse=True
    )
    unscored = [c for c in head if c.point_id not in scores]
    return [*scored, *unscored, *tail], scores


def multi_values(multi: Sequence[Sequence[float]], dims: int, what: str) -> list[list[float]]:
    """A chunk's multi-vector as the engines store it. Raises InvalidInput for a
    collection without multi-vectors (``dims`` 0), or a wrong width."""
    if not dims:
        raise InvalidInput(f"{what} is given but the collection keeps no multi-vectors")
    matrix = _matrix(multi, what)  # checked only: the engines normalise what is stored
    if matrix.shape[1] != dims:
        raise InvalidInput(f"{what} has {matrix.shape[1]} dimensions, expected {dims}")
    # plain floats, by map (half a million per 512-token chunk, on every ingest)
    return [list(map(float, row)) for row in multi]


def widened(query: SearchQuery, fused: SearchQuery) -> SearchQuery:
    """``fused`` (the query fusion runs) keeping at least the rescoring depth, so a
    depth over ``limit`` has candidates to promote; ``rescore`` cuts back to ``limit``.
    Raises InvalidInput for a depth out of range."""
    depth = query.late_interaction_depth
    if not 0 <= depth <= MAX_DEPTH:
        raise InvalidInput(f"late_interaction_depth must be between 0 and {MAX_DEPTH}")
    if depth <= fused.limit:
        return fused
    return replace(fused, limit=depth)


def rescore(
    engine: Engine,
    generation: str,
    spec: CollectionSpec,
    fused: list[FusedHit],
    query: SearchQuery,
) -> tuple[list[FusedHit], LateInteractionReport | None]:
    """``fused`` with its head reordered by MaxSim (see ``rerank``) and cut back to
    ``query.limit`` (unless grouped by source: grouping counts sources), with the
    report; ``fused`` unchanged and None when the query did not ask for it. Skipped,
    with the reason, when the collection or the query has no multi-vectors. Raises
    InvalidInput for a malformed query multi-vector, the engine's errors."""
    depth = query.late_interaction_depth
    if not depth:
        return fused, None
    keep = len(fused) if query.group_by_source else query.limit
    reason = ""
    if not spec.multi_vector_dims:
        reason = (
            f"collection {spec.name!r} keeps no multi-vectors (its model has none, or "
            "KEEP_MULTI_VECTORS was off when it was indexed)"
        )
    elif not query.multi:
        reason = "the query has no multi-vector"
    if reason:
        return fused[:keep], LateInteractionReport(0, 0.0, skipped=True, reason=reason)
    started = time.perf_counter()
    matrix = unit_rows(query.multi or (), "the query's multi-vector")
    if matrix.shape[1] != spec.multi_vector_dims:
        raise InvalidInput(
            f"the query's multi-vector has {matrix.shape[1]} dimensions, "
            f"expected {spec.multi_vector_dims}"
        )
    head = fused[:depth]
    stored = engine.multi_vectors(generation, [f.point_id for f in head]) if head else {}
    order, scores = rerank(fused, matrix, stored, depth)
    ms = (time.perf_counter() - started) * 1000.0
    return order[:keep], LateInteractionReport(rescored=len(scores), ms=ms)
