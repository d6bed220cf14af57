"""When RetrieverCore asks the store to build its search indexes: on start, and once
per ``optimize_after_chunks`` chunks written (the build copies the collection and
holds its writes, so never after every write); and that writes read the spec without
counting chunks."""

from __future__ import annotations

import pytest

from groundwire_retriever.domain import (
    Chunk,
    ChunkVectors,
    CollectionSpec,
    CollectionStats,
)
from groundwire_retriever.service import RetrieverCore


class RecordingStore:
    """What ``start`` and ``upsert`` touch, recording the optimize calls."""

    engine = "edge"

    def __init__(self) -> None:
        self.spec = CollectionSpec(name="docs", dense_dims=2)
        self.optimized: list[tuple[str, bool]] = []  # (collection, in place)
        self.written = 0

    def open(self) -> None: ...

    def list_collections(self) -> list[CollectionSpec]:
        return [self.spec]

    def describe(self, name: str) -> CollectionStats:
        return CollectionStats(spec=self.spec, chunks=self.written, sources=1)

    def upsert(self, name: str, chunks: list[tuple[Chunk, ChunkVectors]]) -> None:
        self.written += len(chunks)

    def optimize(self, name: str, *, in_place: bool = False) -> bool:
        self.optimized.append((name, in_place))
        return True


def _chunks(n: int) -> list[tuple[Chunk, ChunkVectors]]:
    return [
        (Chunk(chunk_id=f"c{i}", source_id="s", text="t"), ChunkVectors(dense=(1.0, 0.0)))
        for i in range(n)
    ]


async def test_indexes_are_built_on_start_and_every_n_chunks() -> None:
    store = RecordingStore()
    core = RetrieverCore(store, embedder=None, optimize_after_chunks=10)  # type: ignore[arg-type]
    await core.start()
    # what a previous run left unindexed, built in place: nothing is served yet
    assert store.optimized == [("docs", True)]
    await core.upsert("docs", _chunks(6))
    assert store.optimized == [("docs", True)]  # 6 < 10
    await core.upsert("docs", _chunks(6))
    # 12 >= 10: built (aside: searches go on), count reset
    assert store.optimized == [("docs", True), ("docs", False)]
    await core.upsert("docs", _chunks(9))
    assert store.optimized == [("docs", True), ("docs", False)]


async def test_zero_builds_only_on_start() -> None:
    store = RecordingStore()
    core = RetrieverCore(store, embedder=None, optimize_after_chunks=0)  # type: ignore[arg-type]
    await core.start()
    await core.upsert("docs", _chunks(50))
    assert store.optimized == [("docs", True)]


async def test_writes_read_the_spec_without_counting_the_collection() -> None:
    from groundwire_core.errors import InvalidInput, NotFound

    store = RecordingStore()
    core = RetrieverCore(store, embedder=None)  # type: ignore[arg-type]
    assert await core.spec("docs") == store.spec
    with pytest.raises(NotFound):
        await core.spec("other")
    with pytest.raises(InvalidInput):
        await core.spec("Not A Name")
    store.describe = None  # type: ignore[assignment,method-assign]  # never needed
    assert await core.upsert("docs", _chunks(3)) == 3
