"""What a sync found and did: the delta, per-source outcomes, progress ticks."""

from __future__ import annotations

from dataclasses import dataclass

OUTCOMES = ("new", "changed", "renamed", "unchanged", "deleted", "skipped", "failed")
"""A source's outcome. ``new``, ``changed`` and ``renamed`` (its new id) were ingested,
``deleted`` (also a rename's old id) removed, ``skipped`` left out of the set (draft,
size, robots.txt, gone before it was read), ``failed`` could not be read or ingested
this time: its stored copy, if any, is kept."""


@dataclass(frozen=True)
class Rename:
    """A source stored under ``old`` whose exact content now comes as ``new``."""

    old: str
    new: str


@dataclass(frozen=True)
class SyncDelta:
    """How the source set differs from the collection."""

    new: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    unchanged: int = 0
    deleted: tuple[str, ...] = ()
    renamed: tuple[Rename, ...] = ()

    @property
    def actions(self) -> int:
        """Sources to write or delete (a rename counts twice: its new id, its old one)."""
        return len(self.new) + len(self.changed) + len(self.deleted) + 2 * len(self.renamed)


@dataclass(frozen=True)
class SourceOutcome:
    source_id: str
    outcome: str
    """One of ``OUTCOMES``."""
    chunks: int = 0
    """Chunks stored for it now (0 for deleted and skipped)."""
    reason: str = ""


@dataclass(frozen=True)
class SyncProgress:
    """A tick: during ``scan`` per source compared (``total`` 0: not known yet), during
    ``apply`` per source written or deleted, out of ``total``."""

    phase: str  # "scan" | "apply"
    done: int
    total: int
    source: SourceOutcome


@dataclass(frozen=True)
class SyncReport:
    collection: str
    delta: SyncDelta
    sources: tuple[SourceOutcome, ...]
    """Every source met or applied, scan order then apply order; a source has its
    final outcome (an applied one appears once, with its chunks)."""
    chunks_written: int
    dry_run: bool
    complete: bool
    """False when a crawl stopped at its page limit or met a transient error: stored
    pages it did not see were kept."""
    cancelled: bool
    seconds: float

    def count(self, outcome: str) -> int:
        return sum(s.outcome == outcome for s in self.sources)
