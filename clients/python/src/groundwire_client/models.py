"""What the API returns, as typed objects (pydantic). Fields the server adds later
are ignored, so an older client keeps working against a newer gateway.

Chat events arrive in this order: one :class:`RetrievalEvent` (the passages found,
before any text), :class:`DeltaEvent` pieces of the answer, maybe a
:class:`ResetEvent` (discard the text so far), one :class:`CitationsEvent` (each
citation checked against its source), one :class:`StagesEvent` (what each stage of
the chain did), then exactly one :class:`DoneEvent` or :class:`ErrorEvent`.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


# --- search --------------------------------------------------------------------------------


class Stage(_Model):
    """One stage of the chain: how long it took and whether it fell back (and why)."""

    name: str
    ms: float
    fallback: bool
    reason: str = ""
    dependency: str = ""
    details: dict[str, str] = Field(default_factory=dict)


class SearchResult(_Model):
    """One ranked passage (a chunk) and its source."""

    rank: int
    score: float
    chunk_id: str
    source_id: str
    title: str
    heading_path: list[str]
    url: str
    text: str
    match_reason: str = ""
    injection_flagged: bool = False


class SearchResponse(_Model):
    collection: str
    results: list[SearchResult]
    stages: list[Stage]
    request_id: str


# --- chat ----------------------------------------------------------------------------------

VerificationStatus = Literal[
    "supported",
    "unsupported",
    "contradicted",
    "unchecked",
    "quoted",
    "similar",
    "unrelated",
    "unspecified",
]
AnswerMode = Literal["generated", "extractive", "declined", "unspecified"]


class Source(_Model):
    """A passage the answer may cite as ``[number]``."""

    number: int
    chunk_id: str
    source_id: str
    title: str
    heading_path: list[str]
    url: str
    text: str
    score: float
    match_reason: str = ""
    injection_flagged: bool = False
    live: bool = False
    """Looked up live on the collection's documentation site (the collection did not
    cover the question): not part of the collection, unreviewed; ``url`` is the page."""
    fetched_at: float = 0.0
    """Live only: Unix seconds of the page's fetch."""


class Citation(_Model):
    """One citation of the answer, checked against the source it cites."""

    number: int
    sentence: str
    status: VerificationStatus
    support: float
    method: str = "none"
    contradiction: float = 0.0
    answer_span: list[int] | None = None
    source_span: list[int] | None = None
    reason: str = ""
    chunk_span: list[int] | None = None
    """[start, end) of the cited source's text in its document (None: not recorded)."""


class WithheldSentence(_Model):
    """A sentence never shown: its citations failed the check."""

    sentence: str
    numbers: list[int] = Field(default_factory=list)
    status: VerificationStatus
    reason: str = ""


class RetrievalEvent(_Model):
    event: ClassVar[str] = "retrieval"
    sources: list[Source]


class DeltaEvent(_Model):
    event: ClassVar[str] = "delta"
    text: str


class ResetEvent(_Model):
    event: ClassVar[str] = "reset"
    reason: str


class CitationsEvent(_Model):
    event: ClassVar[str] = "citations"
    sources: list[Source]
    citations: list[Citation]
    withheld: list[WithheldSentence] = Field(default_factory=list)


class StagesEvent(_Model):
    event: ClassVar[str] = "stages"
    stages: list[Stage]


class DoneEvent(_Model):
    event: ClassVar[str] = "done"
    mode: AnswerMode
    answer: str
    unsupported_citations: int = 0
    answer_id: str | None = None
    """The stored answer's id: ``feedback(answer_id, …)`` rates it (None when the
    gateway stores no conversations)."""
    conversation_id: str | None = None
    """Send it back to continue this conversation."""


class ErrorEvent(_Model):
    """The answer failed after it started (the stream ends here)."""

    event: ClassVar[str] = "error"
    code: str
    message: str
    dependency: str | None = None
    retry_after_s: float | None = None
    request_id: str = ""


ChatEvent = (
    RetrievalEvent | DeltaEvent | ResetEvent | CitationsEvent | StagesEvent | DoneEvent | ErrorEvent
)
CHAT_EVENTS: dict[str, type[ChatEvent]] = {
    cls.event: cls
    for cls in (
        RetrievalEvent,
        DeltaEvent,
        ResetEvent,
        CitationsEvent,
        StagesEvent,
        DoneEvent,
        ErrorEvent,
    )
}


class Message(_Model):
    role: Literal["user", "assistant"]
    content: str


class Answer(_Model):
    """A finished answer (:meth:`Client.ask`): the text, how it was written, its
    citations with their verification, the cited sources and the stage report."""

    answer: str
    mode: AnswerMode
    citations: list[Citation]
    sources: list[Source] = Field(description="The sources the citations number.")
    retrieved: list[Source] = Field(description="Every passage retrieval found.")
    withheld: list[WithheldSentence]
    stages: list[Stage]
    unsupported_citations: int = 0
    request_id: str = ""

    @property
    def verified(self) -> bool:
        """Whether every citation was checked and supported (and there is one)."""
        return bool(self.citations) and all(c.status == "supported" for c in self.citations)

    def source(self, number: int) -> Source | None:
        """The source cited as ``[number]``."""
        return next((s for s in self.sources if s.number == number), None)


# --- collections, sources, ingest ----------------------------------------------------------


class Collection(_Model):
    name: str
    dense_dims: int
    learned_sparse: bool
    bm25: bool
    filterable: list[str]
    embedder_model: str
    chunks: int
    sources: int


class CollectionList(_Model):
    collections: list[Collection]


class Document(_Model):
    """A document to ingest as JSON (:meth:`Client.ingest_documents`)."""

    source_id: str
    content: str
    format: Literal["markdown", "text", "html"] | None = None
    title: str = ""
    url: str = ""
    doc_type: str = ""
    filename: str = ""
    metadata: dict[str, str] = Field(default_factory=dict)


class SourceInfo(_Model):
    source_id: str
    title: str
    url: str
    doc_type: str
    chunks: int
    content_hash: str
    ingested_at: float


class SourcePage(_Model):
    collection: str
    sources: list[SourceInfo]
    next_page_token: str
    total: int


class DocumentResult(_Model):
    source_id: str
    status: str
    chunks: int
    reason: str = ""


class IngestReport(_Model):
    """The blocking ingest's report (``wait=True``)."""

    collection: str
    documents: list[DocumentResult]
    ingested: int
    updated: int = 0
    unchanged: int
    skipped: int
    chunks_written: int
    seconds: float


# --- jobs ----------------------------------------------------------------------------------

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
FINAL_STATES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})


class JobCounts(_Model):
    total: int = 0
    done: int = 0
    ingested: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: int = 0
    failed: int = 0
    deleted: int = 0
    chunks_written: int = 0


class JobDocument(_Model):
    source_id: str
    outcome: str
    chunks: int = 0
    error: str = ""


class Rename(_Model):
    from_: str = Field(alias="from")
    to: str


class SyncDelta(_Model):
    new: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)
    unchanged: int = 0
    deleted: list[str] = Field(default_factory=list)
    renamed: list[Rename] = Field(default_factory=list)


class Job(_Model):
    """An ingest or sync job as the retriever reports it."""

    id: str
    collection: str
    kind: str
    state: JobState
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    counts: JobCounts = Field(default_factory=JobCounts)
    documents: list[JobDocument] = Field(default_factory=list)
    error: str = ""
    delta: SyncDelta | None = None
    cancel_requested: bool = False

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def progress(self) -> float:
        """Share of the job's documents done, 0.0 to 1.0."""
        total = self.counts.total
        return 1.0 if total == 0 and self.finished else self.counts.done / total if total else 0.0


class JobList(_Model):
    jobs: list[Job]
