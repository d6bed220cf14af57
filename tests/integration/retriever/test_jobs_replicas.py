"""Jobs any replica serves (issue 29, acceptance 2 and 3): two retriever servers share
one system of record (PostgreSQL, then SQLite: the ``database_url`` fixture) and one
Qdrant store, as two pods behind one Service.

There is no Qdrant server binary here: the two in-process replicas share one
qdrant-client local-mode instance (the same client API a server is driven by), as
``test_replicas`` does. A worker that is SIGKILLed must be another process, and two
processes cannot share a local-mode instance or an embedded engine's folder (it is
locked): the killed retriever runs as ``python -m groundwire_retriever`` on its own
embedded data folder, sharing only the database with the replica that reaps its job
— which is all the reaper needs.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.database import create_engine
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.server import serving
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_retriever.db.jobs import JobTables
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings
from groundwire_retriever.store_wiring import qdrant_store
from tests.integration.retriever.test_jobs import documents, finished

Stub = retriever_pb2_grpc.RetrieverServiceStub
COLLECTION = "shared"
# fast timings for tests: a replica looks for work every 0.1 s
JOBS = {"job_poll_s": 0.1, "job_heartbeat_s": 0.2, "job_stale_after_s": 6.0}
"""A worker beats every 0.2 s and is reaped after 6 s without one: the in-process
replicas share one event loop with the embedder, and a loaded 2-core machine stalled it
past a 1.5 s bound in CI (a live job reaped)."""
REPLICAS = {
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
    embedder: str, client: QdrantClient, holder: str, data: Path, database_url: str
) -> AsyncIterator[Stub]:
    """A retriever server on the shared store and the shared system of record."""
    settings = RetrieverSettings(
        port=0,
        data_path=data,
        qdrant_url=":memory:",
        replicas=True,
        embedder_addr=embedder,
        database_url=database_url,
        **REPLICAS,
        **JOBS,
    )
    store = qdrant_store(settings, ":memory:", client=client, holder=holder)
    async with AsyncExitStack() as stack:
        port = await stack.enter_async_context(
            serving(RetrieverService(settings, store=store), settings)
        )
        channel = await stack.enter_async_context(create_channel(f"127.0.0.1:{port}"))
        yield Stub(channel)


def ingest(docs: list[retriever_pb2.Document]) -> retriever_pb2.StartJobRequest:
    return retriever_pb2.StartJobRequest(
        collection=COLLECTION,
        ingest=retriever_pb2.IngestJob(documents=docs, create_collection=True),
    )


async def test_a_job_started_on_one_replica_is_read_watched_and_listed_on_the_other(
    embedder: str, database_url: str, tmp_path: Path
) -> None:
    client = QdrantClient(location=":memory:")
    async with (
        replica(embedder, client, "a", tmp_path / "a", database_url) as a,
        replica(embedder, client, "b", tmp_path / "b", database_url) as b,
    ):
        job = await a.StartJob(ingest(documents(12)))
        seen = await b.GetJob(retriever_pb2.GetJobRequest(id=job.id))
        assert seen.id == job.id and seen.collection == COLLECTION
        done = await finished(b, job.id)  # watched to the end through B
        assert done.state == retriever_pb2.JOB_STATE_SUCCEEDED, done.error
        assert (done.counts.ingested, len(done.documents)) == (12, 12)
        listed = await b.ListJobs(retriever_pb2.ListJobsRequest(collection=COLLECTION))
        assert [j.id for j in listed.jobs] == [job.id]
        again = await a.GetJob(retriever_pb2.GetJobRequest(id=job.id))
        assert again == await b.GetJob(retriever_pb2.GetJobRequest(id=job.id)), "same answer"
        # and the documents are in the store both replicas serve
        sources = await b.ListSources(retriever_pb2.ListSourcesRequest(collection=COLLECTION))
        assert len(sources.sources) == 12


async def test_two_jobs_of_a_collection_on_two_replicas_run_one_after_the_other(
    embedder: str, database_url: str, tmp_path: Path
) -> None:
    client = QdrantClient(location=":memory:")
    async with (
        replica(embedder, client, "a", tmp_path / "a", database_url) as a,
        replica(embedder, client, "b", tmp_path / "b", database_url) as b,
    ):
        first = await a.StartJob(ingest(documents(30)))
        second = await b.StartJob(ingest(documents(30, edition=2)))
        both_running, turn = 0, 0
        while True:  # sample both while they run, on each replica in turn: never two
            # running at once (one ListJobs is one read of both; two GetJobs in a row
            # are two, and a loaded machine saw the first end and the second start
            # between them)
            listed = await (a, b)[turn % 2].ListJobs(
                retriever_pb2.ListJobsRequest(collection=COLLECTION)
            )
            turn += 1
            states = {job.id: job.state for job in listed.jobs}
            both_running += [states[first.id], states[second.id]] == [
                retriever_pb2.JOB_STATE_RUNNING
            ] * 2
            if states[second.id] not in (
                retriever_pb2.JOB_STATE_QUEUED,
                retriever_pb2.JOB_STATE_RUNNING,
            ):
                break
            await asyncio.sleep(0.05)
        done_first = await finished(b, first.id)
        done_second = await finished(a, second.id)
        assert both_running == 0
        assert done_first.state == done_second.state == retriever_pb2.JOB_STATE_SUCCEEDED
        assert done_first.started_at < done_second.started_at, "in order"
        # one after the other: each time is its writer's clock read just before its write
        # waits for the database, so the second's start may read up to that wait earlier
        # than the first's end (a loaded CI machine: 57 ms); never two running, above
        assert done_first.finished_at <= done_second.started_at + WRITE_WAIT_SLACK_S
        assert (done_second.counts.updated, done_second.counts.ingested) == (30, 0)


async def test_a_cancel_sent_to_another_replica_stops_the_job_where_it_runs(
    embedder: str, database_url: str, tmp_path: Path
) -> None:
    client = QdrantClient(location=":memory:")
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(
            replica(embedder, client, "a", tmp_path / "a", database_url)
        )
        job = await a.StartJob(ingest(documents(200)))
        async for update in a.WatchJob(retriever_pb2.GetJobRequest(id=job.id)):
            if update.counts.done >= 5:  # running on A: B is not up yet
                break
        b = await stack.enter_async_context(
            replica(embedder, client, "b", tmp_path / "b", database_url)
        )
        asked = await b.CancelJob(retriever_pb2.CancelJobRequest(id=job.id))
        assert asked.cancel_requested or asked.state == retriever_pb2.JOB_STATE_CANCELLED
        final = await finished(b, job.id)
        assert final.state == retriever_pb2.JOB_STATE_CANCELLED, final.error
        assert 5 <= final.counts.done < 200 and len(final.documents) == final.counts.done
        sources = await b.ListSources(
            retriever_pb2.ListSourcesRequest(collection=COLLECTION, limit=1000)
        )
        assert {s.source_id for s in sources.sources} == {d.source_id for d in final.documents}


@asynccontextmanager
async def retriever_process(
    embedder: str, data: Path, database_url: str, logs: Path
) -> AsyncIterator[tuple[asyncio.subprocess.Process, Stub]]:
    ready = logs / "retriever.port"
    log = logs / "retriever.log"
    env = {
        **os.environ,
        "GROUNDWIRE_RETRIEVER_PORT": "0",
        "GROUNDWIRE_RETRIEVER_DATA_PATH": str(data),
        "GROUNDWIRE_RETRIEVER_EMBEDDER_ADDR": embedder,
        "GROUNDWIRE_RETRIEVER_READY_FILE": str(ready),
        "GROUNDWIRE_RETRIEVER_DATABASE_URL": database_url,
        "GROUNDWIRE_RETRIEVER_OPTIMIZE_AFTER_CHUNKS": "0",
        **{f"GROUNDWIRE_RETRIEVER_{k.upper()}": str(v) for k, v in JOBS.items()},
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
        for _ in range(1200):  # the embedder serves on this loop meanwhile
            if ready.exists() or process.returncode is not None:
                break
            await asyncio.sleep(0.05)
        assert ready.exists(), f"the retriever did not start:\n{log.read_text()}"
        async with create_channel(f"127.0.0.1:{ready.read_text()}") as channel:
            yield process, Stub(channel)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_a_killed_workers_job_is_failed_by_another_replica_within_the_bound(
    embedder: str, database_url: str, tmp_path: Path
) -> None:
    client = QdrantClient(location=":memory:")
    async with AsyncExitStack() as stack:
        process, doomed = await stack.enter_async_context(
            retriever_process(embedder, tmp_path / "killed", database_url, tmp_path)
        )
        job = await doomed.StartJob(ingest(documents(300)))
        async for update in doomed.WatchJob(retriever_pb2.GetJobRequest(id=job.id)):
            if update.counts.done >= 5:  # running there (and only there: B is not up)
                break
        b = await stack.enter_async_context(
            replica(embedder, client, "b", tmp_path / "b", database_url)
        )
        process.send_signal(signal.SIGKILL)
        await process.wait()
        failed = await finished(b, job.id)  # never running forever: this returns
    assert failed.state == retriever_pb2.JOB_STATE_FAILED
    assert "stopped (no heartbeat" in failed.error, failed.error
    assert 5 <= failed.counts.done < 300 and len(failed.documents) == failed.counts.done
    # the bound, from the database's own times: the reaper failed it one stale bound
    # after the killed worker's last beat, plus at most one reaper round (and the
    # round's own queries: REAP_SLACK_S)
    engine = create_engine(database_url)
    try:
        row = await JobTables(engine).progress(job.id)
    finally:
        await engine.dispose()
    late = row.finished_at - row.heartbeat_at
    assert JOBS["job_stale_after_s"] <= late, "a live worker is never reaped early"
    assert late <= JOBS["job_stale_after_s"] + JOBS["job_poll_s"] + REAP_SLACK_S, late


WRITE_WAIT_SLACK_S = 1.0
"""How long before its write commits a writer may read the time it records."""
REAP_SLACK_S = 1.0
"""A reaper round's queries and a busy 2-core machine's scheduling."""
