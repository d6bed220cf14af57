"""Red team, round two (issue 31, defect 17): a disk filled by another writer left a job
``running`` forever — the worker died on ``database or disk is full`` while recording
a document, cancel changed nothing, and the collection's later jobs never ran.

Here the jobs' system of record (SQLite) sits on a small tmpfs that the test fills
while a job runs, then frees: the job must end ``failed`` with a reason (its own, or
the reaper's once its beat stopped), and the job queued behind it must run.
"""

from __future__ import annotations

import asyncio
import errno
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import grpc
import pytest

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.server import serving
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings
from tests.integration.retriever.test_jobs import documents, finished, start

Stub = retriever_pb2_grpc.RetrieverServiceStub


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs for the job database, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


@pytest.fixture
async def stub(minilm_dir: Path, small_disk: Path, tmp_path: Path) -> AsyncIterator[Stub]:
    async with AsyncExitStack() as stack:
        embedder = EmbedderSettings(port=0, model_dir=minilm_dir)
        e_port = await stack.enter_async_context(serving(EmbedderService(embedder), embedder))
        settings = RetrieverSettings(
            port=0,
            data_path=tmp_path / "data",  # the collections' disk is not the full one
            embedder_addr=f"127.0.0.1:{e_port}",
            jobs_path=small_disk,  # no DATABASE_URL: the SQLite file JOBS_PATH/jobs.sqlite3
            job_poll_s=0.1,
            job_heartbeat_s=0.2,
            job_stale_after_s=1.0,
        )
        port = await stack.enter_async_context(serving(RetrieverService(settings), settings))
        channel = await stack.enter_async_context(create_channel(f"127.0.0.1:{port}"))
        yield Stub(channel)


async def done_or_unavailable(stub: Stub, job_id: str) -> int | None:
    """The job's done count, or None while the job store answers UNAVAILABLE."""
    await asyncio.sleep(0.1)
    try:
        return int((await stub.GetJob(retriever_pb2.GetJobRequest(id=job_id))).counts.done)
    except grpc.aio.AioRpcError as error:
        assert error.code() == grpc.StatusCode.UNAVAILABLE, error
        return None


def fill(disk: Path) -> Path:
    """Writes a file until the disk refuses (ENOSPC); the file."""
    filler = disk / "filler"
    # unbuffered: a buffered file kept the refused bytes and raised ENOSPC again when
    # closed (a loaded CI machine)
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError as error:
            assert error.errno == errno.ENOSPC
    return filler


async def test_17_a_full_disk_fails_the_job_and_frees_its_queue(
    stub: Stub, small_disk: Path
) -> None:
    job = await start(stub, documents(120))  # type: ignore[misc]
    behind = await start(stub, documents(3, prefix="behind"))  # type: ignore[misc]
    async for update in stub.WatchJob(retriever_pb2.GetJobRequest(id=job.id)):
        if update.counts.done >= 3:
            break
    filler = fill(small_disk)
    # the worker's next record fails and it stops; meanwhile reads may fail too (each
    # SQLite connection re-creates its WAL files): UNAVAILABLE, said so, not a hang
    seen = [await done_or_unavailable(stub, job.id) for _ in range(30)]
    assert all(n is None or n < 120 for n in seen), "the disk filled while it ran"
    filler.unlink()  # the other writer's file goes: the database answers again

    failed = await finished(stub, job.id)  # never running forever: this returns
    assert failed.state == retriever_pb2.JOB_STATE_FAILED
    assert failed.error, "failed with its reason"
    assert len(failed.documents) == failed.counts.done < 120
    after = await finished(stub, behind.id)
    assert after.state == retriever_pb2.JOB_STATE_SUCCEEDED, after.error
    assert after.counts.done == 3, "the collection's queue went on"
