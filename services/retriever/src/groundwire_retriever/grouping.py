"""Document-level results: the fused hits grouped by source, one hit per source.

The grouping runs here, on the fused list, rather than in Qdrant
(``query_points_groups``): the ranking is our fusion of up to three per-path queries
(``fusion.py``, weighted by default), and Qdrant groups the points of one query by
that query's own score, so it would choose each document's best chunk by one path's
score, not by the fused one. Qdrant's server-side fusion (a prefetch with RRF or DBSF)
could be grouped, but it has neither our weighted fusion nor its tie-breaking, and
qdrant-edge, the embedded engine, has no grouping at all: grouping the fused list is
the one way both engines answer the same (the congruence test holds them to it). The
cost is bounded: the paths' candidates (at most 3 x ``path_limit``) are fused and
grouped instead of cut at ``limit``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from groundwire_retriever.domain import Hit

MAX_OTHER_HEADINGS = 10
"""Headings listed per document: enough to show where else it matched."""


def heading_of(hit: Hit) -> str:
    """The chunk's heading path as one line ("" when it has none)."""
    return " > ".join(hit.chunk.heading_path)


def group_by_source(hits: Sequence[Hit], limit: int, drop_off: float | None = None) -> list[Hit]:
    """One hit per source, best first: the source's best hit (``hits`` are best first)
    with ``matching_chunks`` and the other matching chunks' distinct headings (not
    the best chunk's own); the
    top ``limit`` sources, cut where a source's score falls under ``drop_off`` x the
    top one (as ``fusion.cut_drop_off`` cuts chunks)."""
    groups: dict[str, list[Hit]] = {}
    for hit in hits:
        groups.setdefault(hit.chunk.source_id, []).append(hit)
    out = []
    for members in list(groups.values())[:limit]:
        best = members[0]
        headings: list[str] = []
        for other in members[1:]:
            heading = heading_of(other)
            # where else the document matched: the best chunk's own section is shown
            if heading in (*headings, heading_of(best), ""):
                continue
            if len(headings) < MAX_OTHER_HEADINGS:
                headings.append(heading)
        out.append(
            dataclasses.replace(best, matching_chunks=len(members), other_headings=tuple(headings))
        )
    if drop_off is None or not out or out[0].score <= 0.0:
        return out
    floor = drop_off * out[0].score
    return [hit for hit in out if hit.score >= floor]
