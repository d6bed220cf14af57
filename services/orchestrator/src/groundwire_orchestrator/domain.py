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
    path_scores: tuple[tuple[str, float], ...] = ()
    """The retriever's raw score in each path that found the chunk ("dense": cosine,
    "bm25", "sparse"), as (path, score) pairs: evidence for the coverage stage."""
    matching_chunks: int = 0
    """Document-level search: how many of the source's chunks matched (0 otherwise)."""
    other_headings: tuple[str, ...] = ()
    """Document-level search: the headings of the source's other matching chunks."""
    doc_span: tuple[int, int] | None = None
    """[start, end) of ``text`` in its document's text (the source's chunk texts
    joined, see ``groundwire_core.document_text``); None when the retriever has none."""
    live: bool = False
    """Looked up live on the collection's documentation site (stages.live_docs), not
    stored in the collection."""
    fetched_at: float = 0.0
    """Live only: Unix seconds when the page was fetched."""

    def path_score(self, path: str) -> float | None:
        """The raw score of ``path`` (None when that path did not find the chunk)."""
        return next((s for p, s in self.path_scores if p == path), None)


@dataclass(frozen=True)
class LiveFetchReport:
    """One page a live lookup tried (stages.live_docs)."""

    url: str
    outcome: str
    """``fetched``, ``refused`` or ``failed``."""
    reason: str = ""


@dataclass(frozen=True)
class LiveLookupResult:
    """The retriever's live lookup: its sections as candidates marked ``live``."""

    candidates: tuple[Candidate, ...]
    fetches: tuple[LiveFetchReport, ...]
    lookups: int
    allowed_domains: tuple[str, ...]


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
    standalone_question: str = ""
    """The question made self-contained when ``query`` is a follow-up (the LLM's
    rewrite, or the previous question combined with it); "" when ``query`` stands alone."""

    @property
    def searched(self) -> str:
        """The question retrieval, the cross-encoder and the extractive answer use."""
        return self.standalone_question or self.query

    @classmethod
    def passthrough(cls, query: str, standalone: str = "") -> QueryAnalysis:
        """The query unchanged, or (a follow-up) its standalone form searched as is."""
        searched = standalone or query
        return cls(
            query=query,
            rewritten_query=searched,
            hyde_document=searched,
            standalone_question=standalone,
        )


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
    QUOTED = "quoted"
    """Verbatim from the cited passage, and nothing read its meaning (similarity only):
    the words are there, not that they answer or support anything."""
    SIMILAR = "similar"
    """Close to the cited passage by similarity only (``support`` is a relevance score,
    not a check of meaning)."""
    UNRELATED = "unrelated"
    """Far from the cited passage by similarity (under the threshold): no check of
    meaning ran, but the passage shares little with the sentence."""



@dataclass(frozen=True)
class Citation:
    number: int
    sentence: str
    """The sentence that cites the source, as written in the answer."""
    status: Verification
    support: float
    """Support score in [0, 1] (0 when unchecked)."""
    method: str = "none"
    """Which verifier judged it: nli, llm, similarity, or none (not checked)."""
    contradiction: float = 0.0
    """Probability or confidence that the cited chunk contradicts the sentence."""
    answer_span: tuple[int, int] | None = None
    """[start, end) of the citing sentence in the final answer text."""
    source_span: tuple[int, int] | None = None
    """[start, end) of the best-supporting sentence in the cited chunk's text."""
    reason: str = ""
    """Why this status, in a few words (the verifier's note)."""
    chunk_span: tuple[int, int] | None = None
    """[start, end) of the cited chunk in its document's text (``Candidate.doc_span``)."""


@dataclass(frozen=True)
class Withheld:
    """A sentence of the LLM's answer that was never shown (verify before show)."""

    sentence: str
    numbers: tuple[int, ...]
    """The citation numbers it carried (empty for an uncited sentence)."""
    status: Verification
    reason: str


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
    withheld: tuple[Withheld, ...] = ()
    """Sentences held back because their citations failed the check."""


@dataclass(frozen=True)
class StagesDone:
    stages: tuple[StageReport, ...]


@dataclass(frozen=True)
class AnswerDone:
    mode: AnswerMode
    answer: str
    unsupported_citations: int = 0


AskEvent = RetrievalDone | AnswerDelta | AnswerReset | CitationsDone | StagesDone | AnswerDone
