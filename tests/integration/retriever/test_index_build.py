"""The embedded engine builds its search indexes in a child process, on a copy of the
shard, so the retriever keeps answering meanwhile (in-process, qdrant-edge holds the
GIL for the whole build). A real EdgeStore, a real build: 8,000 384-d chunks are past
the engine's indexing threshold."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from groundwire_core.errors import BackendFailure
from groundwire_retriever.domain import Chunk, ChunkVectors, CollectionSpec, SearchPath, SearchQuery
from groundwire_retriever.store import EdgeStore
from groundwire_retriever.store import edge as edge_module

DIMS = 384
CHUNKS = 8_000
NS = uuid.UUID("0b8a3c1e-0000-4000-8000-000000000000")


def _rows(start: int, count: int, source: str | None = None) -> list[tuple[Chunk, ChunkVectors]]:
    vectors = np.random.default_rng(start).standard_normal((count, DIMS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = []
    for k in range(count):
        i = start + k
        src = source or f"doc-{i // 4}"
        chunk = Chunk(
            chunk_id=str(uuid.uuid5(NS, f"{src}/{i}")),
            source_id=src,
            text=f"word{i} kiwi apple{i % 50}",
            chunk_index=i % 4 if source is None else k,
            content_hash=f"h{i}",
        )
        rows.append((chunk, ChunkVectors(dense=tuple(float(x) for x in vectors[k]))))
    return rows


def _shard_folders(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "collections" / "c").iterdir() if p.is_dir())


def _settled_folders(root: Path, count: int = 1) -> list[str]:
    """The shard folders once the replaced ones are gone (removed in the background)."""
    deadline = time.monotonic() + 30
    while len(folders := _shard_folders(root)) > count and time.monotonic() < deadline:
        time.sleep(0.05)
    return folders


def _bm25(store: EdgeStore, text: str) -> list[tuple[str, float]]:
    """Hits and scores of a BM25 search (exact: no index involved). The queries name
    a word only one chunk has: ties would make the order arbitrary."""
    query = SearchQuery(text=text, paths=frozenset({SearchPath.BM25}), limit=10)
    return [(h.chunk.chunk_id, round(h.score, 5)) for h in store.search("c", query).hits]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def store(root: Path) -> Iterator[EdgeStore]:
    """An open store with an empty collection "c" of 384-d vectors; closed after."""
    s = EdgeStore(root)
    s.open()
    s.create_collection(CollectionSpec(name="c", dense_dims=DIMS))
    yield s
    s.close()  # idempotent: a test may close it first


def test_searches_go_on_during_a_build_and_find_the_same_chunks(
    root: Path, store: EdgeStore
) -> None:
    try:
        rows = _rows(0, CHUNKS)
        store.upsert("c", rows)
        staged = store.stage_source("c", "late", _rows(CHUNKS, 3, source="late"))
        before_folders = _shard_folders(root)
        config = (root / "collections" / "c" / before_folders[0] / "edge_config.json").read_text()
        before = {w: _bm25(store, w) for w in ("word17", "word4242", "word7001")}
        probe = SearchQuery(text="", dense=rows[123][1].dense, limit=1)

        searched: list[float] = []
        done = threading.Event()

        def search_meanwhile() -> None:
            while not done.is_set():
                assert store.search("c", probe).hits[0].chunk.chunk_id == rows[123][0].chunk_id
                searched.append(time.monotonic())

        searcher = threading.Thread(target=search_meanwhile)
        searcher.start()
        try:
            started = time.monotonic()
            built = store.optimize("c")
            ended = time.monotonic()
        finally:
            done.set()
            searcher.join()

        assert built is True
        during = [t for t in searched if started < t < ended]
        # with the build in this process, no search at all finishes while it runs
        assert len(during) >= 10, (len(during), ended - started)

        after_folders = _settled_folders(root)
        assert len(after_folders) == 1 and after_folders != before_folders
        pointer = json.loads((root / "collections" / "c" / "collection.json").read_text())
        assert pointer["shard"] == after_folders[0]
        # the built copy keeps the engine settings the original was opened with (the
        # build adds the HNSW defaults it used)
        built_config = root / "collections" / "c" / after_folders[0] / "edge_config.json"
        assert json.loads(config).items() <= json.loads(built_config.read_text()).items()
        assert {w: _bm25(store, w) for w in before} == before
        assert store.describe("c").chunks == CHUNKS
        store.publish_source(staged)  # staged before the build, published after it
        assert store.describe("c").chunks == CHUNKS + 3
        assert store.optimize("c") is False  # nothing left to build: no copy kept
        assert _settled_folders(root) == after_folders
    finally:
        store.close()
    assert _shard_folders(root) == after_folders  # close waits for the removals

    reopened = EdgeStore(root)
    reopened.open()
    try:
        assert reopened.describe("c").chunks == CHUNKS + 3
        assert {w: _bm25(reopened, w) for w in before} == before
    finally:
        reopened.close()


def test_an_in_place_build_copies_nothing(root: Path, store: EdgeStore) -> None:
    """Start-up's build: nothing is served yet, so no copy and no child process."""
    store.upsert("c", _rows(0, CHUNKS))
    folders = _shard_folders(root)
    before = _bm25(store, "word17")
    assert store.optimize("c", in_place=True) is True
    assert _shard_folders(root) == folders
    assert _bm25(store, "word17") == before
    assert store.optimize("c") is False  # built already


def test_a_failed_build_leaves_the_collection_as_it_was(
    root: Path, store: EdgeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The optimizer process fails (here: a module that does not exist)."""
    store.upsert("c", _rows(0, 40))
    folders = _shard_folders(root)
    before = _bm25(store, "word7")
    monkeypatch.setattr(
        edge_module, "OPTIMIZER", [*edge_module.OPTIMIZER[:2], "groundwire_no_such_module"]
    )
    with pytest.raises(BackendFailure, match="build the search index"):
        store.optimize("c")
    assert _settled_folders(root, len(folders)) == folders  # the copy is gone, the original serves
    assert _bm25(store, "word7") == before
    store.upsert("c", _rows(40, 4))  # writes are open again
    assert store.describe("c").chunks == 44
