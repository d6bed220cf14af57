"""A sync as a job: a sync's source outcomes read as a job's document outcomes (its
definition is kept in the job's options as ``SyncDefinition.as_dict`` writes it)."""

from __future__ import annotations

from groundwire_retriever.jobs.model import JobDocument
from groundwire_retriever.sync import SourceOutcome

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


def job_document(source: SourceOutcome) -> JobDocument:
    """Raises KeyError for an outcome this module does not know (a newer sync)."""
    return JobDocument(source.source_id, OUTCOMES[source.outcome], source.chunks, source.reason)
