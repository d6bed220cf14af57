"""The orchestrator's domain types: candidates, analysis, citations, stage reports and
the events of an answer. Plain frozen dataclasses; no protobuf, no grpc."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class FieldFilter:
    field: str
    any_of: tuple[str, ...]


@dataclass(frozen=True)
class Candidate:
    """One retrieved chunk moving through the chain."""

    chunk_id: str
    source_id: str
    title: str
    heading_path: tuple[str, ...]
    url: str
    text: str
    score: float
    """The latest stage's score: fused, then reranker score when reranked."""
    fused_score: float = 0.0
    match_reason: str = ""
    injection_flagged: bool = False
    chunk_index: int = 0
    injection_patterns: tuple[str, ...] = ()
    """Names of the screening patterns the passage matched (see stages.screening)."""


@dataclass(frozen=True)
class StageReport:
    name: str
    ms: float
    fallback: bool = False
    reason: str = ""
    dependency: str = ""
    details: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SearchOutcome:
    candidates: tuple[Candidate, ...]
    stages: tuple[StageReport, ...]


@dataclass(frozen=True)
class QueryAnalysis:
    """What query analysis made of a question; a pass-through keeps the raw query."""

    query: str
    rewritten_query: str
    """Text for BM25 and learned sparse."""
    hyde_document: str
    """Text embedded for the dense path."""
    intent: str = ""
    filters: tuple[FieldFilter, ...] = ()
    negatives: tuple[str, ...] = ()
    analysed: bool = False
    """False when the raw query passed through unchanged (no LLM, failure, timeout)."""

    @classmethod
    def passthrough(cls, query: str) -> QueryAnalysis:
        return cls(query=query, rewritten_query=query, hyde_document=query)


@dataclass(frozen=True)
class Turn:
    """One message of the conversation as the user's client sent it."""

    role: Literal["user", "assistant"]
    content: str


@dataclass(frozen=True)
class NumberedSource:
    """A source as the answer sees it: its citation number never changes."""

    number: int
    candidate: Candidate


class Verification(enum.Enum):
    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"
    """The passage does not address the claim (or its support is under the threshold)."""
    CONTRADICTED = "contradicted"
    """The passage states the opposite (entailment model or LLM judge only)."""
    UNCHECKED = "unchecked"
    """The support check could not run (e.g. the embedder was down)."""


@dataclass(frozen=True)
class Citation:
    number: int
    sentence: str
    """The sentence that cites the source, as written in the answer."""
    status: Verification
    support: float
    """Support score in [0, 1] (0 when unchecked)."""


AnswerMode = Literal["generated", "extractive", "declined"]


# ----------------------------------------------------------------- Ask events


@dataclass(frozen=True)
class RetrievalDone:
    """Sources available to the answer. The first comes before any text; the agentic
    loop sends another for the sources its tools add (numbers continue)."""

    sources: tuple[NumberedSource, ...]


@dataclass(frozen=True)
class AnswerDelta:
    text: str


@dataclass(frozen=True)
class AnswerReset:
    """Discard the answer text streamed so far."""

    reason: str


@dataclass(frozen=True)
class CitationsDone:
    sources: tuple[NumberedSource, ...]
    """Only the sources actually cited, by number."""
    citations: tuple[Citation, ...]


@dataclass(frozen=True)
class StagesDone:
    stages: tuple[StageReport, ...]


@dataclass(frozen=True)
class AnswerDone:
    mode: AnswerMode
    answer: str
    unsupported_citations: int = 0


AskEvent = RetrievalDone | AnswerDelta | AnswerReset | CitationsDone | StagesDone | AnswerDone
