"""Jobs between protobuf and the domain: the jobs RPCs' half of ``convert``.

Kept apart from ``convert`` (searches, chunks, collections) because nothing else
there knows jobs; together they are the retriever's one protobuf boundary.
"""

from __future__ import annotations

from groundwire.retriever.v1 import retriever_pb2
from groundwire_retriever.convert import sync_delta_to_proto
from groundwire_retriever.jobs.model import Job, JobKind, JobState

KINDS: dict[JobKind, retriever_pb2.JobKind] = {
    JobKind.INGEST: retriever_pb2.JOB_KIND_INGEST,
    JobKind.SYNC: retriever_pb2.JOB_KIND_SYNC,
}
STATES: dict[JobState, retriever_pb2.JobState] = {
    JobState.QUEUED: retriever_pb2.JOB_STATE_QUEUED,
    JobState.RUNNING: retriever_pb2.JOB_STATE_RUNNING,
    JobState.SUCCEEDED: retriever_pb2.JOB_STATE_SUCCEEDED,
    JobState.FAILED: retriever_pb2.JOB_STATE_FAILED,
    JobState.CANCELLED: retriever_pb2.JOB_STATE_CANCELLED,
}


def job_to_proto(job: Job, *, documents: bool = True) -> retriever_pb2.Job:
    """``job`` on the wire; ``documents=False`` leaves its report out (progress)."""
    c = job.counts
    out = retriever_pb2.Job(
        id=job.id,
        collection=job.collection,
        kind=KINDS[job.kind],
        state=STATES[job.state],
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        counts=retriever_pb2.JobCounts(
            total=c.total,
            done=c.done,
            ingested=c.ingested,
            updated=c.updated,
            unchanged=c.unchanged,
            skipped=c.skipped,
            failed=c.failed,
            deleted=c.deleted,
            chunks_written=c.chunks_written,
        ),
        error=job.error,
        cancel_requested=job.cancel_requested,
        tenant=job.tenant,
    )
    if documents:
        out.documents.extend(
            retriever_pb2.JobDocument(
                source_id=d.source_id, outcome=d.outcome, chunks=d.chunks, error=d.error
            )
            for d in job.documents
        )
    if job.delta is not None:
        out.delta.CopyFrom(sync_delta_to_proto(job.delta))
    return out
