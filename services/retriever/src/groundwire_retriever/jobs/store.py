"""Where jobs are kept: one SQLite database plus a folder per job for its documents.

The database lives beside the collections (the writer's data folder, see
``RetrieverSettings.jobs_path``), so a job outlives the gateway that started it and
the retriever that ran it. Each document's outcome is committed as soon as that
document is applied, so after a crash the report lists what was applied (at most the
document whose switch landed just before the kill is missing from it). An ingest
job's documents wait in its folder (JSON lines, content base64) until it ends.

Synchronous (sqlite3); the runner calls it through worker threads.
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from groundwire_core.errors import NotFound, Unavailable
from groundwire_retriever.ingest.pipeline import DocumentInput
from groundwire_retriever.jobs.model import (
    Job,
    JobCounts,
    JobDocument,
    JobKind,
    JobState,
)
from groundwire_retriever.sync.report import Rename, SyncDelta

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    collection TEXT NOT NULL,
    kind TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    started_at REAL NOT NULL DEFAULT 0,
    finished_at REAL NOT NULL DEFAULT 0,
    counts TEXT NOT NULL,
    error TEXT NOT NULL DEFAULT '',
    delta TEXT,
    options TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_by_collection ON jobs (collection, created_at);
CREATE TABLE IF NOT EXISTS job_documents (
    job_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    source_id TEXT NOT NULL,
    outcome TEXT NOT NULL,
    chunks INTEGER NOT NULL,
    error TEXT NOT NULL,
    PRIMARY KEY (job_id, seq)
);
"""
_DOCUMENTS_FILE = "documents.jsonl"
_COLUMNS = "id, collection, kind, state, created_at, started_at, finished_at, counts, error, delta"


class JobStore:
    """Jobs in ``<root>/jobs.sqlite3``, an ingest job's documents in ``<root>/<id>/``."""

    def __init__(self, root: Path) -> None:
        self._root = Path(root)
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def open(self) -> None:
        """Creates the folder and the tables. Raises Unavailable when it cannot."""
        try:
            self._root.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self._root / "jobs.sqlite3", check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise Unavailable(
                f"cannot open the job store in {str(self._root)!r}: {exc}", dependency="retriever"
            ) from None
        self._db = db

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """The database, locked, in one transaction. Raises Unavailable once closed."""
        with self._lock:
            if self._db is None:
                raise Unavailable("the job store is closed", dependency="retriever")
            with self._db:
                yield self._db

    def _run(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._transaction() as db:
            return db.execute(sql, args).fetchall()

    def create(
        self, job: Job, options: dict[str, Any], documents: Iterable[DocumentInput] = ()
    ) -> None:
        """Records a queued job, its documents written to its folder first."""
        folder = self._root / job.id
        folder.mkdir()
        with (folder / _DOCUMENTS_FILE).open("w", encoding="utf-8") as out:
            for doc in documents:
                row = asdict(doc)
                row["content"] = base64.b64encode(doc.content).decode("ascii")
                out.write(json.dumps(row) + "\n")
        self._run(
            f"INSERT INTO jobs ({_COLUMNS}, options) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (*_row(job), json.dumps(options)),
        )

    def save(self, job: Job) -> None:
        """Writes the job's state, times, counts, error and delta (not its documents)."""
        _, _, _, state, _, started, finished, counts, error, delta = _row(job)
        self._run(
            "UPDATE jobs SET state=?, started_at=?, finished_at=?, counts=?, error=?, delta=? "
            "WHERE id=?",
            (state, started, finished, counts, error, delta, job.id),
        )

    def add_document(self, job: Job, doc: JobDocument) -> None:
        """Appends ``doc`` to the job's report and saves its counts, in one transaction."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO job_documents VALUES (?,?,?,?,?,?)",
                (job.id, job.counts.done, doc.source_id, doc.outcome, doc.chunks, doc.error),
            )
            db.execute(
                "UPDATE jobs SET counts=? WHERE id=?", (json.dumps(asdict(job.counts)), job.id)
            )

    def get(self, job_id: str) -> Job:
        """The job with its report. Raises NotFound."""
        rows = self._run(f"SELECT {_COLUMNS} FROM jobs WHERE id=?", (job_id,))
        if not rows:
            raise NotFound(f"job {job_id!r} does not exist")
        docs = self._run(
            "SELECT source_id, outcome, chunks, error FROM job_documents WHERE job_id=? "
            "ORDER BY seq",
            (job_id,),
        )
        return _job(rows[0], tuple(JobDocument(*d) for d in docs))

    def recent(self, collection: str = "", limit: int = 100) -> list[Job]:
        """Jobs newest first, without their reports."""
        where, args = ("WHERE collection=?", [collection]) if collection else ("", [])
        rows = self._run(
            f"SELECT {_COLUMNS} FROM jobs {where} ORDER BY created_at DESC, rowid DESC LIMIT ?",
            (*args, limit),
        )
        return [_job(r, ()) for r in rows]

    def unfinished(self) -> list[Job]:
        """Queued and running jobs, oldest first (what a restart finds)."""
        rows = self._run(
            f"SELECT {_COLUMNS} FROM jobs WHERE state IN (?, ?) ORDER BY created_at, rowid",
            (JobState.QUEUED.value, JobState.RUNNING.value),
        )
        return [_job(r, ()) for r in rows]

    def prune(self, keep: int) -> int:
        """Forgets finished jobs past the newest ``keep`` (their reports too); how many."""
        final = (JobState.SUCCEEDED.value, JobState.FAILED.value, JobState.CANCELLED.value)
        with self._transaction() as db:
            old = db.execute(
                "SELECT id FROM jobs WHERE state IN (?, ?, ?) "
                "ORDER BY created_at DESC, rowid DESC LIMIT -1 OFFSET ?",
                (*final, keep),
            ).fetchall()
            db.executemany("DELETE FROM job_documents WHERE job_id=?", old)
            db.executemany("DELETE FROM jobs WHERE id=?", old)
        return len(old)

    def options(self, job_id: str) -> dict[str, Any]:
        rows = self._run("SELECT options FROM jobs WHERE id=?", (job_id,))
        if not rows:
            raise NotFound(f"job {job_id!r} does not exist")
        options: dict[str, Any] = json.loads(rows[0][0])
        return options

    def documents(self, job_id: str) -> list[DocumentInput]:
        """The documents an ingest job was started with."""
        docs: list[DocumentInput] = []
        with (self._root / job_id / _DOCUMENTS_FILE).open(encoding="utf-8") as lines:
            for line in lines:
                row = json.loads(line)
                row["content"] = base64.b64decode(row["content"])
                row["access"] = tuple(row.get("access", ()))  # JSON has lists only
                docs.append(DocumentInput(**row))
        return docs

    def drop_documents(self, job_id: str) -> None:
        """Removes a finished job's folder (its documents are no longer needed)."""
        shutil.rmtree(self._root / job_id, ignore_errors=True)


def _row(job: Job) -> tuple[Any, ...]:
    delta = None
    if job.delta is not None:  # a rename as its pair [old, new]
        renamed = [[r.old, r.new] for r in job.delta.renamed]
        delta = json.dumps({**asdict(job.delta), "renamed": renamed})
    return (
        job.id,
        job.collection,
        job.kind.value,
        job.state.value,
        job.created_at,
        job.started_at,
        job.finished_at,
        json.dumps(asdict(job.counts)),
        job.error,
        delta,
    )


def _job(row: tuple[Any, ...], documents: tuple[JobDocument, ...]) -> Job:
    job_id, collection, kind, state, created, started, finished, counts, error, delta = row
    found_delta = None
    if delta is not None:
        raw = json.loads(delta)
        found_delta = SyncDelta(
            new=tuple(raw["new"]),
            changed=tuple(raw["changed"]),
            unchanged=raw["unchanged"],
            deleted=tuple(raw["deleted"]),
            renamed=tuple(Rename(old, new) for old, new in raw["renamed"]),
        )
    return Job(
        id=job_id,
        collection=collection,
        kind=JobKind(kind),
        state=JobState(state),
        created_at=created,
        started_at=started,
        finished_at=finished,
        counts=JobCounts(**json.loads(counts)),
        documents=documents,
        error=error,
        delta=found_delta,
    )
