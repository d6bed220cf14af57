"""The gateway's client of the retriever's job RPCs (StartJob, GetJob, WatchJob,
CancelJob, ListJobs): protobuf to ``job_models`` and AioRpcErrors to GroundwireErrors.

Beside ``upstream`` rather than in it (that module is at its size); it shares its
retriever channel, and with it the gateway's one protobuf boundary.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime

import grpc

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.errors import BackendFailure, GroundwireError
from groundwire_core.grpc.client import rpc_errors
from groundwire_gateway import job_models, models
from groundwire_gateway.settings import GatewaySettings
from groundwire_gateway.sync_models import SyncBody
from groundwire_gateway.upstream_sync import definition_to_proto, delta_from_proto

_KINDS: dict[int, str] = {
    retriever_pb2.JOB_KIND_INGEST: "ingest",
    retriever_pb2.JOB_KIND_SYNC: "sync",
}
_STATES: dict[int, str] = {
    retriever_pb2.JOB_STATE_QUEUED: "queued",
    retriever_pb2.JOB_STATE_RUNNING: "running",
    retriever_pb2.JOB_STATE_SUCCEEDED: "succeeded",
    retriever_pb2.JOB_STATE_FAILED: "failed",
    retriever_pb2.JOB_STATE_CANCELLED: "cancelled",
}
FORMATS = {
    None: retriever_pb2.DOCUMENT_FORMAT_UNSPECIFIED,
    "markdown": retriever_pb2.DOCUMENT_FORMAT_MARKDOWN,
    "text": retriever_pb2.DOCUMENT_FORMAT_TEXT,
    "html": retriever_pb2.DOCUMENT_FORMAT_HTML,
    "rst": retriever_pb2.DOCUMENT_FORMAT_RST,
}
"""``DocumentIn.format`` on the wire (binary formats come as uploaded files)."""


def _time(seconds: float) -> datetime | None:
    return datetime.fromtimestamp(seconds, UTC) if seconds else None


def _known(names: Mapping[int, str], value: int, what: str) -> str:
    """A job enum's name; BackendFailure for a value this gateway does not know."""
    if value not in names:
        raise BackendFailure(
            f"the retriever sent a job {what} {value} unknown here", dependency="retriever"
        )
    return names[value]


def job_from_proto(job: retriever_pb2.Job) -> job_models.JobOut:
    """The HTTP form of a job (times as ISO 8601, enums as names)."""
    c = job.counts
    delta = delta_from_proto(job.delta) if job.HasField("delta") else None
    return job_models.JobOut(
        id=job.id,
        collection=job.collection,
        kind=_known(_KINDS, job.kind, "kind"),
        state=_known(_STATES, job.state, "state"),
        created_at=_time(job.created_at) or datetime.now(UTC),
        started_at=_time(job.started_at),
        finished_at=_time(job.finished_at),
        counts=job_models.JobCountsOut(
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
        documents=[
            job_models.JobDocumentOut(
                source_id=d.source_id,
                outcome=d.outcome,
                chunks=d.chunks,
                error=d.error,
            )
            for d in job.documents
        ],
        error=job.error,
        delta=delta,
        cancel_requested=job.cancel_requested,
    )


def documents_to_proto(
    body: models.IngestBody, files: Sequence[tuple[str, bytes]] = ()
) -> list[retriever_pb2.Document]:
    """JSON documents and uploaded files ((name, bytes)) as the retriever's Documents
    (an ingest job's, and a ``wait=true`` ingest's)."""
    documents = [
        retriever_pb2.Document(
            source_id=d.source_id,
            content=d.content.encode(),
            format=FORMATS[d.format],
            title=d.title,
            url=d.url,
            doc_type=d.doc_type,
            filename=d.filename or d.source_id,  # the format is guessed from its suffix
            metadata=d.metadata,
            access=d.access,
        )
        for d in body.documents
    ]
    documents += [
        retriever_pb2.Document(source_id=name, content=content, filename=name)
        for name, content in files
    ]
    return documents


class IngestInterrupted(Exception):
    """A ``wait=true`` ingest that failed (``error``, e.g. insufficient_storage) after
    some documents were written: ``report`` lists those, as their switches landed."""

    def __init__(self, error: GroundwireError, report: models.IngestReportOut) -> None:
        super().__init__(error.message)
        self.error = error
        self.report = report


def ingest_report(
    collection: str, documents: Sequence[models.DocumentResultOut], seconds: float
) -> models.IngestReportOut:
    """The report of the documents done (a partial ingest's), counted by status."""
    written = ("ingested", "updated")
    return models.IngestReportOut(
        collection=collection,
        documents=list(documents),
        ingested=sum(d.status == "ingested" for d in documents),
        updated=sum(d.status == "updated" for d in documents),
        unchanged=sum(d.status == "unchanged" for d in documents),
        skipped=sum(d.status == "skipped" for d in documents),
        chunks_written=sum(d.chunks for d in documents if d.status in written),
        seconds=seconds,
    )


class JobsClient:
    """Job calls on the gateway's retriever channel."""

    def __init__(self, channel: grpc.aio.Channel, settings: GatewaySettings) -> None:
        self._stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        self._timeout = settings.request_timeout_s

    async def start_ingest(
        self, collection: str, body: models.IngestBody, files: Sequence[tuple[str, bytes]] = ()
    ) -> job_models.JobOut:
        """Queues an ingest of JSON documents and uploaded files ((name, bytes))."""
        request = retriever_pb2.StartJobRequest(
            collection=collection,
            ingest=retriever_pb2.IngestJob(
                documents=documents_to_proto(body, files),
                create_collection=body.create_collection,
                full_reindex=body.full_reindex,
            ),
        )
        with rpc_errors("retriever"):
            job = await self._stub.StartJob(request, timeout=self._timeout)
        return job_from_proto(job)

    async def start_sync(self, collection: str, body: SyncBody) -> job_models.JobOut:
        """Queues a sync of ``collection`` with the body's source set (its ``dry_run``
        is not a job: see ``SyncClient.sync``)."""
        request = retriever_pb2.StartJobRequest(
            collection=collection, sync=definition_to_proto(body)
        )
        with rpc_errors("retriever"):
            job = await self._stub.StartJob(request, timeout=self._timeout)
        return job_from_proto(job)

    # ``tenant`` below: only a job that tenant owns (another's is NotFound, as an
    # unknown id); "" for any (the operator). The retriever applies it in its query.

    async def get(self, job_id: str, tenant: str = "") -> job_models.JobOut:
        with rpc_errors("retriever"):
            job = await self._stub.GetJob(
                retriever_pb2.GetJobRequest(id=job_id, tenant=tenant), timeout=self._timeout
            )
        return job_from_proto(job)

    async def cancel(self, job_id: str, tenant: str = "") -> job_models.JobOut:
        with rpc_errors("retriever"):
            job = await self._stub.CancelJob(
                retriever_pb2.CancelJobRequest(id=job_id, tenant=tenant), timeout=self._timeout
            )
        return job_from_proto(job)

    async def recent(
        self, collection: str = "", limit: int = 100, tenant: str = ""
    ) -> list[job_models.JobOut]:
        with rpc_errors("retriever"):
            reply = await self._stub.ListJobs(
                retriever_pb2.ListJobsRequest(collection=collection, limit=limit, tenant=tenant),
                timeout=self._timeout,
            )
        return [job_from_proto(j) for j in reply.jobs]

    async def watch(self, job_id: str, tenant: str = "") -> AsyncIterator[job_models.JobOut]:
        """The job now and at each change, ending with it in a final state (no
        deadline: a job may run for hours; the caller going away cancels the call)."""
        call = self._stub.WatchJob(retriever_pb2.GetJobRequest(id=job_id, tenant=tenant))
        try:
            with rpc_errors("retriever"):
                async for job in call:
                    yield job_from_proto(job)
        finally:
            call.cancel()
