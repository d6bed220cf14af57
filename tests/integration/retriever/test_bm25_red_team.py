"""Issue #31, item 9 (red team): BM25's term statistics must not leak hidden
documents' words. The engine applies BM25's IDF at query time over every chunk of the
shard, visible or not, so 30 hidden documents full of "kestrel" used to flip a
public caller's ranking for "kestrel falcon". Two collections identical in what a
public caller sees, differing only in the hidden documents' words, must now rank that
caller's search identically; a caller that sees everything keeps BM25."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from groundwire_retriever.domain import (
    Chunk,
    ChunkVectors,
    CollectionSpec,
    Fusion,
    SearchPath,
    SearchQuery,
    SearchResult,
)
from groundwire_retriever.store import EdgeStore, QdrantServerStore, VectorStore

NS = uuid.UUID("4b0d7c55-1f8e-4a8b-9d6e-2c3b1a0f9e77")
PUBLIC = ("public",)
PATHS = frozenset({SearchPath.DENSE, SearchPath.BM25})
QUERY = "kestrel falcon"
# what a public caller sees, the same in both collections: A says "kestrel", B "falcon"
VISIBLE = [
    ("a", "kestrel nest on the cliff ledge", (1.0, 0.10, 0.0, 0.0)),
    ("b", "falcon nest on the cliff ledge", (1.0, 0.25, 0.0, 0.0)),
    *[(f"f{i}", f"granite ledge survey note {i}", (0.2, 1.0, 0.1 * i, 0.0)) for i in range(5)],
]


def _rows(hidden_word: str) -> list[tuple[Chunk, ChunkVectors]]:
    rows = [(source, text, vector, ()) for source, text, vector in VISIBLE]
    rows += [
        (
            f"hr-{i:02d}",
            f"{hidden_word} {hidden_word} report {i}",
            (1.0, 0.0, 0.0, 0.0),
            ("group:hr",),
        )
        for i in range(30)
    ]
    return [
        (
            Chunk(
                chunk_id=str(uuid.uuid5(NS, source)),
                source_id=source,
                text=text,
                title=source,
                chunk_index=0,
                content_hash=f"h-{source}-{text}",
                access=access,
            ),
            ChunkVectors(dense=vector),
        )
        for source, text, vector, access in rows
    ]


@pytest.fixture(scope="module", params=["edge", "qdrant"])
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VectorStore]:
    root: Path = tmp_path_factory.mktemp("bm25")
    opened: VectorStore = (
        EdgeStore(root / "edge") if request.param == "edge" else QdrantServerStore(":memory:")
    )
    opened.open()
    for name, word in (("kestrels", "kestrel"), ("ospreys", "osprey")):
        opened.create_collection(CollectionSpec(name=name, dense_dims=4, bm25=True))
        for chunk, vectors in _rows(word):
            opened.publish_source(opened.stage_source(name, chunk.source_id, [(chunk, vectors)]))
    yield opened
    opened.close()


def _search(store: VectorStore, name: str, access: tuple[str, ...] | None) -> SearchResult:
    return store.search(
        name,
        SearchQuery(
            text=QUERY,
            dense=(1.0, 0.0, 0.0, 0.0),
            paths=PATHS,
            fusion=Fusion.WEIGHTED,
            dense_floor=-1.0,
            limit=10,
            access=access,
        ),
    )


def _ranking(result: SearchResult) -> list[tuple[str, float]]:
    return [(h.chunk.source_id, round(h.score, 6)) for h in result.hits]


def test_hidden_documents_words_do_not_move_a_public_callers_ranking(store: VectorStore) -> None:
    kestrels = _search(store, "kestrels", PUBLIC)
    ospreys = _search(store, "ospreys", PUBLIC)
    assert {s for s, _ in _ranking(kestrels)} <= {s for s, _, _ in VISIBLE}  # nothing hidden
    # before the fix: "b" first where the hidden documents say kestrel, "a" elsewhere
    assert _ranking(kestrels) == _ranking(ospreys)
    [bm25] = [p for p in kestrels.paths if p.path is SearchPath.BM25]
    assert bm25.skipped and "cannot see" in bm25.reason


def test_a_caller_that_sees_everything_keeps_bm25(store: VectorStore) -> None:
    result = _search(store, "kestrels", None)
    [bm25] = [p for p in result.paths if p.path is SearchPath.BM25]
    assert not bm25.skipped and bm25.hits > 30  # the hidden documents match too
    hr = _search(store, "kestrels", ("public", "group:hr"))  # sees every document
    [bm25] = [p for p in hr.paths if p.path is SearchPath.BM25]
    assert not bm25.skipped
