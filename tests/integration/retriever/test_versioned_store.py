"""Atomic writes at the store level, on both engines: staged chunks stay invisible until
published, a publish switches a source at once, a killed ingest or re-index leaves the
old data serving and is cleaned up on open, a full re-index switches at once.

``edge`` is EdgeStore on a temporary folder; ``qdrant`` is QdrantServerStore in
qdrant-client's persistent local mode (a folder), so both can be reopened and killed.
Leftover points are counted by opening the persisted data directly, without the store.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import qdrant_edge as qe
from qdrant_client import QdrantClient

from groundwire_core.errors import AlreadyExists, InvalidInput, NotFound, Unavailable
from groundwire_retriever.domain import (
    Chunk,
    ChunkVectors,
    CollectionSpec,
    FieldFilter,
    SearchPath,
    SearchQuery,
)
from groundwire_retriever.store import EdgeStore, QdrantServerStore, StagedSource
from groundwire_retriever.store.qdrant import QdrantEngine
from groundwire_retriever.store.versioned import VersionedStore

NS = uuid.UUID("2c4b1a7e-9d3f-4e5a-8b6c-0d1e2f3a4b5c")
SPEC = CollectionSpec(name="kb", dense_dims=4, filterable=("source_id", "doc_type"))
ENGINES = ["edge", "qdrant"]


def make_store(kind: str, location: Path) -> VersionedStore:
    if kind == "edge":
        return EdgeStore(location)
    return QdrantServerStore(str(location))


def generation_rows(source: str, gen: int, count: int) -> list[tuple[Chunk, ChunkVectors]]:
    """``count`` chunks of one source's generation ``gen``: each text carries the marker
    ``g<gen>``; chunk ids are the same in every generation (index-based), as when a
    document keeps its chunk positions and only their text changes."""
    return [
        (
            Chunk(
                chunk_id=str(uuid.uuid5(NS, f"{source}/{i}")),
                source_id=source,
                text=f"zebra g{gen} section {i} of the {source} manual",
                chunk_index=i,
                doc_type="guide",
                content_hash=f"{source}-{gen}-{i}",
            ),
            ChunkVectors(dense=(1.0, 0.1 * i, 0.01 * gen, 0.5)),
        )
        for i in range(count)
    ]


def count_of(gen: int) -> int:
    return 2 + gen % 4


def markers(store: VersionedStore, source: str) -> list[str]:
    result = store.search(
        SPEC.name,
        SearchQuery(
            text="zebra",
            dense=(1.0, 0.0, 0.0, 0.5),
            dense_floor=-1.0,
            filters=(FieldFilter("source_id", (source,)),),
            limit=100,
            path_limit=100,
        ),
    )
    return sorted(h.chunk.text.split()[1] for h in result.hits)


def physical_points(kind: str, location: Path) -> int:
    """Every point of the collection's current generation, hidden or not, read from disk
    with the store closed."""
    if kind == "edge":
        directory = location / "collections" / SPEC.name
        doc = json.loads((directory / "collection.json").read_text())
        shard = qe.EdgeShard.load(str(directory / doc["shard"]))
        try:
            return shard.count(qe.CountRequest(exact=True))
        finally:
            shard.close()
    client = QdrantClient(path=str(location))
    try:
        return client.count(SPEC.name, exact=True).count
    finally:
        client.close()


def generations_on_disk(kind: str, location: Path) -> int:
    if kind == "edge":
        directory = location / "collections" / SPEC.name
        return sum(1 for p in directory.iterdir() if p.is_dir() and p.name.startswith("shard"))
    client = QdrantClient(path=str(location))
    try:
        return sum(1 for c in client.get_collections().collections if c.name.startswith("kb."))
    finally:
        client.close()


@pytest.fixture(params=ENGINES)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def location(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def store(kind: str, location: Path) -> Iterator[VersionedStore]:
    s = make_store(kind, location)
    s.open()
    s.create_collection(SPEC)
    yield s
    s.close()


def ingest(store: VersionedStore, source: str, gen: int) -> StagedSource:
    staged = store.stage_source(SPEC.name, source, generation_rows(source, gen, count_of(gen)))
    store.publish_source(staged)
    return staged


def test_staged_chunks_stay_invisible_until_published(
    store: VersionedStore, kind: str, location: Path
) -> None:
    ingest(store, "a", 0)
    ingest(store, "b", 1)
    staged = store.stage_source(SPEC.name, "a", generation_rows("a", 5, count_of(5)))
    assert staged.chunks == count_of(5)
    assert markers(store, "a") == ["g0"] * count_of(0)
    assert store.describe(SPEC.name).chunks == count_of(0) + count_of(1)
    old_hashes = store.source_hashes(SPEC.name, "a")
    assert set(old_hashes.values()) == {f"a-0-{i}" for i in range(count_of(0))}

    store.publish_source(staged)
    assert markers(store, "a") == ["g5"] * count_of(5)
    assert markers(store, "b") == ["g1"] * count_of(1)
    stats = store.describe(SPEC.name)
    assert (stats.chunks, stats.sources) == (count_of(5) + count_of(1), 2)
    with pytest.raises(InvalidInput, match="already published"):
        store.publish_source(staged)
    store.close()
    assert physical_points(kind, location) == count_of(5) + count_of(1), "old points deleted"


def test_discard_and_delete_by_source(store: VersionedStore, kind: str, location: Path) -> None:
    ingest(store, "a", 0)
    ingest(store, "b", 1)
    staged = store.stage_source(SPEC.name, "a", generation_rows("a", 3, count_of(3)))
    store.discard_source(staged)
    store.discard_source(staged)  # idempotent
    assert markers(store, "a") == ["g0"] * count_of(0)
    with pytest.raises(InvalidInput):
        store.publish_source(staged)

    assert store.delete_by_source(SPEC.name, "b") == count_of(1)
    assert store.delete_by_source(SPEC.name, "b") == 0
    assert markers(store, "b") == []
    assert store.source_hashes(SPEC.name, "b") == {}
    assert store.describe(SPEC.name).sources == 1
    store.close()
    assert physical_points(kind, location) == count_of(0)


def test_upsert_writes_into_the_current_revision(store: VersionedStore) -> None:
    ingest(store, "a", 0)
    first = generation_rows("a", 0, 1)[0][0]
    changed = Chunk(**{**first.__dict__, "text": "zebra g9 rewritten", "content_hash": "x"})
    store.upsert(SPEC.name, [(changed, ChunkVectors(dense=(1.0, 0.0, 0.0, 0.5)))])
    assert markers(store, "a") == sorted(["g9"] + ["g0"] * (count_of(0) - 1))
    assert store.describe(SPEC.name).chunks == count_of(0), "replaced by chunk id"
    store.upsert(SPEC.name, generation_rows("new", 2, 2))
    assert markers(store, "new") == ["g2", "g2"]


def test_readers_see_the_old_set_or_the_new_set(store: VersionedStore) -> None:
    ingest(store, "steady", 1)
    ingest(store, "live", 0)
    stop = threading.Event()
    problems: list[str] = []
    seen: set[str] = set()
    reads = [0]

    def reader() -> None:
        try:
            while not stop.is_set():
                found = markers(store, "live")
                reads[0] += 1
                kinds = set(found)
                if len(kinds) != 1:
                    problems.append(f"saw {found}")
                    continue
                (marker,) = kinds
                seen.add(marker)
                if len(found) != count_of(int(marker[1:])):
                    problems.append(f"partial set {found}")
                if markers(store, "steady") != ["g1"] * count_of(1):
                    problems.append("the other source changed")
        except BaseException as exc:  # reported below
            problems.append(repr(exc))

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for gen in range(1, 21):
            ingest(store, "live", gen)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert problems == []
    assert reads[0] > 20 and len(seen) > 3, (reads, seen)
    assert markers(store, "live") == ["g20"] * count_of(20)
    assert store.describe(SPEC.name).chunks == count_of(20) + count_of(1)


def test_full_reindex_switches_at_once(store: VersionedStore, kind: str, location: Path) -> None:
    for source, gen in (("a", 0), ("b", 1), ("c", 2)):
        ingest(store, source, gen)
    new_spec = CollectionSpec(
        name=SPEC.name, dense_dims=4, filterable=SPEC.filterable, embedder_model="v2"
    )
    generation = store.begin_reindex(new_spec)
    with pytest.raises(AlreadyExists, match="re-index"):
        store.begin_reindex(new_spec)
    for source, gen in (("a", 7), ("d", 8)):
        staged = store.stage_source(
            SPEC.name, source, generation_rows(source, gen, count_of(gen)), generation=generation
        )
        store.publish_source(staged)
    # readers still see the old generation, whole
    assert [markers(store, s) for s in "abcd"] == [
        ["g0"] * count_of(0),
        ["g1"] * count_of(1),
        ["g2"] * count_of(2),
        [],
    ]
    assert store.list_collections() == [SPEC]

    store.commit_reindex(SPEC.name, generation)
    assert [markers(store, s) for s in "abcd"] == [
        ["g7"] * count_of(7),
        [],
        [],
        ["g8"] * count_of(8),
    ]
    assert store.list_collections() == [new_spec]
    assert store.describe(SPEC.name).sources == 2
    with pytest.raises(NotFound):
        store.commit_reindex(SPEC.name, generation)
    store.close()
    assert generations_on_disk(kind, location) == 1

    reopened = make_store(kind, location)
    reopened.open()
    try:
        assert reopened.list_collections() == [new_spec]
        assert markers(reopened, "d") == ["g8"] * count_of(8)
    finally:
        reopened.close()


def test_aborted_reindex_keeps_the_old_generation(
    store: VersionedStore, kind: str, location: Path
) -> None:
    ingest(store, "a", 0)
    generation = store.begin_reindex(SPEC)
    store.publish_source(
        store.stage_source(SPEC.name, "z", generation_rows("z", 1, 3), generation=generation)
    )
    store.abort_reindex(SPEC.name, generation)
    store.abort_reindex(SPEC.name, generation)  # idempotent
    assert markers(store, "a") == ["g0"] * count_of(0)
    assert markers(store, "z") == []
    with pytest.raises(NotFound):
        store.stage_source(SPEC.name, "z", generation_rows("z", 1, 1), generation=generation)
    store.close()
    assert generations_on_disk(kind, location) == 1


def test_a_write_racing_a_reindex_is_refused(store: VersionedStore) -> None:
    ingest(store, "a", 0)
    staged = store.stage_source(SPEC.name, "a", generation_rows("a", 1, 2))
    generation = store.begin_reindex(SPEC)
    store.commit_reindex(SPEC.name, generation)
    with pytest.raises(Unavailable, match="re-indexed"):
        store.publish_source(staged)
    store.discard_source(staged)  # the generation is gone: nothing to do, no error
    assert store.describe(SPEC.name).chunks == 0


_KILLED = textwrap.dedent(
    """
    import sys, time, uuid
    sys.path.insert(0, {tests!r})
    from test_versioned_store import SPEC, generation_rows, make_store
    store = make_store({kind!r}, __import__("pathlib").Path({location!r}))
    store.open()
    if {reindex!r}:
        generation = store.begin_reindex(SPEC)
        rows = generation_rows("x", 4, 5)
        store.publish_source(store.stage_source(SPEC.name, "x", rows, generation=generation))
    else:
        store.stage_source(SPEC.name, "a", generation_rows("a", 9, 5))
    print("STAGED", flush=True)
    time.sleep(60)
    """
)


def _run_and_kill(kind: str, location: Path, *, reindex: bool) -> None:
    """Runs a writer in another process and SIGKILLs it after its chunks are written,
    before the switch."""
    script = _KILLED.format(
        tests=str(Path(__file__).parent), kind=kind, location=str(location), reindex=reindex
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            line = proc.stdout.readline()
            if line.strip() != "STAGED":
                proc.wait(timeout=30)
                pytest.fail(f"the writer did not stage: {proc.stderr.read()[-2000:]}")
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("reindex", [False, True], ids=["source", "reindex"])
def test_killed_ingest_leaves_the_old_data_and_reopen_cleans_up(
    kind: str, location: Path, reindex: bool
) -> None:
    first = make_store(kind, location)
    first.open()
    first.create_collection(SPEC)
    ingest(first, "a", 0)
    first.close()

    _run_and_kill(kind, location, reindex=reindex)
    if reindex:
        assert generations_on_disk(kind, location) == 2, "the killed build left its generation"
    else:
        assert physical_points(kind, location) == count_of(0) + 5, "hidden orphans on disk"

    store = make_store(kind, location)
    store.open()
    try:
        assert markers(store, "a") == ["g0"] * count_of(0)
        assert markers(store, "x") == []
        assert store.describe(SPEC.name).chunks == count_of(0)
        ingest(store, "a", 9)  # re-running converges
        assert markers(store, "a") == ["g9"] * count_of(9)
    finally:
        store.close()
    assert physical_points(kind, location) == count_of(9)
    assert generations_on_disk(kind, location) == 1


def test_edge_upgrades_a_collection_written_before_revisions(tmp_path: Path) -> None:
    """Format 1 (no revision payload): opened, upgraded, and re-ingest replaces it."""
    root = tmp_path / "data"
    directory = root / "collections" / SPEC.name
    shard = qe.EdgeShard.create(
        str(directory / "shard"),
        qe.EdgeConfig(
            vectors={"dense": qe.EdgeVectorParams(4, qe.Distance.Cosine)},
            sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        ),
    )
    shard.update(qe.UpdateOperation.create_field_index("source_id", qe.PayloadSchemaType.Keyword))
    for chunk, vectors in generation_rows("a", 0, 3):
        assert vectors.dense is not None
        shard.update(
            qe.UpdateOperation.upsert_points(
                [
                    qe.Point(
                        chunk.chunk_id,
                        {"dense": list(vectors.dense)},
                        {"chunk_id": chunk.chunk_id, "source_id": "a", "text": chunk.text},
                    )
                ]
            )
        )
    shard.close()
    spec = {"name": SPEC.name, "dense_dims": 4, "filterable": list(SPEC.filterable)}
    (directory / "collection.json").write_text(
        json.dumps({"format": 1, "spec": spec, "bm25": {}, "shard": "shard"})
    )

    store = EdgeStore(root)
    store.open()
    try:
        result = store.search(SPEC.name, SearchQuery(dense=(1.0, 0.0, 0.0, 0.5), dense_floor=-1))
        assert len(result.hits) == 3
        assert json.loads((directory / "collection.json").read_text())["format"] == 2
        ingest(store, "a", 1)
        assert markers(store, "a") == ["g1"] * count_of(1)
        assert store.describe(SPEC.name).chunks == count_of(1)
        only_bm25 = SearchQuery(text="zebra", paths=frozenset({SearchPath.BM25}))
        assert len(store.search(SPEC.name, only_bm25).hits) == count_of(1)
    finally:
        store.close()


def test_qdrant_leaves_collections_it_does_not_manage_alone(tmp_path: Path) -> None:
    """A collection named like ours but made by someone else is neither loaded nor
    replaced, and a create that collides with it leaves nothing behind."""
    location = tmp_path / "data"
    client = QdrantClient(path=str(location))
    client.create_collection(SPEC.name, vectors_config={})
    client.close()

    store = QdrantServerStore(str(location))
    store.open()
    try:
        assert store.list_collections() == []
        with pytest.raises(AlreadyExists, match="does not manage"):
            store.create_collection(SPEC)
        assert store.list_collections() == []
    finally:
        store.close()
    client = QdrantClient(path=str(location))
    try:
        assert [c.name for c in client.get_collections().collections] == [SPEC.name]
    finally:
        client.close()


def test_an_unreachable_qdrant_server_is_unavailable() -> None:
    store = QdrantServerStore("http://127.0.0.1:9", timeout_s=2)
    with pytest.raises(Unavailable) as info:
        store.open()
    assert info.value.dependency == "qdrant"
    assert "cannot be reached" in info.value.message
    with pytest.raises(Unavailable, match="not open"):
        store.list_collections()


def test_ping_follows_the_embedded_engines_folder(tmp_path: Path) -> None:
    """The engine is in this process: only its folder can go away under it."""
    root = tmp_path / "edge"
    store = EdgeStore(root)
    with pytest.raises(Unavailable, match="not open"):
        store.ping()
    store.open()
    try:
        store.create_collection(SPEC)
        store.ping()
        root.rename(tmp_path / "moved")
        with pytest.raises(Unavailable, match="is gone") as info:
            store.ping()
        assert info.value.dependency == "qdrant-edge"
        (tmp_path / "moved").rename(root)
        store.ping()
    finally:
        store.close()


def test_ping_of_qdrant_in_local_mode_and_of_a_server_gone_away(tmp_path: Path) -> None:
    store = QdrantServerStore(":memory:")
    store.open()
    try:
        store.ping()
    finally:
        store.close()
    with pytest.raises(Unavailable, match="not open"):
        store.ping()

    # A server that answered when the store opened and stopped since: the engine's
    # client is a real QdrantClient of a port nothing listens on.
    engine = QdrantEngine("http://127.0.0.1:9", timeout_s=2)
    engine._client = QdrantClient(url="http://127.0.0.1:9", timeout=2, check_compatibility=False)
    try:
        with pytest.raises(Unavailable, match="does not answer") as info:
            engine.ping()
        assert info.value.dependency == "qdrant"
    finally:
        engine.close()
