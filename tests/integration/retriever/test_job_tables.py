"""The job tables on SQLite and PostgreSQL: what a job keeps, how workers claim,
beat, record and end it, how the reaper fails a job whose worker stopped, and that
ownership (not the collection's name) decides who reads or cancels a job."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from groundwire_core.database import create_engine, upgrade
from groundwire_core.errors import NotFound
from groundwire_retriever.db.base import MIGRATIONS
from groundwire_retriever.db.jobs import JobTables
from groundwire_retriever.ingest.pipeline import DocumentInput
from groundwire_retriever.jobs.model import Job, JobCounts, JobDocument, JobKind, JobState
from groundwire_retriever.sync import Rename, SyncDelta


def job(n: int, collection: str = "docs", tenant: str = "acme") -> Job:
    return Job(f"{n:032x}", collection, JobKind.INGEST, JobState.QUEUED, float(n), tenant=tenant)


@pytest.fixture
async def tables(database_url: str) -> AsyncIterator[JobTables]:
    engine = create_engine(database_url)
    await upgrade(engine, MIGRATIONS)
    try:
        yield JobTables(engine)
    finally:
        await engine.dispose()


async def test_a_job_its_documents_and_its_report_round_trip(tables: JobTables) -> None:
    docs = [
        DocumentInput("a.md", b"# A\x00\xff", filename="a.md", metadata={"team": "x"}),
        DocumentInput("b.html", b"<h1>B</h1>", format="html", access=("group:hr",)),
    ]
    await tables.create(job(1), "acme", {"create_collection": True}, docs)
    assert await tables.inputs(job(1).id) == docs
    claimed = await tables.claim("w1", 10.0)
    assert claimed is not None and claimed.options == {"create_collection": True}
    assert (claimed.job.state, claimed.job.worker) == (JobState.RUNNING, "w1")
    counts = JobCounts(total=2).add(JobDocument("a.md", "ingested", 3), written=True)
    recorded = await tables.record(
        job(1).id, "w1", counts, JobDocument("a.md", "ingested", 3), 11.0
    )
    assert recorded is False, "recorded, and no cancel asked"
    assert await tables.record(job(1).id, "w2", counts, None, 11.0) is None, "not w2's"
    delta = SyncDelta(
        new=("a.md",), changed=(), unchanged=0, deleted=(), renamed=(Rename("x", "y"),)
    )
    assert await tables.finish(job(1).id, "w1", JobState.SUCCEEDED, "", 12.0, counts, delta)
    done = await tables.get(job(1).id)
    assert (done.state, done.counts, done.delta, done.tenant) == (
        JobState.SUCCEEDED,
        counts,
        delta,
        "acme",
    )
    assert done.documents == (JobDocument("a.md", "ingested", 3),)
    assert await tables.inputs(job(1).id) == [], "a finished job's documents are dropped"


async def test_one_running_job_per_collection_in_order(tables: JobTables) -> None:
    for n, collection in ((1, "docs"), (2, "docs"), (3, "other")):
        await tables.create(job(n, collection), "acme", {})
    first = await tables.claim("w1", 10.0)
    second = await tables.claim("w2", 10.0)
    assert first is not None and second is not None
    assert {first.job.id, second.job.id} == {job(1).id, job(3).id}, "docs' 2nd job waits"
    assert await tables.claim("w3", 10.0) is None
    assert await tables.finish(job(1).id, "w1", JobState.SUCCEEDED, "", 11.0)
    third = await tables.claim("w3", 12.0)
    assert third is not None and third.job.id == job(2).id


async def test_claims_share_the_workers_between_tenants(tables: JobTables) -> None:
    # acme queued three collections' jobs, then globex one: globex's waits for no more
    # than one of acme's (it was claimed last, after all three, before the fair share)
    for n, collection, tenant in (
        (1, "a1", "acme"), (2, "a2", "acme"), (3, "a3", "acme"), (4, "g1", "globex"),
    ):  # fmt: skip
        await tables.create(job(n, collection, tenant), tenant, {})
    first = await tables.claim("w1", 10.0)
    second = await tables.claim("w2", 11.0)
    assert first is not None and second is not None
    assert (first.job.id, second.job.id) == (job(1).id, job(4).id), "globex's goes second"
    for claimed, at in ((first, 12.0), (second, 13.0)):
        assert await tables.finish(claimed.job.id, claimed.job.worker, JobState.SUCCEEDED, "", at)
    # none running: the tenant served least recently (acme started at 10, globex at 11)
    third = await tables.claim("w1", 14.0)
    assert third is not None and third.job.id == job(2).id


async def test_concurrent_claims_never_run_two_jobs_of_a_collection(tables: JobTables) -> None:
    for n in range(1, 6):
        await tables.create(job(n), "acme", {})
    claims = await asyncio.gather(*(tables.claim(f"w{i}", 10.0) for i in range(8)))
    won = [c for c in claims if c is not None]
    assert [c.job.id for c in won] == [job(1).id], claims


async def test_a_job_whose_worker_stopped_beating_is_reaped(tables: JobTables) -> None:
    await tables.create(job(1), "acme", {})
    assert await tables.claim("w1", 10.0) is not None
    assert await tables.beat(job(1).id, "w1", 20.0) is False
    assert await tables.stale(before=15.0) == []
    (stale,) = await tables.stale(before=25.0)
    assert await tables.reap(stale.id, 25.0, "failed: worker stopped", 26.0)
    failed = await tables.get(job(1).id)
    assert (failed.state, failed.error) == (JobState.FAILED, "failed: worker stopped")
    assert await tables.beat(job(1).id, "w1", 27.0) is None, "the worker learns it lost it"
    assert not await tables.finish(job(1).id, "w1", JobState.SUCCEEDED, "", 28.0)


async def test_ownership_gates_reading_listing_and_cancelling(tables: JobTables) -> None:
    await tables.create(job(1, "board"), "acme", {})
    await tables.create(job(2, "board"), "globex", {})  # the name reused by another tenant
    assert [j.id for j in await tables.recent("board", tenant="globex")] == [job(2).id]
    with pytest.raises(NotFound):
        await tables.get(job(1).id, "globex")
    with pytest.raises(NotFound):
        await tables.cancel(job(1).id, "globex", 5.0, "cancelled")
    assert (await tables.get(job(1).id)).state is JobState.QUEUED, "untouched"
    cancelled = await tables.cancel(job(1).id, "acme", 5.0, "cancelled")
    assert cancelled.state is JobState.CANCELLED
    assert (await tables.pending("globex")).jobs == 1
    assert (await tables.pending("acme")).jobs == 0
