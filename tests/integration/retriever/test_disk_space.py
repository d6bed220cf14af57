"""A nearly full data disk and a vanished data folder, on the real retriever.

The retriever runs as its own process (``python -m groundwire_retriever``: a SIGBUS
from the engine would kill it, not pytest) with qdrant-edge on a small tmpfs and the
real MiniLM embedder. Before the disk is full it refuses writes with
``insufficient_storage`` (RESOURCE_EXHAUSTED) naming its data path, also part-way
through a long ingest; it stays up, keeps answering searches, says LOW DISK in Info
while staying ready, and accepts writes again once space is freed.

The tmpfs is 128 MiB, not smaller: on tmpfs the engine's in-memory files are
allocated in full, and one collection takes ~40 MiB of it (``store/disk.py``).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.grpc.client import check_health, create_channel
from groundwire_core.grpc.errors import CODE_KEY
from groundwire_core.grpc.server import serving
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings

COLLECTION = "disk"
READINESS = "groundwire.retriever.v1.RetrieverService"
MIB = 1024 * 1024
FLOOR_MIB = 8


@pytest.fixture
async def embedder(minilm_dir: Path) -> AsyncIterator[str]:
    settings = EmbedderSettings(port=0, model_dir=minilm_dir)
    async with serving(EmbedderService(settings), settings) as port:
        yield f"127.0.0.1:{port}"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 128 MiB tmpfs, unmounted afterwards (the retriever on it stops first)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


@dataclass
class Retriever:
    process: asyncio.subprocess.Process
    stub: retriever_pb2_grpc.RetrieverServiceStub
    channel: grpc.aio.Channel
    data: Path
    log: Path


@pytest.fixture
async def retriever(embedder: str, small_disk: Path, tmp_path: Path) -> AsyncIterator[Retriever]:
    data = small_disk / "qdrant"
    ready = tmp_path / "retriever.port"
    log = tmp_path / "retriever.log"  # not on the small disk
    env = {
        **os.environ,
        "GROUNDWIRE_RETRIEVER_PORT": "0",
        "GROUNDWIRE_RETRIEVER_DATA_PATH": str(data),
        "GROUNDWIRE_RETRIEVER_EMBEDDER_ADDR": embedder,
        "GROUNDWIRE_RETRIEVER_MIN_FREE_DISK_MIB": str(FLOOR_MIB),
        "GROUNDWIRE_RETRIEVER_READY_FILE": str(ready),
        "GROUNDWIRE_RETRIEVER_HEALTH_CHECK_INTERVAL_S": "0.1",
        "GROUNDWIRE_RETRIEVER_OPTIMIZE_AFTER_CHUNKS": "0",
        "GROUNDWIRE_RETRIEVER_SHUTDOWN_GRACE_S": "1",
    }
    with log.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "groundwire_retriever",
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        for _ in range(600):  # the embedder serves on this loop meanwhile
            if ready.exists() or process.returncode is not None:
                break
            await asyncio.sleep(0.05)
        assert ready.exists(), f"the retriever did not start:\n{log.read_text()}"
        async with create_channel(f"127.0.0.1:{ready.read_text()}") as channel:
            yield Retriever(
                process, retriever_pb2_grpc.RetrieverServiceStub(channel), channel, data, log
            )
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), 15)


def _doc(
    source_id: str, text: str, metadata: dict[str, str] | None = None
) -> retriever_pb2.Document:
    return retriever_pb2.Document(
        source_id=source_id,
        filename=f"{source_id}.md",
        content=f"# {source_id}\n\n{text}\n".encode(),
        metadata=metadata or {},
    )


async def _ingest(
    stub: retriever_pb2_grpc.RetrieverServiceStub,
    docs: list[retriever_pb2.Document],
    *,
    create: bool = False,
) -> tuple[list[retriever_pb2.IngestEvent], grpc.aio.AioRpcError | None]:
    """The events an ingest streamed, and the error it ended with (None: it finished)."""
    events: list[retriever_pb2.IngestEvent] = []
    request = retriever_pb2.IngestRequest(
        collection=COLLECTION, documents=docs, create_collection=create
    )
    try:
        async for event in stub.Ingest(request):
            events.append(event)
    except grpc.aio.AioRpcError as error:
        return events, error
    return events, None


async def _hits(stub: retriever_pb2_grpc.RetrieverServiceStub, text: str) -> set[str]:
    reply = await stub.Search(
        retriever_pb2.SearchRequest(
            collection=COLLECTION, text=text, paths=[retriever_pb2.SEARCH_PATH_BM25], limit=50
        )
    )
    return {hit.chunk.source_id for hit in reply.hits}


def _free(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def _fill(filler: Path, size: int) -> None:
    """Grows ``filler`` by ``size`` bytes (tmpfs: real pages, not a hole)."""
    block = b"\xa5" * MIB
    with filler.open("ab") as fh:
        while size > 0:
            fh.write(block[: min(size, MIB)])
            size -= MIB


def _assert_refused(error: grpc.aio.AioRpcError | None, data: Path) -> None:
    assert error is not None, "the write was accepted"
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
    trailing = dict(error.trailing_metadata() or ())
    assert trailing.get(CODE_KEY) == "insufficient_storage"
    details = error.details() or ""
    assert str(data) in details and "MIN_FREE_DISK_MIB" in details, details


async def test_a_nearly_full_disk_refuses_writes_and_keeps_searching(
    retriever: Retriever, small_disk: Path
) -> None:
    stub, data = retriever.stub, retriever.data
    floor = FLOOR_MIB * MIB
    events, error = await _ingest(
        stub, [_doc("zebra", "The keeper feeds the zebra herd at dawn.")], create=True
    )
    assert error is None and events[-1].report.ingested == 1
    assert await _hits(stub, "zebra") == {"zebra"}
    assert (await stub.Info(retriever_pb2.InfoRequest())).storage_warning == ""

    # 1.5 MiB above the floor, then a long ingest of documents that carry 100 KB of
    # (incompressible) metadata on their chunk: each is estimated at ~0.5 MiB and
    # takes ~0.1 MiB (its WAL record; on tmpfs the payload pages were allocated when
    # the collection was made), so about ten go in (11 here) and the guard stops the
    # stream part-way, well before the 30th.
    filler = small_disk / "filler"
    _fill(filler, _free(small_disk) - floor - 3 * MIB // 2)
    docs = [
        _doc(
            f"bulk-{i}", f"Bulk document {i} about antelopes.", {"blob": secrets.token_hex(50_000)}
        )
        for i in range(30)
    ]
    events, error = await _ingest(stub, docs)
    _assert_refused(error, data)
    written = [e for e in events if e.HasField("progress")]
    assert 1 <= len(written) < len(docs)
    assert all(
        e.progress.document.status == retriever_pb2.DOCUMENT_STATUS_INGESTED for e in written
    )
    assert retriever.process.returncode is None  # alive: no SIGBUS
    assert _free(small_disk) >= floor // 2  # the engine never came near a full disk

    # under the floor: every write refused, health says why, searches go on
    _fill(filler, max(0, _free(small_disk) - floor + MIB))
    info = await stub.Info(retriever_pb2.InfoRequest())
    assert info.storage_warning.startswith("LOW DISK") and str(data) in info.storage_warning
    ok, _, _ = await check_health(retriever.channel, READINESS, timeout_s=2)
    assert ok  # ready: searches still work
    _, error = await _ingest(stub, [_doc("late", "A late note on zebras.")])
    _assert_refused(error, data)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.DeleteBySource(
            retriever_pb2.DeleteBySourceRequest(collection=COLLECTION, source_id="zebra")
        )
    _assert_refused(refused.value, data)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.CreateCollection(retriever_pb2.CreateCollectionRequest(name="another"))
    _assert_refused(refused.value, data)
    assert await _hits(stub, "zebra") == {"zebra"}
    assert await _hits(stub, "antelopes") == {e.progress.document.source_id for e in written}

    # space freed: writes resume at once
    filler.unlink()
    assert (await stub.Info(retriever_pb2.InfoRequest())).storage_warning == ""
    events, error = await _ingest(stub, [_doc("late", "A late note on zebras.")])
    assert error is None and events[-1].report.ingested == 1
    assert await _hits(stub, "zebra") == {"zebra", "late"}
    deleted = await stub.DeleteBySource(
        retriever_pb2.DeleteBySourceRequest(collection=COLLECTION, source_id="late")
    )
    assert deleted.deleted == 1
    assert retriever.process.returncode is None


async def test_health_and_search_agree_when_the_data_folder_is_gone(
    embedder: str, tmp_path: Path
) -> None:
    """Searches fail as readiness does while the data folder is away (the engine would
    otherwise answer from files that a restart would not find), and both come back
    with it."""
    data = tmp_path / "data"
    settings = RetrieverSettings(
        port=0, data_path=data, embedder_addr=embedder, health_check_interval_s=0.05
    )
    async with (
        serving(RetrieverService(settings), settings) as port,
        create_channel(f"127.0.0.1:{port}") as channel,
    ):
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        _, error = await _ingest(stub, [_doc("zebra", "The zebra herd at dawn.")], create=True)
        assert error is None
        assert await _hits(stub, "zebra") == {"zebra"}

        data.rename(tmp_path / "elsewhere")
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await _hits(stub, "zebra")
        assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
        assert str(data) in (failed.value.details() or "")
        for _ in range(100):
            ok, _, _ = await check_health(channel, READINESS, timeout_s=2)
            if not ok:
                break
            await asyncio.sleep(0.02)
        assert not ok

        (tmp_path / "elsewhere").rename(data)
        for _ in range(100):
            ok, _, _ = await check_health(channel, READINESS, timeout_s=2)
            if ok:
                break
            await asyncio.sleep(0.02)
        assert ok
        assert await _hits(stub, "zebra") == {"zebra"}
