"""Two retriever replicas on one Qdrant store stay atomic (issue 23, acceptance 1).

There is no Qdrant server binary on these machines: the replicas share one
qdrant-client local-mode instance (the same client API a server is driven by), each
with its own ``QdrantServerStore``, its own lease holder name and its own refresh
loop, exactly as two pods sharing a Qdrant server. Writes go to one replica, reads
to the other, which knows only what it re-reads from the shared state.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from qdrant_client import QdrantClient

from groundwire.retriever.v1 import retriever_pb2_grpc
from groundwire_core.errors import Unavailable
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.server import serving
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_retriever.domain import (
    Chunk,
    ChunkVectors,
    CollectionSpec,
    SearchPath,
    SearchQuery,
)
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings
from groundwire_retriever.store.qdrant import QdrantEngine
from groundwire_retriever.store.replicas import STATE_COLLECTION, ReplicaPolicy, WriteLeases
from groundwire_retriever.store.versioned import VersionedStore
from groundwire_retriever.store_wiring import qdrant_store
from tests.integration.retriever.test_atomic_reingest import COLLECTION, document, ingest, search

# fast timings for tests: refresh < stale-after < grace
TIMINGS = {
    "replica_refresh_s": 0.03,
    "replica_stale_after_s": 0.2,
    "replica_grace_s": 0.25,
    "replica_lease_s": 2.0,
}


@pytest.fixture
async def embedder(minilm_dir: Path) -> AsyncIterator[str]:
    settings = EmbedderSettings(port=0, model_dir=minilm_dir)
    async with serving(EmbedderService(settings), settings) as port:
        yield f"127.0.0.1:{port}"


@asynccontextmanager
async def replica(
    embedder: str, client: QdrantClient, holder: str, data: Path
) -> AsyncIterator[retriever_pb2_grpc.RetrieverServiceStub]:
    settings = RetrieverSettings(
        port=0,
        data_path=data,
        qdrant_url=":memory:",
        replicas=True,
        embedder_addr=embedder,
        chunk_min_tokens=16,
        chunk_max_tokens=48,
        chunk_overlap_tokens=0,
        **TIMINGS,
    )
    store = qdrant_store(settings, ":memory:", client=client, holder=holder)
    async with AsyncExitStack() as stack:
        port = await stack.enter_async_context(
            serving(RetrieverService(settings, store=store), settings)
        )
        channel = await stack.enter_async_context(create_channel(f"127.0.0.1:{port}"))
        yield retriever_pb2_grpc.RetrieverServiceStub(channel)


async def until(check: Callable[[], Any], seconds: float = 3.0) -> None:
    """Poll an async check until it is true (a replica's refresh is asynchronous)."""
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, "the reading replica never caught up"
        await asyncio.sleep(0.02)


async def test_reads_on_the_other_replica_never_see_zero_or_mixed_generations(
    embedder: str, tmp_path: Path
) -> None:
    client = QdrantClient(location=":memory:")
    async with (
        replica(embedder, client, "writer", tmp_path / "w") as writer,
        replica(embedder, client, "reader", tmp_path / "r") as reader,
    ):
        steady = (await ingest(writer, [document("steady", 1)])).documents[0].chunks
        chunks_of = {0: (await ingest(writer, [document("doc", 0)])).documents[0].chunks}

        async def caught_up() -> bool:
            try:
                seen = await search(reader, ["doc", "steady"])
            except grpc.aio.AioRpcError as error:  # not created there yet
                assert error.code() == grpc.StatusCode.NOT_FOUND
                return False
            return set(seen.by_source) == {"doc", "steady"}

        await until(caught_up)
        observed: list[tuple[int, int]] = []
        problems: list[str] = []
        stop = asyncio.Event()

        refused: list[str] = []

        async def read_loop() -> None:
            while not stop.is_set():
                try:
                    seen = await search(reader, ["doc", "steady"])
                except grpc.aio.AioRpcError as error:
                    # a safe answer: the replica's refresh thread (or this read) lost
                    # the race for local mode's one lock for longer than the
                    # test-sized bounds, and the replica refused rather than guess
                    assert error.code() == grpc.StatusCode.UNAVAILABLE, error
                    details = error.details() or ""
                    assert "shared state" in details or "grace period" in details, details
                    refused.append(details)
                    await asyncio.sleep(0.01)
                    continue
                found = seen.by_source.get("doc", [])
                if not found or len(set(found)) != 1:
                    problems.append(f"saw {sorted(found)}")
                else:
                    observed.append((found[0], len(found)))
                if seen.by_source.get("steady", []) != [1] * steady:
                    problems.append(f"the other source changed: {seen.by_source.get('steady')}")

        loops = [asyncio.create_task(read_loop()) for _ in range(2)]
        try:
            for gen in range(1, 21):
                report = await ingest(writer, [document("doc", gen)])
                assert report.updated == 1, report
                chunks_of[gen] = report.documents[0].chunks
        finally:
            stop.set()
            await asyncio.gather(*loops)

        assert problems == []
        assert len(refused) < len(observed) / 4, refused
        assert len(set(chunks_of.values())) > 1, "generations differ in size"
        assert len(observed) >= 20 and len({m for m, _ in observed}) >= 5, observed
        for marker, count in observed:
            assert count == chunks_of[marker], f"partial set of generation {marker}"

        # a third replica dies after writing its chunks and before its switch: its
        # revision stays pending (hidden) in the shared state; re-ingesting converges
        with store(client, "killed") as (dying, _):
            dying.stage_source(COLLECTION, "doc", rows("doc", 99, 7, dims=384))
        report = await ingest(writer, [document("doc", 21)])
        assert report.updated == 1
        chunks_of[21] = report.documents[0].chunks
        expected = {"doc": [21] * chunks_of[21], "steady": [1] * steady}

        async def final() -> bool:
            seen = (await search(reader)).by_source
            assert 99 not in seen.get("doc", []), "the dead ingest's chunks showed"
            return seen == expected

        await until(final)


class FreezableEngine:
    """The real engine, with a switch that blocks its next ``facet`` call: a writer
    frozen (a GC pause, a stopped VM) in the middle of a write, holding its lease."""

    def __init__(self, engine: QdrantEngine) -> None:
        self._engine = engine
        self.frozen = threading.Event()
        self.thaw = threading.Event()
        self.armed = False

    def facet(self, *args: Any, **kwargs: Any) -> dict[str, int]:
        if self.armed:
            self.armed = False
            self.frozen.set()
            self.thaw.wait(30)
        return self._engine.facet(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


POLICY = {"refresh_s": 0.03, "stale_after_s": 0.25, "grace_s": 0.3, "lease_s": 0.5}


@contextmanager
def store(
    client: QdrantClient, holder: str, *, away: threading.Event | None = None
) -> Iterator[tuple[VersionedStore, FreezableEngine]]:
    """A replica's store on the shared client; ``away`` set: the shared state cannot
    be read (a network partition between this replica and Qdrant)."""
    engine = QdrantEngine(":memory:", client=client, remove_orphans=False)
    frozen = FreezableEngine(engine)

    def session(action: str) -> Any:
        if away is not None and away.is_set():
            raise Unavailable("the Qdrant server cannot be reached", dependency="qdrant")
        return engine.session(action)

    leases = WriteLeases(session, ReplicaPolicy(**POLICY, holder=holder), catalog=engine.catalog)
    versioned = VersionedStore(frozen, leases=leases)  # type: ignore[arg-type]
    versioned.open()
    try:
        yield versioned, frozen
    finally:
        versioned.close()


def rows(source: str, marker: int, n: int, dims: int = 4) -> list[tuple[Chunk, ChunkVectors]]:
    return [
        (
            Chunk(chunk_id=str(uuid.uuid4()), source_id=source, text=f"zebra mk{marker} part {i}"),
            ChunkVectors(dense=tuple([0.1] * (dims - 1) + [1.0])),
        )
        for i in range(n)
    ]


def markers(versioned: VersionedStore) -> list[str]:
    hits = versioned.search(
        COLLECTION, SearchQuery(text="zebra", paths=frozenset({SearchPath.BM25}))
    ).hits
    return sorted(h.chunk.text.split()[1] for h in hits)


async def test_a_writer_frozen_past_its_lease_cannot_write_after_another_took_over() -> None:
    client = QdrantClient(location=":memory:")
    with store(client, "a") as (a, a_engine), store(client, "b") as (b, _):
        a.create_collection(CollectionSpec(name=COLLECTION, dense_dims=4))
        a.publish_source(a.stage_source(COLLECTION, "doc", rows("doc", 1, 2)))
        staged = a.stage_source(COLLECTION, "doc", rows("doc", 2, 3))

        # a publishes, takes the lease, and freezes before its switch is saved
        a_engine.armed = True
        outcome: list[BaseException | None] = []

        def publish() -> None:
            try:
                a.publish_source(staged)
                outcome.append(None)
            except BaseException as error:
                outcome.append(error)

        thread = threading.Thread(target=publish)
        thread.start()
        try:
            assert await asyncio.to_thread(a_engine.frozen.wait, 10)
            # b waits for the lease to expire (term + clock-skew margin), then fences a
            started = time.monotonic()
            await asyncio.to_thread(
                lambda: b.publish_source(b.stage_source(COLLECTION, "doc", rows("doc", 3, 4)))
            )
            assert time.monotonic() - started >= POLICY["lease_s"]
        finally:
            a_engine.thaw.set()
            await asyncio.to_thread(thread.join, 30)

        assert len(outcome) == 1 and isinstance(outcome[0], Unavailable), outcome
        assert "lost its write lease" in str(outcome[0])
        # a's late switch did not land: b's source stays; a's revision stays hidden
        assert markers(b) == ["mk3"] * 4
        await asyncio.sleep(POLICY["stale_after_s"])
        assert markers(a) == ["mk3"] * 4
        state = client.scroll(STATE_COLLECTION, with_payload=True)[0][0].payload or {}
        assert state["holder"] == "b" and state["token"] >= 2
        assert staged.revision in state["meta"]["revisions"]["pending"]


async def test_a_replica_that_cannot_refresh_stops_serving_with_unavailable() -> None:
    client = QdrantClient(location=":memory:")
    away = threading.Event()
    with store(client, "a") as (a, _), store(client, "b", away=away) as (b, _):
        a.create_collection(CollectionSpec(name=COLLECTION, dense_dims=4))
        a.publish_source(a.stage_source(COLLECTION, "doc", rows("doc", 1, 2)))
        await asyncio.sleep(POLICY["refresh_s"] * 5)
        assert markers(b) == ["mk1"] * 2
        away.set()
        await asyncio.sleep(POLICY["stale_after_s"] + POLICY["refresh_s"] * 2)
        with pytest.raises(Unavailable, match="has not read the shared state"):
            markers(b)
        assert markers(a) == ["mk1"] * 2, "the replica that can refresh serves on"
        away.clear()
        await asyncio.sleep(POLICY["refresh_s"] * 5)
        assert markers(b) == ["mk1"] * 2, "it serves again once it has caught up"
