"""Atomic re-ingest through the real retriever over gRPC, with the real MiniLM embedder.

A reader loop searching one source while it is re-ingested 20 times never sees zero
chunks, a partial set or a mix of generations (each generation's text carries its
marker ``mk<N>``); a killed ingest leaves the old generation serving and re-running
converges; a full re-index switches readers at once, and a cancelled one changes
nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import qdrant_edge as qe

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.server import serving
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings

COLLECTION = "live"
MARKER = re.compile(r"\bmk(\d+)\b")


def document(source_id: str, gen: int) -> retriever_pb2.Document:
    """Generation ``gen`` of a source: 2-5 sections (so the chunk count changes), each
    naming the generation's marker."""
    sections = "\n\n".join(
        f"## Part {i}\n\nzebra mk{gen} crossing number {i} of edition {gen}: the keeper "
        f"feeds the zebra herd at dawn and records edition {gen} in the ledger."
        for i in range(2 + gen % 4)
    )
    return retriever_pb2.Document(
        source_id=source_id,
        filename=f"{source_id}.md",
        content=f"# Zebra manual {source_id}\n\n{sections}\n".encode(),
    )


@dataclass(frozen=True)
class Seen:
    """What one search returned, by source: the markers of its hits."""

    by_source: dict[str, list[int]]

    @property
    def markers(self) -> set[int]:
        return {m for found in self.by_source.values() for m in found}


async def search(
    stub: retriever_pb2_grpc.RetrieverServiceStub, sources: Iterable[str] = ()
) -> Seen:
    filters = [retriever_pb2.FieldFilter(field="source_id", any_of=list(sources))]
    reply = await stub.Search(
        retriever_pb2.SearchRequest(
            collection=COLLECTION,
            text="zebra",
            paths=[retriever_pb2.SEARCH_PATH_BM25],
            filters=filters if sources else [],
            limit=200,
            path_limit=200,
        )
    )
    by_source: dict[str, list[int]] = {}
    for hit in reply.hits:
        found = {int(m) for m in MARKER.findall(hit.chunk.text)}
        assert len(found) == 1, f"a chunk with markers {found}: {hit.chunk.text!r}"
        by_source.setdefault(hit.chunk.source_id, []).append(found.pop())
    return Seen(by_source)


async def ingest(
    stub: retriever_pb2_grpc.RetrieverServiceStub,
    docs: list[retriever_pb2.Document],
    *,
    full_reindex: bool = False,
) -> retriever_pb2.IngestReport:
    request = retriever_pb2.IngestRequest(
        collection=COLLECTION, documents=docs, create_collection=True, full_reindex=full_reindex
    )
    events = [e async for e in stub.Ingest(request)]
    assert [e.progress.done for e in events[:-1]] == list(range(1, len(docs) + 1))
    return events[-1].report


@pytest.fixture
async def embedder(minilm_dir: Path) -> AsyncIterator[str]:
    settings = EmbedderSettings(port=0, model_dir=minilm_dir)
    async with serving(EmbedderService(settings), settings) as port:
        yield f"127.0.0.1:{port}"


@asynccontextmanager
async def retriever(
    embedder: str, data_path: Path, qdrant_url: str | None = None
) -> AsyncIterator[retriever_pb2_grpc.RetrieverServiceStub]:
    settings = RetrieverSettings(
        port=0,
        data_path=data_path,
        qdrant_url=qdrant_url,
        embedder_addr=embedder,
        chunk_min_tokens=16,
        chunk_max_tokens=48,
        chunk_overlap_tokens=0,
    )
    async with AsyncExitStack() as stack:
        port = await stack.enter_async_context(serving(RetrieverService(settings), settings))
        channel = await stack.enter_async_context(create_channel(f"127.0.0.1:{port}"))
        yield retriever_pb2_grpc.RetrieverServiceStub(channel)


@pytest.mark.parametrize("engine", ["edge", "qdrant"])
async def test_reader_never_sees_zero_or_mixed_generations(
    embedder: str, tmp_path: Path, engine: str
) -> None:
    """On both engines: the embedded one, and qdrant-client's local mode selected by
    QDRANT_URL=:memory:."""
    qdrant_url = ":memory:" if engine == "qdrant" else None
    async with retriever(embedder, tmp_path / "data", qdrant_url) as stub:
        info = await stub.Info(retriever_pb2.InfoRequest())
        assert (info.engine, info.location) == (
            engine,
            ":memory:" if qdrant_url else str(tmp_path / "data"),
        )
        chunks_of: dict[int, int] = {}
        report = await ingest(stub, [document("steady", 1)])
        steady_chunks = report.documents[0].chunks
        report = await ingest(stub, [document("doc", 0)])
        chunks_of[0] = report.documents[0].chunks

        observed: list[tuple[int, int]] = []
        problems: list[str] = []
        stop = asyncio.Event()

        async def reader() -> None:
            while not stop.is_set():
                seen = await search(stub, ["doc", "steady"])
                found = seen.by_source.get("doc", [])
                if not found or len(set(found)) != 1:
                    problems.append(f"saw {sorted(found)}")
                else:
                    observed.append((found[0], len(found)))
                if seen.by_source.get("steady", []) != [1] * steady_chunks:
                    problems.append(f"the other source changed: {seen.by_source.get('steady')}")

        readers = [asyncio.create_task(reader()) for _ in range(2)]
        try:
            for gen in range(1, 21):
                report = await ingest(stub, [document("doc", gen)])
                assert report.updated == 1 and report.ingested == 0, report
                chunks_of[gen] = report.documents[0].chunks
                await asyncio.sleep(0)
        finally:
            stop.set()
            await asyncio.gather(*readers)

        assert problems == []
        assert len(set(chunks_of.values())) > 1, "generations differ in size"
        assert len(observed) >= 20 and len({m for m, _ in observed}) >= 5, observed
        for marker, count in observed:
            assert count == chunks_of[marker], f"partial set of generation {marker}"
        final = await search(stub, ["doc"])
        assert final.by_source["doc"] == [20] * chunks_of[20]
        again = await ingest(stub, [document("doc", 20)])
        assert again.unchanged == 1, "re-ingesting the same content is a no-op"
        described = await stub.DescribeCollection(
            retriever_pb2.DescribeCollectionRequest(name=COLLECTION)
        )
        assert (described.chunks, described.sources) == (chunks_of[20] + steady_chunks, 2)


_KILLED = textwrap.dedent(
    """
    import uuid
    from pathlib import Path
    from groundwire_retriever.domain import Chunk, ChunkVectors
    from groundwire_retriever.store import EdgeStore
    store = EdgeStore(Path({data!r}))
    store.open()
    rows = [
        (
            Chunk(chunk_id=str(uuid.uuid4()), source_id="doc", text=f"zebra mk99 part {{i}}"),
            ChunkVectors(dense=tuple([0.1] * 383 + [1.0])),
        )
        for i in range(7)
    ]
    store.stage_source({collection!r}, "doc", rows)
    print("STAGED", flush=True)
    import time; time.sleep(60)
    """
)


def _stage_and_get_killed(data: Path) -> None:
    """An ingest in another process, SIGKILLed after its new chunks are written and
    before the switch."""
    script = _KILLED.format(data=str(data), collection=COLLECTION)
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            if proc.stdout.readline().strip() != "STAGED":
                proc.wait(timeout=30)
                pytest.fail(f"the writer did not stage: {proc.stderr.read()[-2000:]}")
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def _points_on_disk(data: Path) -> int:
    directory = data / "collections" / COLLECTION
    shard_dir = json.loads((directory / "collection.json").read_text())["shard"]
    shard = qe.EdgeShard.load(str(directory / shard_dir))
    try:
        return shard.count(qe.CountRequest(exact=True))
    finally:
        shard.close()


async def test_killed_ingest_leaves_the_old_generation_and_rerun_converges(
    embedder: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    async with retriever(embedder, data) as stub:
        old = (await ingest(stub, [document("doc", 1)])).documents[0].chunks
    await asyncio.to_thread(_stage_and_get_killed, data)
    assert _points_on_disk(data) == old + 7, "the dead ingest's chunks are on disk"

    async with retriever(embedder, data) as stub:
        seen = await search(stub)
        assert seen.by_source == {"doc": [1] * old}, "the old generation serves"
        report = await ingest(stub, [document("doc", 2)])
        assert report.updated == 1
        new = report.documents[0].chunks
        assert (await search(stub)).by_source == {"doc": [2] * new}
    assert _points_on_disk(data) == new, "orphans and the old generation are gone"


async def test_full_reindex_switches_at_once(embedder: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with retriever(embedder, data) as stub:
        report = await ingest(stub, [document(s, 1) for s in ("a", "b", "c")])
        assert report.ingested == 3
        old = (await search(stub)).by_source
        assert set(old) == {"a", "b", "c"}

        observed: list[dict[str, list[int]]] = []
        stop = asyncio.Event()

        async def reader() -> None:
            while not stop.is_set():
                observed.append((await search(stub)).by_source)

        task = asyncio.create_task(reader())
        try:
            report = await ingest(stub, [document("a", 2), document("d", 3)], full_reindex=True)
        finally:
            stop.set()
            await task
        assert report.ingested == 2
        new = (await search(stub)).by_source
        assert set(new) == {"a", "d"} and set(new["a"]) == {2} and set(new["d"]) == {3}
        assert observed and all(seen in (old, new) for seen in observed), [
            seen for seen in observed if seen not in (old, new)
        ]
        assert len(observed) >= 3 and observed[0] == old

        # cancelled half-way: nothing changes, and the unfinished generation is removed
        call = stub.Ingest(
            retriever_pb2.IngestRequest(
                collection=COLLECTION,
                documents=[document(f"x{i}", 4) for i in range(6)],
                full_reindex=True,
            )
        )
        first = await call.read()
        assert first.progress.done == 1
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call.read()
        collection_dir = data / "collections" / COLLECTION
        for _ in range(100):
            shards = [p for p in collection_dir.iterdir() if p.name.startswith("shard")]
            if len(shards) == 1:
                break
            await asyncio.sleep(0.05)
        assert len(shards) == 1
        assert (await search(stub)).by_source == new

        # a dynamic top-k cut through the wire: only hits scoring >= 0.99 x the top one
        reply = await stub.Search(
            retriever_pb2.SearchRequest(
                collection=COLLECTION,
                text="zebra edition 3",
                paths=[retriever_pb2.SEARCH_PATH_BM25],
                fusion=retriever_pb2.FUSION_WEIGHTED,
                drop_off=0.99,
            )
        )
        uncut = await stub.Search(
            retriever_pb2.SearchRequest(
                collection=COLLECTION,
                text="zebra edition 3",
                paths=[retriever_pb2.SEARCH_PATH_BM25],
                fusion=retriever_pb2.FUSION_WEIGHTED,
            )
        )
        assert 1 <= len(reply.hits) < len(uncut.hits)
        assert [h.chunk.chunk_id for h in reply.hits] == [
            h.chunk.chunk_id for h in uncut.hits if h.score >= 0.99 * uncut.hits[0].score
        ]
        assert {h.chunk.source_id for h in reply.hits} == {"d"}
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Search(
                retriever_pb2.SearchRequest(collection=COLLECTION, text="zebra", drop_off=2.0)
            )
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_search_names_a_query_of_another_embedder_model(
    embedder: str, tmp_path: Path
) -> None:
    """Over gRPC: SearchRequest.embedder_model is checked against the model the
    collection was indexed with (MiniLM here), INVALID_ARGUMENT saying what to do."""
    async with retriever(embedder, tmp_path / "data") as stub:
        await ingest(stub, [document("doc", 1)])
        request = retriever_pb2.SearchRequest(
            collection=COLLECTION, text="zebra", paths=[retriever_pb2.SEARCH_PATH_BM25]
        )
        request.embedder_model = "sentence-transformers/all-MiniLM-L6-v2"
        assert (await stub.Search(request)).hits
        request.embedder_model = "BAAI/bge-m3"
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await stub.Search(request)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "indexed with sentence-transformers/all-MiniLM-L6-v2" in (error.value.details() or "")
    assert "full_reindex" in (error.value.details() or "")


async def test_a_title_or_metadata_change_is_an_atomic_update(
    embedder: str, tmp_path: Path
) -> None:
    """Same text, new title, URL, type or metadata: the report says updated, search
    returns the new values, and a reader never sees a mix of old and new payloads or
    no chunks at all."""

    def edition(n: int) -> retriever_pb2.Document:
        doc = document("doc", 3)  # the text never changes
        doc.title = f"Zebra manual, edition {n}"
        doc.url = f"https://zoo.example/manual/{n}"
        doc.doc_type = "guide" if n % 2 else "faq"
        doc.metadata["edition"] = str(n)
        return doc

    async with retriever(embedder, tmp_path / "data") as stub:
        first = await ingest(stub, [edition(0)])
        chunks = first.documents[0].chunks
        assert first.ingested == 1 and chunks > 1

        async def payloads() -> list[tuple[str, str, str, str]]:
            reply = await stub.Search(
                retriever_pb2.SearchRequest(
                    collection=COLLECTION,
                    text="zebra",
                    paths=[retriever_pb2.SEARCH_PATH_BM25],
                    limit=200,
                    path_limit=200,
                )
            )
            return [
                (h.chunk.title, h.chunk.url, h.chunk.doc_type, h.chunk.metadata["edition"])
                for h in reply.hits
            ]

        problems: list[str] = []
        seen: set[str] = set()
        stop = asyncio.Event()

        async def reader() -> None:
            while not stop.is_set():
                found = await payloads()
                if len(found) != chunks or len(set(found)) != 1:
                    problems.append(f"saw {len(found)} chunks: {sorted(set(found))}")
                else:
                    seen.add(found[0][3])

        task = asyncio.create_task(reader())
        try:
            for n in range(1, 9):
                report = await ingest(stub, [edition(n)])
                assert (report.updated, report.ingested, report.unchanged) == (1, 0, 0), report
                assert report.documents[0].status == retriever_pb2.DOCUMENT_STATUS_UPDATED
                assert report.documents[0].chunks == chunks
                await asyncio.sleep(0)
        finally:
            stop.set()
            await task
        assert problems == []
        assert len(seen) >= 3, seen
        assert set(await payloads()) == {
            ("Zebra manual, edition 8", "https://zoo.example/manual/8", "faq", "8")
        }
        again = await ingest(stub, [edition(8)])
        assert again.unchanged == 1 and again.documents[0].status == (
            retriever_pb2.DOCUMENT_STATUS_UNCHANGED
        )
        listed = await stub.ListSources(retriever_pb2.ListSourcesRequest(collection=COLLECTION))
        assert [(s.source_id, s.title, s.url, s.chunks) for s in listed.sources] == [
            ("doc", "Zebra manual, edition 8", "https://zoo.example/manual/8", chunks)
        ]
        read = await stub.ReadSource(
            retriever_pb2.ReadSourceRequest(collection=COLLECTION, source_id="doc")
        )
        assert [c.chunk_index for c in read.chunks] == list(range(chunks))
        assert {c.metadata["edition"] for c in read.chunks} == {"8"}
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await stub.ReadSource(
                retriever_pb2.ReadSourceRequest(collection=COLLECTION, source_id="nope")
            )
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
