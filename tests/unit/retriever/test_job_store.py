"""The job store (SQLite in the retriever's data folder): what a restart reads back."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from groundwire_core.errors import NotFound
from groundwire_retriever.ingest.pipeline import DocumentInput
from groundwire_retriever.jobs.model import Job, JobDocument, JobKind, JobState
from groundwire_retriever.jobs.store import JobStore
from groundwire_retriever.sync import Rename, SyncDelta


def job(n: int, state: JobState = JobState.QUEUED, collection: str = "docs") -> Job:
    return Job(f"{n:032x}", collection, JobKind.INGEST, state, created_at=float(n))


def test_a_job_its_documents_and_its_report_survive_reopening(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    store.open()
    docs = [
        DocumentInput("a.md", b"# A\x00\xff", filename="a.md", metadata={"team": "x"}),
        DocumentInput("b.html", b"<h1>B</h1>", format="html"),
    ]
    queued = job(1)
    store.create(queued, {"create_collection": True}, docs)
    running = replace(queued, state=JobState.RUNNING, started_at=5.0)
    store.save(running)
    outcome = JobDocument("a.md", "ingested", chunks=2)
    running = replace(running, counts=running.counts.add(outcome, written=True))
    store.add_document(running, outcome)
    store.close()

    again = JobStore(tmp_path)
    again.open()
    found = again.get(queued.id)
    assert (found.state, found.started_at, found.documents) == (
        JobState.RUNNING,
        5.0,
        (outcome,),
    )
    assert (found.counts.done, found.counts.ingested, found.counts.chunks_written) == (1, 1, 2)
    assert again.unfinished() == [replace(found, documents=())]
    assert again.documents(queued.id) == docs, "bytes and metadata round-trip"
    assert again.options(queued.id) == {"create_collection": True}
    again.drop_documents(queued.id)
    assert not (tmp_path / queued.id).exists()
    with pytest.raises(NotFound):
        again.get("f" * 32)


def test_listing_is_newest_first_and_prune_keeps_the_newest_finished(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    store.open()
    for n in range(1, 6):
        store.create(job(n, JobState.SUCCEEDED, "docs" if n % 2 else "notes"), {})
    store.create(job(6, JobState.QUEUED), {})
    delta = SyncDelta(new=("a",), renamed=(Rename("old", "new"),))
    store.save(replace(job(5, JobState.SUCCEEDED), delta=delta))
    assert [j.created_at for j in store.recent()] == [6, 5, 4, 3, 2, 1]
    assert [j.created_at for j in store.recent("notes")] == [4, 2]
    assert store.get(job(5).id).delta == delta
    assert store.prune(keep=2) == 3
    assert [j.created_at for j in store.recent()] == [6, 5, 4], "a queued job is never pruned"
