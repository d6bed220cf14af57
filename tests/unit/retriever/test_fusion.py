"""``fuse`` against a direct transcription of its documented rules.

The production ``fuse`` is written for speed (plain dicts, objects for the top hits
only); the reference below is the obvious per-point version. Random lists with
shared points, duplicate ids within a path and tied scores must fuse identically.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Hashable, Mapping, Sequence

import pytest

from groundwire_retriever.domain import Fusion, SearchPath, SearchQuery
from groundwire_retriever.fusion import METHODS, PATH_ORDER, fuse

MISSING = 10**9  # a rank worse than any: a path that did not find the point


def reference(
    ranked: Mapping[SearchPath, Sequence[tuple[Hashable, float]]],
    fusion: Fusion,
    rrf_k: int,
    weights: Mapping[SearchPath, float],
    limit: int,
) -> list[tuple[Hashable, float, dict[SearchPath, int], dict[SearchPath, float]]]:
    points: dict[Hashable, list[object]] = {}
    for path in PATH_ORDER:
        hits = ranked.get(path) or []
        if not hits:
            continue
        lo = min(s for _, s in hits)
        hi = max(s for _, s in hits)
        for rank, (pid, score) in enumerate(hits, start=1):
            entry = points.setdefault(pid, [0.0, {}, {}])
            ranks, scores = entry[1], entry[2]
            assert isinstance(ranks, dict) and isinstance(scores, dict)
            if path in ranks:
                continue
            ranks[path] = rank
            scores[path] = score
            if fusion is Fusion.RRF:
                entry[0] = float(entry[0]) + 1.0 / (rrf_k + rank)  # type: ignore[arg-type]
            else:
                norm = 1.0 if hi == lo else (score - lo) / (hi - lo)
                entry[0] = float(entry[0]) + weights.get(path, 1.0) * norm  # type: ignore[arg-type]

    def order(item: tuple[Hashable, list[object]]) -> tuple[float, ...]:
        total, ranks = item[1][0], item[1][1]
        assert isinstance(total, float) and isinstance(ranks, dict)
        return (-total, min(ranks.values()), *(ranks.get(p, MISSING) for p in PATH_ORDER))

    ordered = sorted(points.items(), key=order)[:limit]
    return [(pid, e[0], e[1], e[2]) for pid, e in ordered]  # type: ignore[misc]


def _lists(rng: random.Random) -> dict[SearchPath, list[tuple[Hashable, float]]]:
    pool: list[Hashable] = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(60)]
    ranked: dict[SearchPath, list[tuple[Hashable, float]]] = {}
    for path in rng.sample(list(SearchPath), rng.randint(1, 3)):
        n = rng.randint(0, 40)
        # coarse scores make ties common; a duplicate id now and then
        scores = sorted((round(rng.random(), 1) for _ in range(n)), reverse=True)
        ranked[path] = [(rng.choice(pool), s) for s in scores]
    return ranked


@pytest.mark.parametrize("fusion", [Fusion.RRF, Fusion.WEIGHTED])
def test_fuse_matches_the_reference(fusion: Fusion) -> None:
    rng = random.Random(11)
    for _ in range(300):
        ranked = _lists(rng)
        weights = {p: rng.choice([0.5, 1.0, 2.0]) for p in SearchPath if rng.random() < 0.5}
        limit = rng.randint(1, 50)
        got = fuse(ranked, SearchQuery(fusion=fusion, rrf_k=60, weights=weights, limit=limit))
        want = reference(ranked, fusion, 60, weights, limit)
        assert [(h.point_id, h.ranks, h.scores) for h in got] == [
            (pid, ranks, scores) for pid, _, ranks, scores in want
        ]
        assert [h.score for h in got] == pytest.approx([total for _, total, _, _ in want])


def test_rrf_by_hand() -> None:
    ranked: dict[SearchPath, Sequence[tuple[Hashable, float]]] = {
        SearchPath.DENSE: [("a", 0.9), ("b", 0.8), ("c", 0.7)],
        SearchPath.BM25: [("c", 9.0), ("b", 5.0)],
    }
    got = fuse(ranked, SearchQuery(fusion=Fusion.RRF, rrf_k=60, limit=10))
    # c = 1/63 + 1/61 > b = 1/62 + 1/62 > a = 1/61
    assert [h.point_id for h in got] == ["c", "b", "a"]
    assert got[0].ranks == {SearchPath.DENSE: 3, SearchPath.BM25: 1}
    assert got[0].scores == {SearchPath.DENSE: 0.7, SearchPath.BM25: 9.0}
    assert got[2].score == pytest.approx(1 / 61)


def test_every_fusion_has_a_method() -> None:
    assert set(METHODS) == set(Fusion)


def test_weighted_by_hand() -> None:
    ranked: dict[SearchPath, Sequence[tuple[Hashable, float]]] = {
        SearchPath.DENSE: [("a", 0.9), ("b", 0.5), ("c", 0.1)],
        SearchPath.BM25: [("c", 12.0), ("b", 2.0)],
    }
    query = SearchQuery(fusion=Fusion.WEIGHTED, weights={SearchPath.DENSE: 0.4}, limit=10)
    got = fuse(ranked, query)
    # dense normalised a 1, b 0.5, c 0 (x 0.4); bm25 (weight 1.0 by default) c 1, b 0
    assert [(h.point_id, round(h.score, 6)) for h in got] == [("c", 1.0), ("a", 0.4), ("b", 0.2)]


def test_drop_off_cuts_the_fused_list() -> None:
    ranked: dict[SearchPath, Sequence[tuple[Hashable, float]]] = {
        SearchPath.DENSE: [("a", 1.0), ("b", 0.8), ("c", 0.2), ("d", 0.0)],
    }
    query = SearchQuery(fusion=Fusion.WEIGHTED, limit=10, drop_off=0.5)
    # normalised scores 1.0, 0.8, 0.2, 0.0: c is under half the top score
    assert [h.point_id for h in fuse(ranked, query)] == ["a", "b"]
    assert len(fuse(ranked, SearchQuery(fusion=Fusion.WEIGHTED, limit=3))) == 3
