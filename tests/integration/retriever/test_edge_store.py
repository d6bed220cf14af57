"""EdgeStore on the real embedded Qdrant engine (qdrant-edge), on a temporary folder."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from groundwire_core.errors import AlreadyExists, InvalidInput, NotFound, Unavailable
from groundwire_retriever.domain import (
    Chunk,
    ChunkVectors,
    CollectionSpec,
    FieldFilter,
    Fusion,
    SearchPath,
    SearchQuery,
    SparseVec,
)
from groundwire_retriever.store import EdgeStore, VectorStore

NS = uuid.UUID("6f0c4f5e-0000-4000-8000-000000000000")


def make_chunk(source_id: str, index: int, text: str, **fields: Any) -> Chunk:
    chunk_id = str(uuid.uuid5(NS, f"{source_id}/{index}"))
    return Chunk(
        chunk_id=chunk_id,
        source_id=source_id,
        text=text,
        chunk_index=index,
        content_hash=f"h-{source_id}-{index}",
        **fields,
    )


def dense(*values: float) -> ChunkVectors:
    return ChunkVectors(dense=tuple(values))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EdgeStore]:
    s = EdgeStore(tmp_path / "data")
    s.open()
    yield s
    s.close()


def test_is_a_vector_store(store: EdgeStore) -> None:
    vs: VectorStore = store
    assert vs.list_collections() == []


def test_constructing_does_not_touch_disk(tmp_path: Path) -> None:
    root = tmp_path / "data"
    s = EdgeStore(root)
    assert not root.exists()
    with pytest.raises(Unavailable):
        s.list_collections()
    s.open()
    assert (root / "collections").is_dir()
    s.close()
    with pytest.raises(Unavailable):
        s.describe("docs")


def test_create_list_describe_drop(store: EdgeStore) -> None:
    docs = CollectionSpec(name="docs", dense_dims=2, embedder_model="mini")
    notes = CollectionSpec(name="notes", dense_dims=3, learned_sparse=True, bm25=False)
    store.create_collection(notes)
    store.create_collection(docs)
    assert store.list_collections() == [docs, notes]

    with pytest.raises(AlreadyExists):
        store.create_collection(docs)

    store.upsert(
        "docs",
        [
            (make_chunk("a", 0, "one"), dense(1, 0)),
            (make_chunk("a", 1, "two"), dense(0, 1)),
            (make_chunk("b", 0, "three"), dense(1, 1)),
        ],
    )
    stats = store.describe("docs")
    assert (stats.spec, stats.chunks, stats.sources) == (docs, 3, 2)
    assert store.describe("notes").chunks == 0
    assert store.describe("notes").sources == 0

    store.drop_collection("docs")
    assert store.list_collections() == [notes]
    with pytest.raises(NotFound):
        store.describe("docs")
    assert not (store.root / "collections" / "docs").exists()
    # the name is free again, and the new collection starts empty
    store.create_collection(docs)
    assert store.describe("docs").chunks == 0


def test_reopen_keeps_collections_and_points(tmp_path: Path) -> None:
    root = tmp_path / "data"
    spec = CollectionSpec(
        name="kb",
        dense_dims=2,
        learned_sparse=True,
        filterable=("source_id", "team"),
        embedder_model="bge-m3",
    )
    chunk = make_chunk("guide", 0, "Restart the router", title="Router", metadata={"team": "net"})
    first = EdgeStore(root)
    first.open()
    first.create_collection(spec)
    first.upsert("kb", [(chunk, ChunkVectors(dense=(1.0, 0.0), sparse=SparseVec((7,), (0.5,))))])
    first.close()

    second = EdgeStore(root)
    second.open()
    try:
        assert second.list_collections() == [spec]
        assert second.describe("kb").chunks == 1
        result = second.search(
            "kb",
            SearchQuery(text="router", dense=(1.0, 0.0), sparse=SparseVec((7,), (1.0,))),
        )
        assert [h.chunk for h in result.hits] == [chunk]
        assert set(result.hits[0].path_ranks) == set(SearchPath)
    finally:
        second.close()


def _engine_config(root: Path, collection: str) -> dict[str, Any]:
    """The configuration the engine recorded for the collection's current shard."""
    (shard,) = (root / "collections" / collection).glob("shard-*/edge_config.json")
    config: dict[str, Any] = json.loads(shard.read_text())
    return config


def test_search_pool_and_memory_placement_follow_the_settings(tmp_path: Path) -> None:
    root = tmp_path / "data"
    spec = CollectionSpec(name="kb", dense_dims=2)
    first = EdgeStore(root, search_threads=1)
    first.open()
    first.create_collection(spec)
    first.close()
    config = _engine_config(root, "kb")
    assert config["max_search_threads"] == 1
    assert config["payload_memory"] == config["id_tracker_memory"] == "cached"

    # reopening applies this run's setting to a shard made with another one
    second = EdgeStore(root, search_threads=3)
    second.open()
    try:
        assert _engine_config(root, "kb")["max_search_threads"] == 3
        second.upsert("kb", [(make_chunk("a", 0, "router"), ChunkVectors(dense=(1.0, 0.0)))])
        assert second.search("kb", SearchQuery(text="router", dense=(1.0, 0.0))).hits
    finally:
        second.close()


def test_dense_search_ranks_nearest_first(store: EdgeStore) -> None:
    store.create_collection(CollectionSpec(name="c", dense_dims=3))
    near, mid, far = (make_chunk("s", i, t) for i, t in enumerate(["near", "mid", "far"]))
    store.upsert("c", [(far, dense(0, 0, 1)), (near, dense(1, 0.1, 0)), (mid, dense(1, 1, 0))])
    result = store.search(
        "c", SearchQuery(dense=(1.0, 0.0, 0.0), paths=frozenset({SearchPath.DENSE}))
    )
    assert [h.chunk.text for h in result.hits] == ["near", "mid"]  # far: cosine 0 < floor
    assert result.hits[0].path_scores[SearchPath.DENSE] == pytest.approx(0.995, abs=1e-3)
    assert result.hits[0].path_ranks == {SearchPath.DENSE: 1}
    [report] = result.paths
    assert (report.path, report.hits, report.skipped) == (SearchPath.DENSE, 2, False)
    assert report.ms > 0


def test_bm25_stems_and_ignores_stop_words(store: EdgeStore) -> None:
    store.create_collection(CollectionSpec(name="c", dense_dims=2))
    runner = make_chunk("s", 0, "The dog runs along the beach every morning")
    stop = make_chunk("s", 1, "the the the of and a an is it the")
    titled = make_chunk("s", 2, "Press the green button.", title="Kettle", heading_path=("Usage",))
    store.upsert("c", [(runner, dense(1, 0)), (stop, dense(0, 1)), (titled, dense(1, 1))])
    bm25 = frozenset({SearchPath.BM25})

    result = store.search("c", SearchQuery(text="running", paths=bm25))
    assert [h.chunk.chunk_id for h in result.hits] == [runner.chunk_id]

    # stop words in the query match nothing, even the chunk made of them
    result = store.search("c", SearchQuery(text="the dog is", paths=bm25))
    assert [h.chunk.chunk_id for h in result.hits] == [runner.chunk_id]

    # a query of stop words only: the path is skipped, not an error
    result = store.search("c", SearchQuery(text="the of and", paths=bm25))
    assert result.hits == ()
    [report] = result.paths
    assert report.skipped and "stop words" in report.reason

    # title and heading path are indexed in front of the text
    for word in ("kettles", "usage"):
        result = store.search("c", SearchQuery(text=word, paths=bm25))
        assert [h.chunk.chunk_id for h in result.hits] == [titled.chunk_id]


def _hybrid_fixture(store: EdgeStore) -> tuple[Chunk, Chunk, Chunk]:
    store.create_collection(CollectionSpec(name="c", dense_dims=2))
    a = make_chunk("s", 0, "alpha")
    b = make_chunk("s", 1, "bravo kiwi")
    c = make_chunk("s", 2, "kiwi kiwi kiwi charlie")
    # cosine to (1, 0): a 1.0, b 0.8, c 0.6 -> dense ranks a, b, c
    store.upsert("c", [(a, dense(1, 0)), (b, dense(0.8, 0.6)), (c, dense(0.6, 0.8))])
    return a, b, c


def test_hybrid_rrf_matches_hand_computation(store: EdgeStore) -> None:
    a, b, c = _hybrid_fixture(store)
    query = SearchQuery(
        text="kiwi", dense=(1.0, 0.0), paths=frozenset({SearchPath.DENSE, SearchPath.BM25})
    )
    result = store.search("c", query)
    by_id = {h.chunk.chunk_id: h for h in result.hits}
    assert by_id[a.chunk_id].path_ranks == {SearchPath.DENSE: 1}
    assert by_id[b.chunk_id].path_ranks == {SearchPath.DENSE: 2, SearchPath.BM25: 2}
    assert by_id[c.chunk_id].path_ranks == {SearchPath.DENSE: 3, SearchPath.BM25: 1}
    # RRF, k=60: c = 1/63 + 1/61 > b = 1/62 + 1/62 > a = 1/61
    expected = {
        c.chunk_id: 1 / 63 + 1 / 61,
        b.chunk_id: 1 / 62 + 1 / 62,
        a.chunk_id: 1 / 61,
    }
    assert [h.chunk.chunk_id for h in result.hits] == [c.chunk_id, b.chunk_id, a.chunk_id]
    for hit in result.hits:
        assert hit.score == pytest.approx(expected[hit.chunk.chunk_id], rel=1e-12)
    assert [(r.path, r.hits, r.skipped) for r in result.paths] == [
        (SearchPath.DENSE, 3, False),
        (SearchPath.BM25, 2, False),
    ]

    # limit keeps the best
    top1 = store.search("c", SearchQuery(text="kiwi", dense=(1.0, 0.0), limit=1))
    assert [h.chunk.chunk_id for h in top1.hits] == [c.chunk_id]


def test_hybrid_weighted_fusion(store: EdgeStore) -> None:
    a, b, c = _hybrid_fixture(store)
    query = SearchQuery(
        text="kiwi",
        dense=(1.0, 0.0),
        fusion=Fusion.WEIGHTED,
        weights={SearchPath.BM25: 0.1},  # dense keeps 1.0
    )
    result = store.search("c", query)
    # min-max per path: dense 1.0 / 0.8 / 0.6 -> a 1, b 0.5, c 0; bm25 -> c 1, b 0
    expected = {a.chunk_id: 1.0, b.chunk_id: 0.5, c.chunk_id: 0.1}
    assert [h.chunk.chunk_id for h in result.hits] == [a.chunk_id, b.chunk_id, c.chunk_id]
    for hit in result.hits:
        assert hit.score == pytest.approx(expected[hit.chunk.chunk_id], abs=1e-5)


def test_filters_restrict_every_path(store: EdgeStore) -> None:
    store.create_collection(
        CollectionSpec(
            name="c",
            dense_dims=2,
            learned_sparse=True,
            filterable=("source_id", "doc_type", "team"),
        )
    )
    rows = []
    for i, (source, team) in enumerate(
        [("s1", "red"), ("s1", "blue"), ("s2", "red"), ("s2", "blue")]
    ):
        chunk = make_chunk(
            source, i, "shared words about kiwi", doc_type="faq", metadata={"team": team}
        )
        rows.append(
            (chunk, ChunkVectors(dense=(1.0, 0.1 * i), sparse=SparseVec((1, 2), (1.0, 0.5))))
        )
    store.upsert("c", rows)
    everything = SearchQuery(text="kiwi", dense=(1.0, 0.0), sparse=SparseVec((1,), (1.0,)))

    result = store.search("c", everything)
    assert len(result.hits) == 4
    assert [r.hits for r in result.paths] == [4, 4, 4]

    only_s2 = SearchQuery(
        text="kiwi",
        dense=(1.0, 0.0),
        sparse=SparseVec((1,), (1.0,)),
        filters=(FieldFilter("source_id", ("s2",)),),
    )
    result = store.search("c", only_s2)
    assert {h.chunk.source_id for h in result.hits} == {"s2"}
    assert [(r.path, r.hits) for r in result.paths] == [
        (SearchPath.DENSE, 2),
        (SearchPath.SPARSE, 2),
        (SearchPath.BM25, 2),
    ]
    for path in SearchPath:
        single = store.search(
            "c",
            SearchQuery(
                text="kiwi",
                dense=(1.0, 0.0),
                sparse=SparseVec((1,), (1.0,)),
                paths=frozenset({path}),
                filters=(FieldFilter("source_id", ("s2",)), FieldFilter("team", ("red",))),
            ),
        )
        assert [(h.chunk.source_id, h.chunk.metadata["team"]) for h in single.hits] == [
            ("s2", "red")
        ]

    either = SearchQuery(dense=(1.0, 0.0), filters=(FieldFilter("team", ("red", "blue")),))
    assert len(store.search("c", either).hits) == 4

    with pytest.raises(InvalidInput, match="source_id, doc_type, team"):
        store.search("c", SearchQuery(text="kiwi", filters=(FieldFilter("url", ("x",)),)))
    with pytest.raises(InvalidInput, match="no values"):
        store.search("c", SearchQuery(text="kiwi", filters=(FieldFilter("team", ()),)))


def test_dense_floor_drops_low_cosine(store: EdgeStore) -> None:
    store.create_collection(CollectionSpec(name="c", dense_dims=2))
    close = make_chunk("s", 0, "close")
    low = make_chunk("s", 1, "low")  # cosine to (1, 0) = 0.25 / |(0.25, 0.97)| ~ 0.25
    store.upsert("c", [(close, dense(1, 0.2)), (low, dense(0.25, 0.97))])
    dense_only = frozenset({SearchPath.DENSE})

    result = store.search("c", SearchQuery(dense=(1.0, 0.0), paths=dense_only))
    assert [h.chunk.text for h in result.hits] == ["close"]
    assert result.paths[0].hits == 1

    result = store.search("c", SearchQuery(dense=(1.0, 0.0), paths=dense_only, dense_floor=0.2))
    assert [h.chunk.text for h in result.hits] == ["close", "low"]


def test_sparse_path_skipped_and_reported(store: EdgeStore) -> None:
    store.create_collection(CollectionSpec(name="with", dense_dims=2, learned_sparse=True))
    store.create_collection(CollectionSpec(name="without", dense_dims=2))
    chunk = make_chunk("s", 0, "kiwi")
    store.upsert("with", [(chunk, ChunkVectors(dense=(1.0, 0.0), sparse=SparseVec((3,), (1.0,))))])
    store.upsert("without", [(chunk, dense(1, 0))])

    result = store.search("with", SearchQuery(text="kiwi", dense=(1.0, 0.0)))
    reports = {r.path: r for r in result.paths}
    assert reports[SearchPath.SPARSE].skipped
    assert reports[SearchPath.SPARSE].reason == "the query has no sparse vector"
    assert not reports[SearchPath.DENSE].skipped and not reports[SearchPath.BM25].skipped
    assert [h.chunk.chunk_id for h in result.hits] == [chunk.chunk_id]
    assert set(result.hits[0].path_ranks) == {SearchPath.DENSE, SearchPath.BM25}

    result = store.search("with", SearchQuery(sparse=SparseVec((3,), (2.0,))))
    reports = {r.path: r for r in result.paths}
    assert reports[SearchPath.SPARSE].hits == 1
    assert result.hits[0].path_scores[SearchPath.SPARSE] == pytest.approx(2.0)
    assert reports[SearchPath.DENSE].skipped and reports[SearchPath.BM25].skipped

    result = store.search("without", SearchQuery(dense=(1.0, 0.0), sparse=SparseVec((3,), (1.0,))))
    reports = {r.path: r for r in result.paths}
    assert reports[SearchPath.SPARSE].skipped
    assert "no learned sparse" in reports[SearchPath.SPARSE].reason
    assert len(result.hits) == 1

    with pytest.raises(InvalidInput, match="without learned sparse"):
        store.upsert(
            "without", [(chunk, ChunkVectors(dense=(1.0, 0.0), sparse=SparseVec((1,), (1.0,))))]
        )


def test_delete_by_source_and_source_hashes(store: EdgeStore) -> None:
    store.create_collection(CollectionSpec(name="c", dense_dims=2))
    a_chunks = [make_chunk("a", i, f"a{i}") for i in range(3)]
    b_chunks = [make_chunk("b", i, f"b{i}") for i in range(2)]
    store.upsert("c", [(ch, dense(1, i)) for i, ch in enumerate(a_chunks + b_chunks)])

    assert store.source_hashes("c", "a") == {ch.chunk_id: ch.content_hash for ch in a_chunks}
    assert store.source_hashes("c", "nope") == {}

    assert store.delete_by_source("c", "a") == 3
    assert store.delete_by_source("c", "a") == 0
    assert store.source_hashes("c", "a") == {}
    assert store.source_hashes("c", "b") == {ch.chunk_id: ch.content_hash for ch in b_chunks}
    stats = store.describe("c")
    assert (stats.chunks, stats.sources) == (2, 1)
    result = store.search("c", SearchQuery(text="a0 b0", dense=(1.0, 0.5)))
    assert {h.chunk.source_id for h in result.hits} == {"b"}


def test_upsert_replaces_by_chunk_id(store: EdgeStore) -> None:
    store.create_collection(CollectionSpec(name="c", dense_dims=2))
    old = make_chunk("s", 0, "old words")
    new = Chunk(**{**old.__dict__, "text": "fresh words", "content_hash": "h2"})
    store.upsert("c", [(old, dense(1, 0))])
    store.upsert("c", [(new, dense(1, 0))])
    assert store.describe("c").chunks == 1
    assert store.source_hashes("c", "s") == {old.chunk_id: "h2"}
    result = store.search("c", SearchQuery(text="fresh", paths=frozenset({SearchPath.BM25})))
    assert [h.chunk for h in result.hits] == [new]
    assert store.search("c", SearchQuery(text="old", paths=frozenset({SearchPath.BM25}))).hits == ()


def test_wrong_dims_and_bad_vectors_are_invalid_input(store: EdgeStore) -> None:
    store.create_collection(CollectionSpec(name="c", dense_dims=3))
    chunk = make_chunk("s", 0, "text")
    with pytest.raises(InvalidInput, match="2 dimensions; the collection expects 3"):
        store.upsert("c", [(chunk, dense(1, 0))])
    with pytest.raises(InvalidInput, match="no dense vector"):
        store.upsert("c", [(chunk, ChunkVectors())])
    with pytest.raises(InvalidInput, match="NaN"):
        store.upsert("c", [(chunk, dense(1, float("nan"), 0))])
    with pytest.raises(InvalidInput, match="not a UUID"):
        store.upsert("c", [(Chunk(chunk_id="c-1", source_id="s", text="x"), dense(1, 0, 0))])
    with pytest.raises(InvalidInput, match="dimensions"):
        store.search("c", SearchQuery(dense=(1.0, 0.0)))
    assert store.describe("c").chunks == 0  # nothing half-written


def test_a_query_from_another_embedder_model_is_invalid_input(store: EdgeStore) -> None:
    store.create_collection(CollectionSpec(name="c", dense_dims=3, embedder_model="mini"))
    store.upsert("c", [(make_chunk("s", 0, "text"), dense(1, 0, 0))])
    query = SearchQuery(dense=(1.0, 0.0, 0.0), paths=frozenset({SearchPath.DENSE}))
    with pytest.raises(InvalidInput, match="indexed with mini, but the query's vectors came"):
        store.search("c", replace(query, embedder_model="other-model"))
    # the same model, or a caller that does not say, searches as before
    assert len(store.search("c", replace(query, embedder_model="mini")).hits) == 1
    assert len(store.search("c", query).hits) == 1


def test_unknown_collection_is_not_found(store: EdgeStore) -> None:
    with pytest.raises(NotFound, match="'ghost'"):
        store.describe("ghost")
    with pytest.raises(NotFound):
        store.drop_collection("ghost")
    with pytest.raises(NotFound):
        store.upsert("ghost", [])
    with pytest.raises(NotFound):
        store.search("ghost", SearchQuery(text="x"))
    with pytest.raises(NotFound):
        store.delete_by_source("ghost", "s")
    with pytest.raises(NotFound):
        store.source_hashes("ghost", "s")


@pytest.mark.parametrize("name", ["Docs", "a b", "../etc", "", "-x", "x" * 65, "ü"])
def test_bad_collection_name_is_invalid_input(store: EdgeStore, name: str) -> None:
    with pytest.raises(InvalidInput, match="collection name"):
        store.create_collection(CollectionSpec(name=name, dense_dims=2))
    with pytest.raises(InvalidInput, match="collection name"):
        store.describe(name)
    assert not any(p.name != "collections" for p in store.root.iterdir())


def test_bad_specs_are_invalid_input(store: EdgeStore) -> None:
    with pytest.raises(InvalidInput, match="dense_dims"):
        store.create_collection(CollectionSpec(name="c", dense_dims=0))
    with pytest.raises(InvalidInput, match="cannot be filterable"):
        store.create_collection(CollectionSpec(name="c", dense_dims=2, filterable=("text",)))
    with pytest.raises(InvalidInput, match="not valid"):
        store.create_collection(CollectionSpec(name="c", dense_dims=2, filterable=("a.b",)))
    assert store.list_collections() == []


def test_searches_run_while_writes_land(store: EdgeStore) -> None:
    store.create_collection(CollectionSpec(name="c", dense_dims=2))
    errors: list[BaseException] = []
    seen_counts: list[int] = []
    stop = threading.Event()

    def searcher() -> None:
        try:
            while not stop.is_set():
                result = store.search(
                    "c", SearchQuery(text="kiwi", dense=(1.0, 0.0), limit=500, path_limit=500)
                )
                seen_counts.append(len(result.hits))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=searcher) for _ in range(3)]
    for t in threads:
        t.start()
    for batch in range(10):
        store.upsert(
            "c", [(make_chunk("s", batch * 20 + i, "kiwi"), dense(1, 0.01 * i)) for i in range(20)]
        )
        # a write is visible to the next search once upsert returns
        visible = store.search("c", SearchQuery(text="kiwi", limit=500, path_limit=500))
        assert len(visible.hits) == (batch + 1) * 20
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    assert seen_counts and max(seen_counts) <= 200


def test_optimize_keeps_data_searchable(store: EdgeStore) -> None:
    store.create_collection(CollectionSpec(name="c", dense_dims=2))
    store.upsert(
        "c", [(make_chunk("s", i, f"word{i} kiwi"), dense(1, 0.01 * i)) for i in range(50)]
    )
    store.delete_by_source("c", "nope")
    assert isinstance(store.optimize("c"), bool)
    assert store.describe("c").chunks == 50
    result = store.search("c", SearchQuery(text="word7", dense=(1.0, 0.07)))
    assert result.hits[0].chunk.text == "word7 kiwi"
