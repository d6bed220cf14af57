"""A sync as a job: its definition kept as JSON in the job's options, and a sync's
source outcomes read as a job's document outcomes."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from groundwire_retriever.jobs.model import JobDelta, JobDocument
from groundwire_retriever.sync import SourceKind, SourceOutcome, SyncDefinition, SyncDelta

# A sync source's outcome -> the job report's (a rename's new id was ingested; its
# old id is reported deleted on its own).
OUTCOMES = {
    "new": "ingested",
    "changed": "updated",
    "renamed": "ingested",
    "unchanged": "unchanged",
    "deleted": "deleted",
    "skipped": "skipped",
    "failed": "failed",
}
WRITTEN = ("new", "changed", "renamed")
FINAL_AT_SCAN = ("unchanged", "skipped", "failed")
"""Scan outcomes the apply phase never changes: reported as they are met."""


def definition_to_json(definition: SyncDefinition) -> dict[str, Any]:
    out = asdict(definition)
    out["kind"] = definition.kind.value
    return out


def definition_from_json(raw: dict[str, Any]) -> SyncDefinition:
    return SyncDefinition(
        **{
            **raw,
            "kind": SourceKind(raw["kind"]),
            "include": tuple(raw["include"]),
            "exclude": tuple(raw["exclude"]),
        }
    )


def job_document(source: SourceOutcome) -> JobDocument:
    """Raises KeyError for an outcome this module does not know (a newer sync)."""
    return JobDocument(source.source_id, OUTCOMES[source.outcome], source.chunks, source.reason)


def job_delta(delta: SyncDelta) -> JobDelta:
    return JobDelta(
        new=delta.new,
        changed=delta.changed,
        unchanged=delta.unchanged,
        deleted=delta.deleted,
        renamed=tuple((r.old, r.new) for r in delta.renamed),
    )
