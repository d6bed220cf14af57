"""Congruence: the same ingest and searches against both engines give the same answers.

``EdgeStore`` (qdrant-edge, on a temporary folder) and ``QdrantServerStore``
(qdrant-client's local mode, ``:memory:``) receive ~200 chunks of our own synthetic
text with deterministic pseudo-random dense vectors, written through the real ingest
path (stage + publish per source). Every chunk has a distinct word count, so BM25
never produces exact ties whose order would be arbitrary.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from groundwire_core.errors import AlreadyExists, GroundwireError, InvalidInput, NotFound
from groundwire_retriever.domain import (
    Chunk,
    ChunkVectors,
    CollectionSpec,
    FieldFilter,
    Fusion,
    SearchPath,
    SearchQuery,
    SearchResult,
    SourcePage,
    SparseVec,
)
from groundwire_retriever.store import EdgeStore, QdrantServerStore, VectorStore

NS = uuid.UUID("5d1f9c3a-7b2e-4c6d-8e0f-1a2b3c4d5e6f")
DIMS = 32
SOURCES = 20
PER_SOURCE = 10
WORDS = (
    "river mountain engine signal network packet router cache memory thread process kernel "
    "driver garden flower tree forest stream ocean island bridge tower castle window door "
    "table chair lamp running jumping reading writing building testing deploying scaling "
    "indexing searching ranking quickly slowly carefully boldly gently loudly quietly easily "
    "rarely often always never"
).split()
DOC_TYPES = ("guide", "faq", "note")
TEAMS = ("red", "blue")
SPEC = CollectionSpec(
    name="corpus",
    dense_dims=DIMS,
    learned_sparse=True,
    filterable=("source_id", "doc_type", "team"),
    embedder_model="synthetic",
)
DENSE = frozenset({SearchPath.DENSE})
BM25 = frozenset({SearchPath.BM25})
SPARSE = frozenset({SearchPath.SPARSE})
HYBRID = frozenset({SearchPath.DENSE, SearchPath.BM25})


def _corpus() -> list[tuple[Chunk, ChunkVectors]]:
    rng = random.Random(7)
    nrng = np.random.default_rng(7)
    lengths = list(range(12, 12 + SOURCES * PER_SOURCE))
    rng.shuffle(lengths)
    rows = []
    for s in range(SOURCES):
        for i in range(PER_SOURCE):
            # half Zipf-like (shared, frequent words), half uniform
            words = [
                WORDS[min(int(rng.paretovariate(1.2)) - 1, len(WORDS) - 1)]
                if rng.random() < 0.5
                else rng.choice(WORDS)
                for _ in range(lengths[s * PER_SOURCE + i])
            ]
            sparse_idx = sorted(rng.sample(range(500), 12))
            chunk = Chunk(
                chunk_id=str(uuid.uuid5(NS, f"{s}/{i}")),
                source_id=f"src-{s:02d}",
                text=" ".join(words),
                chunk_index=i,
                doc_type=DOC_TYPES[s % 3],
                metadata={"team": TEAMS[i % 2]},
                content_hash=f"h-{s}-{i}",
            )
            vectors = ChunkVectors(
                dense=tuple(float(x) for x in nrng.normal(size=DIMS)),
                sparse=SparseVec(
                    tuple(sparse_idx), tuple(float(x) for x in nrng.uniform(0.1, 1.0, 12))
                ),
            )
            rows.append((chunk, vectors))
    return rows


CORPUS = _corpus()


def _ingest(store: VectorStore, rows: list[tuple[Chunk, ChunkVectors]]) -> None:
    by_source: dict[str, list[tuple[Chunk, ChunkVectors]]] = {}
    for row in rows:
        by_source.setdefault(row[0].source_id, []).append(row)
    for source_id, chunks in by_source.items():
        store.publish_source(store.stage_source(SPEC.name, source_id, chunks))


def _open_pair(root: Path) -> tuple[EdgeStore, QdrantServerStore]:
    edge = EdgeStore(root / "edge")
    server = QdrantServerStore(":memory:")
    edge.open()
    server.open()
    return edge, server


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, VectorStore]]:
    edge, server = _open_pair(tmp_path_factory.mktemp("congruence"))
    pair: dict[str, VectorStore] = {"edge": edge, "qdrant": server}
    for store in pair.values():
        store.create_collection(SPEC)
        _ingest(store, CORPUS)
    yield pair
    edge.close()
    server.close()


def _queries(seed: int, count: int) -> list[tuple[str, tuple[float, ...], SparseVec]]:
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    return [
        (
            " ".join(rng.sample(WORDS, rng.randint(1, 3))),
            tuple(float(x) for x in nrng.normal(size=DIMS)),
            SparseVec(tuple(sorted(rng.sample(range(500), 6))), (1.0,) * 6),
        )
        for _ in range(count)
    ]


def _both(stores: dict[str, VectorStore], query: SearchQuery) -> tuple[SearchResult, SearchResult]:
    return stores["edge"].search(SPEC.name, query), stores["qdrant"].search(SPEC.name, query)


def _ids(result: SearchResult) -> list[str]:
    return [h.chunk.chunk_id for h in result.hits]


def _assert_same(edge: SearchResult, server: SearchResult) -> None:
    assert _ids(edge) == _ids(server)
    for a, b in zip(edge.hits, server.hits, strict=True):
        assert a.chunk == b.chunk
        assert a.path_ranks == b.path_ranks
        assert a.score == pytest.approx(b.score, rel=1e-6)
        for path, score in a.path_scores.items():
            assert score == pytest.approx(b.path_scores[path], rel=1e-5, abs=1e-6)
    assert [(r.path, r.hits, r.skipped, r.reason) for r in edge.paths] == [
        (r.path, r.hits, r.skipped, r.reason) for r in server.paths
    ]


@pytest.mark.parametrize(
    ("paths", "label"),
    [(DENSE, "dense"), (BM25, "bm25"), (SPARSE, "sparse"), (HYBRID, "hybrid")],
)
def test_same_top10(
    stores: dict[str, VectorStore], paths: frozenset[SearchPath], label: str
) -> None:
    nonempty = 0
    for text, dense, sparse in _queries(seed=len(label), count=25):
        query = SearchQuery(
            text=text, dense=dense, sparse=sparse, paths=paths, limit=10, dense_floor=-1.0
        )
        edge, server = _both(stores, query)
        _assert_same(edge, server)
        nonempty += len(edge.hits) == 10
    assert nonempty == 25, "every query fills its top 10, so the comparison has teeth"


def test_same_weighted_fusion_and_drop_off(stores: dict[str, VectorStore]) -> None:
    cut_somewhere = 0
    for text, dense, _ in _queries(seed=99, count=15):
        base = SearchQuery(
            text=text,
            dense=dense,
            paths=HYBRID,
            fusion=Fusion.WEIGHTED,
            weights={SearchPath.BM25: 0.5},
            limit=20,
            dense_floor=0.0,
        )
        full_edge, full_server = _both(stores, base)
        _assert_same(full_edge, full_server)
        cut_edge, cut_server = _both(stores, SearchQuery(**{**base.__dict__, "drop_off": 0.6}))
        _assert_same(cut_edge, cut_server)
        top = full_edge.hits[0].score
        assert _ids(cut_edge) == [h.chunk.chunk_id for h in full_edge.hits if h.score >= 0.6 * top]
        cut_somewhere += len(cut_edge.hits) < len(full_edge.hits)
    assert cut_somewhere > 0


@pytest.mark.parametrize(
    "filters",
    [
        (FieldFilter("source_id", ("src-03", "src-11")),),
        (FieldFilter("doc_type", ("faq",)),),
        (FieldFilter("team", ("red",)),),
        (FieldFilter("doc_type", ("guide", "note")), FieldFilter("team", ("blue",))),
        (FieldFilter("source_id", ("nope",)),),
    ],
    ids=["source", "doc_type", "metadata", "and", "none"],
)
def test_same_filter_behaviour(
    stores: dict[str, VectorStore], filters: tuple[FieldFilter, ...]
) -> None:
    for text, dense, sparse in _queries(seed=5, count=5):
        query = SearchQuery(
            text=text,
            dense=dense,
            sparse=sparse,
            filters=filters,
            limit=200,
            path_limit=200,
            dense_floor=-1.0,
        )
        edge, server = _both(stores, query)
        _assert_same(edge, server)
        expected = {
            c.chunk_id
            for c, _ in CORPUS
            if all(
                (c.metadata.get(f.field) if f.field == "team" else getattr(c, f.field)) in f.any_of
                for f in filters
            )
        }
        assert set(_ids(edge)) == expected  # the dense path with floor -1 finds them all


def test_same_describe_and_hashes(stores: dict[str, VectorStore]) -> None:
    edge, server = stores["edge"].describe(SPEC.name), stores["qdrant"].describe(SPEC.name)
    assert edge == server
    assert (edge.spec, edge.chunks, edge.sources) == (SPEC, SOURCES * PER_SOURCE, SOURCES)
    assert stores["edge"].list_collections() == stores["qdrant"].list_collections() == [SPEC]
    hashes = stores["edge"].source_hashes(SPEC.name, "src-07")
    assert hashes == stores["qdrant"].source_hashes(SPEC.name, "src-07")
    assert hashes == {c.chunk_id: c.content_hash for c, _ in CORPUS if c.source_id == "src-07"}


def test_same_source_listing_and_reading(stores: dict[str, VectorStore]) -> None:
    """ListSources pages and ReadSource order agree between the engines and with what
    was written."""
    pages: dict[str, list[SourcePage]] = {}
    for label, store in stores.items():
        token, got = "", []
        while True:
            page = store.list_sources(SPEC.name, page_token=token, limit=7)
            got.append(page)
            token = page.next_page_token
            if not token:
                break
        pages[label] = got
    assert pages["edge"] == pages["qdrant"]
    listed = [s for page in pages["edge"] for s in page.sources]
    assert [len(page.sources) for page in pages["edge"]] == [7, 7, 6]
    assert {page.total for page in pages["edge"]} == {SOURCES}
    assert [s.source_id for s in listed] == [f"src-{n:02d}" for n in range(SOURCES)]
    assert {s.chunks for s in listed} == {PER_SOURCE}
    assert len({s.content_hash for s in listed}) == SOURCES, "each source hashes differently"
    assert listed[4].doc_type == DOC_TYPES[4 % 3]

    expected = [c for c, _ in CORPUS if c.source_id == "src-04"]
    for store in stores.values():
        read = store.read_source(SPEC.name, "src-04")
        assert read.total == PER_SOURCE
        assert [c.chunk_id for c in read.chunks] == [c.chunk_id for c in expected]
        assert [c.text for c in read.chunks] == [c.text for c in expected]
        tail = store.read_source(SPEC.name, "src-04", offset=8, limit=5)
        assert [c.chunk_index for c in tail.chunks] == [8, 9] and tail.total == PER_SOURCE
    for call in (
        lambda s: s.read_source(SPEC.name, "src-99"),
        lambda s: s.list_sources(SPEC.name, limit=0),
        lambda s: s.list_sources("ghost"),
    ):
        edge = _error(lambda call=call: call(stores["edge"]))
        assert edge == _error(lambda call=call: call(stores["qdrant"]))
    assert _error(lambda: stores["edge"].read_source(SPEC.name, "src-99"))[0] is NotFound


def _error(call: object) -> tuple[type[GroundwireError], str]:
    assert callable(call)
    with pytest.raises(GroundwireError) as info:
        call()
    return type(info.value), info.value.message


def test_same_errors(stores: dict[str, VectorStore]) -> None:
    chunk, _ = CORPUS[0]
    calls = {
        "missing": lambda s: s.describe("ghost"),
        "exists": lambda s: s.create_collection(SPEC),
        "dims": lambda s: s.search(SPEC.name, SearchQuery(dense=(1.0, 0.0))),
        "filter": lambda s: s.search(
            SPEC.name, SearchQuery(text="x", filters=(FieldFilter("url", ("u",)),))
        ),
        "drop_off": lambda s: s.search(SPEC.name, SearchQuery(text="x", drop_off=1.5)),
        "vector": lambda s: s.upsert(SPEC.name, [(chunk, ChunkVectors(dense=(1.0,)))]),
        "foreign": lambda s: s.stage_source(
            SPEC.name, "other", [(chunk, ChunkVectors(dense=(1.0,) * DIMS))]
        ),
    }
    expected_types = {
        "missing": NotFound,
        "exists": AlreadyExists,
        "dims": InvalidInput,
        "filter": InvalidInput,
        "drop_off": InvalidInput,
        "vector": InvalidInput,
        "foreign": InvalidInput,
    }
    for label, call in calls.items():
        edge = _error(lambda call=call: call(stores["edge"]))
        server = _error(lambda call=call: call(stores["qdrant"]))
        assert edge == server, label
        assert edge[0] is expected_types[label], label
    assert stores["edge"].describe(SPEC.name).chunks == SOURCES * PER_SOURCE


def test_same_replace_and_delete(tmp_path: Path) -> None:
    """Re-ingest, delete and full re-index leave the same visible chunks in both."""
    edge, server = _open_pair(tmp_path)
    small = CollectionSpec(name="small", dense_dims=DIMS, filterable=("source_id",))
    try:
        rows = [r for r in CORPUS if r[0].source_id in ("src-00", "src-01", "src-02")]
        for store in (edge, server):
            store.create_collection(small)
            for source_id in ("src-00", "src-01", "src-02"):
                chunks = [
                    (c, ChunkVectors(dense=v.dense)) for c, v in rows if c.source_id == source_id
                ]
                store.publish_source(store.stage_source("small", source_id, chunks))
            # src-01 shrinks to its first three chunks with new text
            new = [
                (
                    Chunk(**{**c.__dict__, "text": f"replaced {c.text}", "content_hash": "new"}),
                    ChunkVectors(dense=v.dense),
                )
                for c, v in rows
                if c.source_id == "src-01" and c.chunk_index < 3
            ]
            store.publish_source(store.stage_source("small", "src-01", new))
            assert store.delete_by_source("small", "src-02") == PER_SOURCE
        query = SearchQuery(
            text="replaced river",
            dense=CORPUS[0][1].dense,
            limit=100,
            path_limit=100,
            dense_floor=-1.0,
        )
        a, b = edge.search("small", query), server.search("small", query)
        assert sorted(_ids(a)) == sorted(_ids(b))
        assert {h.chunk.source_id for h in a.hits} == {"src-00", "src-01"}
        assert len(a.hits) == PER_SOURCE + 3
        assert edge.describe("small") == server.describe("small")
        assert edge.source_hashes("small", "src-01") == server.source_hashes("small", "src-01")
        assert set(edge.source_hashes("small", "src-01").values()) == {"new"}
    finally:
        edge.close()
        server.close()


def test_same_documents_when_grouped_by_source(stores: dict[str, VectorStore]) -> None:
    """One hit per source on both engines: each source's best fused chunk, with the
    number of its chunks among the candidates, in the fused order of those best chunks."""
    every = frozenset(SearchPath)
    for text, dense, sparse in _queries(seed=5, count=15):
        query = SearchQuery(
            text=text,
            dense=dense,
            sparse=sparse,
            paths=every,
            path_limit=30,
            limit=8,
            dense_floor=-1.0,
            group_by_source=True,
        )
        edge, server = _both(stores, query)
        _assert_same(edge, server)
        assert [(h.matching_chunks, h.other_headings) for h in edge.hits] == [
            (h.matching_chunks, h.other_headings) for h in server.hits
        ]
        sources = [h.chunk.source_id for h in edge.hits]
        assert len(sources) == len(set(sources)) == 8, sources
        # the chunk-level ranking of every candidate, grouped by hand
        flat = stores["edge"].search(
            SPEC.name, SearchQuery(**{**query.__dict__, "group_by_source": False, "limit": 90})
        )
        best: dict[str, list[str]] = {}
        for hit in flat.hits:
            best.setdefault(hit.chunk.source_id, []).append(hit.chunk.chunk_id)
        assert [h.chunk.chunk_id for h in edge.hits] == [ids[0] for ids in best.values()][:8]
        assert [h.matching_chunks for h in edge.hits] == [len(ids) for ids in best.values()][:8]
        assert any(h.matching_chunks > 1 for h in edge.hits), "grouping merged something"


def test_chunk_level_stays_the_default(stores: dict[str, VectorStore]) -> None:
    text, dense, sparse = _queries(seed=6, count=1)[0]
    query = SearchQuery(text=text, dense=dense, sparse=sparse, limit=30, dense_floor=-1.0)
    edge, server = _both(stores, query)
    _assert_same(edge, server)
    sources = [h.chunk.source_id for h in edge.hits]
    assert len(sources) > len(set(sources)), "several chunks of one source"
    assert {h.matching_chunks for h in edge.hits} == {0}
