"""Fusion: merging the ranked lists of a hybrid search's paths into one.

``METHODS`` is the table from each ``Fusion`` to its function. A method sees one
path's scores (best first) and gives each position its gain; a point's fused score is
the sum of its gains over the paths that found it. ``fuse`` runs the query's method
over every path's list, keeps the top ``limit`` and cuts at ``drop_off``. Adding a
method is a member of ``Fusion``, a function and its entry here (docs/recipes/fusion.md).

Nothing here talks to a backend: both engines return plain ranked lists and the
store fuses them here, so the two fuse identically.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from groundwire_retriever.domain import Fusion, SearchPath, SearchQuery

__all__ = ["METHODS", "PATH_ORDER", "FusedHit", "Method", "cut_drop_off", "fuse"]

PATH_ORDER = (SearchPath.DENSE, SearchPath.SPARSE, SearchPath.BM25)
"""The order paths run in and settle ties in."""

Method = Callable[[SearchPath, Sequence[float], SearchQuery], list[float]]
"""``(path, scores best first, query) -> gain of each position``."""


def reciprocal_rank(path: SearchPath, scores: Sequence[float], query: SearchQuery) -> list[float]:
    """RRF: ``1 / (rrf_k + rank)`` with 1-based ranks; the scores do not count."""
    k = query.rrf_k
    return [1.0 / (k + rank) for rank in range(1, len(scores) + 1)]


def weighted_score(path: SearchPath, scores: Sequence[float], query: SearchQuery) -> list[float]:
    """``weight * (score - min) / (max - min)``: a path whose scores are all equal
    normalises them to 1.0; a path without a weight in the query weighs 1.0."""
    weight = query.weights.get(path, 1.0)
    lo = min(scores)
    span = max(scores) - lo
    if span == 0.0:
        return [weight * 1.0] * len(scores)
    return [weight * ((score - lo) / span) for score in scores]


METHODS: Mapping[Fusion, Method] = MappingProxyType(
    {
        Fusion.RRF: reciprocal_rank,
        Fusion.WEIGHTED: weighted_score,
    }
)


@dataclass
class FusedHit:
    """One point's fused score, with its rank and raw score in each path.

    ``point_id`` is the engine's own id object (a ``str`` or ``uuid.UUID``): only
    the hits that survive fusion are ever turned into strings.
    """

    point_id: Hashable
    score: float = 0.0
    ranks: dict[SearchPath, int] = field(default_factory=dict)
    scores: dict[SearchPath, float] = field(default_factory=dict)


def fuse(
    ranked: Mapping[SearchPath, Sequence[tuple[Hashable, float]]], query: SearchQuery
) -> list[FusedHit]:
    """Merge per-path ranked lists ``[(point_id, score), ...]`` (best first) with
    ``query.fusion``; the top ``query.limit``, cut at ``query.drop_off``.

    A path lists each point once: a repeated id keeps its best rank (and only that
    position's gain). Ties break on the best single-path rank, then on the ranks path
    by path (``PATH_ORDER``).

    This runs on every search over up to three lists of ``path_limit`` candidates, so
    it works on plain dicts and builds ``FusedHit`` objects for the top hits only.
    """
    method = METHODS[query.fusion]
    missing = 1 + max((len(hits) for hits in ranked.values()), default=0)  # worse than any rank
    total: dict[Hashable, float] = {}
    best: dict[Hashable, int] = {}
    columns: list[tuple[SearchPath, dict[Hashable, int], dict[Hashable, float]]] = []
    for path in PATH_ORDER:
        hits = ranked.get(path)
        if not hits:
            continue
        gains = method(path, [score for _, score in hits], query)
        ranks: dict[Hashable, int] = {}
        raw: dict[Hashable, float] = {}
        for rank, ((pid, score), gain) in enumerate(zip(hits, gains, strict=True), start=1):
            if pid in ranks:
                continue
            ranks[pid] = rank
            raw[pid] = score
            total[pid] = total.get(pid, 0.0) + gain
            if rank < best.get(pid, missing):
                best[pid] = rank
        columns.append((path, ranks, raw))
    # Ranks per path in a fixed order settle every tie between two points (a path
    # ranks each point once), so the order never depends on point ids, which differ
    # between engines and re-ingests.
    rank_maps = [ranks for _, ranks, _ in columns]
    order = sorted(
        [
            ((-score, best[pid], *[ranks.get(pid, missing) for ranks in rank_maps]), n)
            for n, (pid, score) in enumerate(total.items())
        ]
    )
    pids = list(total)
    keys = [pids[n] for _, n in order[: query.limit]]
    fused = [
        FusedHit(
            pid,
            total[pid],
            {path: ranks[pid] for path, ranks, _ in columns if pid in ranks},
            {path: raw[pid] for path, ranks, raw in columns if pid in ranks},
        )
        for pid in keys
    ]
    return cut_drop_off(fused, query.drop_off)


def cut_drop_off(fused: Sequence[FusedHit], drop_off: float | None) -> list[FusedHit]:
    """Dynamic top-k: keep hits (best first) down to the first whose score falls below
    ``drop_off`` x the top score. ``None`` or a list whose top score is not positive
    keeps everything."""
    if drop_off is None or not fused or fused[0].score <= 0.0:
        return list(fused)
    floor = drop_off * fused[0].score
    kept: list[FusedHit] = []
    for hit in fused:
        if hit.score < floor:
            break
        kept.append(hit)
    return kept
