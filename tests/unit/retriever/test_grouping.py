"""Grouping fused hits by source: the best hit of each source, in order, with how many
of its chunks matched and the other chunks' distinct headings (not its own); limit and drop-off
count sources."""

from __future__ import annotations

import pytest

from groundwire.retriever.v1 import retriever_pb2
from groundwire_core.errors import InvalidInput
from groundwire_retriever import convert
from groundwire_retriever.domain import Chunk, Hit
from groundwire_retriever.grouping import group_by_source


def hit(chunk_id: str, source: str, score: float, *heading: str) -> Hit:
    chunk = Chunk(chunk_id=chunk_id, source_id=source, text="t", heading_path=heading)
    return Hit(chunk=chunk, score=score, path_ranks={}, path_scores={})


HITS = [
    hit("a1", "a.md", 0.9, "Guide", "Install"),
    hit("b1", "b.md", 0.8, "FAQ"),
    hit("a2", "a.md", 0.7, "Guide", "Upgrade"),
    hit("a3", "a.md", 0.6, "Guide", "Install"),  # the best chunk's own section
    hit("a5", "a.md", 0.5, "Guide", "Upgrade"),  # a heading already listed
    hit("c1", "c.md", 0.3),
    hit("a4", "a.md", 0.2),  # no heading
]


def test_one_hit_per_source_best_first_with_its_matches() -> None:
    grouped = group_by_source(HITS, limit=10)
    assert [(h.chunk.chunk_id, h.score) for h in grouped] == [
        ("a1", 0.9),
        ("b1", 0.8),
        ("c1", 0.3),
    ]
    assert [h.matching_chunks for h in grouped] == [5, 1, 1]
    assert grouped[0].other_headings == ("Guide > Upgrade",)
    assert grouped[1].other_headings == () and grouped[2].other_headings == ()


def test_limit_and_drop_off_count_sources() -> None:
    assert [h.chunk.source_id for h in group_by_source(HITS, limit=2)] == ["a.md", "b.md"]
    # 0.5 x 0.9 = 0.45: c.md's 0.3 is cut, though a chunk of a.md scored lower
    cut = group_by_source(HITS, limit=10, drop_off=0.5)
    assert [h.chunk.source_id for h in cut] == ["a.md", "b.md"]
    assert group_by_source([], limit=5) == []


def test_the_wire_carries_the_grouping_and_the_groups() -> None:
    def query(group_by: int) -> retriever_pb2.SearchRequest:
        return retriever_pb2.SearchRequest(collection="c", text="q", group_by=group_by)

    assert not convert.query_from_proto(query(retriever_pb2.GROUP_BY_UNSPECIFIED)).group_by_source
    assert not convert.query_from_proto(query(retriever_pb2.GROUP_BY_CHUNK)).group_by_source
    assert convert.query_from_proto(query(retriever_pb2.GROUP_BY_DOCUMENT)).group_by_source
    with pytest.raises(InvalidInput, match="unknown group_by 9"):
        convert.query_from_proto(query(9))
    [book, _, _] = group_by_source(HITS, limit=10)
    msg = convert.hit_to_proto(book)
    assert (msg.matching_chunks, list(msg.other_headings)) == (5, ["Guide > Upgrade"])
    assert convert.hit_to_proto(HITS[1]).matching_chunks == 0
