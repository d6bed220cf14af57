"""The orchestrator's domain types: candidates and stage reports."""

from __future__ import annotations

from dataclasses import dataclass, field


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
