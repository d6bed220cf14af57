"""What a job is: its kind, state, counts and per-document report (no storage here)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from groundwire_retriever.sync.report import SyncDelta


class JobKind(enum.Enum):
    INGEST = "ingest"
    SYNC = "sync"


class JobState(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


OUTCOMES = ("ingested", "updated", "unchanged", "skipped", "failed", "deleted")
"""A document's outcome in a job's report; each is also a key of ``JobCounts``."""


@dataclass(frozen=True)
class JobCounts:
    total: int = 0
    done: int = 0
    ingested: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: int = 0
    failed: int = 0
    deleted: int = 0
    chunks_written: int = 0

    def add(self, doc: JobDocument, *, written: bool) -> JobCounts:
        """These counts with ``doc`` done; ``written``: its chunks were written."""
        bumped = replace(self, done=self.done + 1, **{doc.outcome: getattr(self, doc.outcome) + 1})
        if written:
            bumped = replace(bumped, chunks_written=bumped.chunks_written + doc.chunks)
        return bumped


@dataclass(frozen=True)
class JobDocument:
    source_id: str
    outcome: str  # one of OUTCOMES
    chunks: int = 0
    error: str = ""


@dataclass(frozen=True)
class Job:
    id: str
    collection: str
    kind: JobKind
    state: JobState
    created_at: float
    started_at: float = 0.0
    finished_at: float = 0.0
    counts: JobCounts = field(default_factory=JobCounts)
    documents: tuple[JobDocument, ...] = ()
    error: str = ""
    delta: SyncDelta | None = None
    """A sync job's delta."""
    cancel_requested: bool = False
    tenant: str = ""
    """The owner: the collection's tenant when the job was started."""
    worker: str = ""
    """The replica process running it ("" unless running)."""
    heartbeat_at: float = 0.0
    """The running worker's last sign of life (Unix seconds)."""
