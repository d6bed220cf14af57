"""HTTP bodies of the ingest and sync jobs (``/v1/admin/jobs``); declarations only.

Apart from ``models`` (already at its size) because jobs are their own part of the
API: a job's JSON as the retriever reports it, and the 202 answer that points at it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

JOB_ID_PATTERN = r"^[0-9a-f]{32}$"
JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class JobCountsOut(BaseModel):
    total: int = Field(description="Documents (sync: sources) in the job.")
    done: int = Field(description="Documents finished so far, whatever their outcome.")
    ingested: int = Field(description="New sources written.")
    updated: int = Field(description="Stored sources replaced by changed content.")
    unchanged: int
    skipped: int = Field(description="Refused documents (see their error).")
    failed: int
    deleted: int = Field(description="Sources removed (sync).")
    chunks_written: int


class JobDocumentOut(BaseModel):
    source_id: str
    outcome: Literal["ingested", "updated", "unchanged", "skipped", "failed", "deleted"]
    chunks: int = Field(description="Chunks now stored for the source.")
    error: str = Field("", description="Why it was skipped or failed.")


class JobRenameOut(BaseModel):
    from_: str = Field(alias="from", serialization_alias="from")
    to: str


class JobDeltaOut(BaseModel):
    new: list[str]
    changed: list[str]
    unchanged: int
    deleted: list[str]
    renamed: list[JobRenameOut]


class JobOut(BaseModel):
    id: str
    collection: str
    kind: Literal["ingest", "sync"]
    state: JobState = Field(
        description="queued, running, then one of succeeded, failed (an error, or the "
        "retriever stopped while it ran: what it applied stays) or cancelled."
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    counts: JobCountsOut
    documents: list[JobDocumentOut] = Field(
        description="Per document, in the order they were done (empty in progress events "
        "and in listings)."
    )
    error: str = Field(description="Why it failed, or what a cancel left.")
    delta: JobDeltaOut | None = Field(description="Sync jobs: the delta applied.")
    cancel_requested: bool = Field(
        description="A cancel was asked for; the job stops before its next document."
    )


class JobAccepted(BaseModel):
    job: JobOut
    url: str = Field(description="Where to follow it: GET it, or GET its /events (SSE).")


class JobList(BaseModel):
    jobs: list[JobOut] = Field(description="Newest first, without per-document reports.")
