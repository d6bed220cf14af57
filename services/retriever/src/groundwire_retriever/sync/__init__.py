"""Sync a collection with a source set (a folder, a git working tree, a website),
deletions included: ``run_sync`` computes the delta and applies it."""

from groundwire_retriever.sync.definition import SourceKind, SyncDefinition, check_definition
from groundwire_retriever.sync.report import (
    Rename,
    SourceOutcome,
    SyncDelta,
    SyncProgress,
    SyncReport,
)
from groundwire_retriever.sync.runner import run_sync, sync_events

__all__ = [
    "Rename",
    "SourceKind",
    "SourceOutcome",
    "SyncDefinition",
    "SyncDelta",
    "SyncProgress",
    "SyncReport",
    "check_definition",
    "run_sync",
    "sync_events",
]
