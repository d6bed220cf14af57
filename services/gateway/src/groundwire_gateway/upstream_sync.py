"""The gateway's client of the retriever's Sync RPC: a ``SyncBody`` to a
``SyncDefinition``, the streamed report to ``SyncReportOut``, AioRpcErrors to
GroundwireErrors. Beside ``upstream`` (at its size), on its retriever channel."""

from __future__ import annotations

import grpc

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.errors import BackendFailure
from groundwire_core.grpc.client import rpc_errors
from groundwire_core.urls import is_web_url
from groundwire_gateway import job_models
from groundwire_gateway.settings import GatewaySettings
from groundwire_gateway.sync_models import SyncBody, SyncReportOut, SyncSourceOut


def definition_to_proto(body: SyncBody) -> retriever_pb2.SyncDefinition:
    """The retriever's definition: a URL source is a crawl, else a folder (git when
    asked); the retriever checks the rest."""
    if is_web_url(body.source):
        kind = retriever_pb2.SYNC_SOURCE_KIND_WEB
    else:
        kind = (
            retriever_pb2.SYNC_SOURCE_KIND_GIT
            if body.git
            else retriever_pb2.SYNC_SOURCE_KIND_FOLDER
        )
    d = retriever_pb2.SyncDefinition(
        kind=kind,
        location=body.source,
        include=body.include,
        exclude=body.exclude,
        max_bytes=body.max_bytes,
        page_limit=body.page_limit,
        prefix=body.prefix,
        url_prefix=body.url_prefix,
    )
    if body.delay_s is not None:
        d.delay_s = body.delay_s
    return d


def delta_from_proto(d: retriever_pb2.JobDelta) -> job_models.JobDeltaOut:
    """A sync's delta (a sync report's, a sync job's) in its HTTP form."""
    return job_models.JobDeltaOut(
        new=list(d.new),
        changed=list(d.changed),
        unchanged=d.unchanged,
        deleted=list(d.deleted),
        renamed=[job_models.JobRenameOut(**{"from": x.from_id, "to": x.to_id}) for x in d.renamed],
    )


def report_from_proto(r: retriever_pb2.SyncReport) -> SyncReportOut:
    return SyncReportOut(
        collection=r.collection,
        dry_run=r.dry_run,
        complete=r.complete,
        cancelled=r.cancelled,
        chunks_written=r.chunks_written,
        seconds=r.seconds,
        delta=delta_from_proto(r.delta),
        sources=[
            SyncSourceOut(
                source_id=s.source_id,
                outcome=s.outcome,  # one of the retriever's OUTCOMES
                chunks=s.chunks,
                reason=s.reason,
            )
            for s in r.sources
        ],
    )


class SyncClient:
    """The Sync call on the gateway's retriever channel."""

    def __init__(self, channel: grpc.aio.Channel, settings: GatewaySettings) -> None:
        self._stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        self._timeout = settings.admin_timeout_s

    async def sync(self, collection: str, body: SyncBody) -> SyncReportOut:
        """Runs the sync (or with ``dry_run`` computes its delta) and waits for the
        report, within the admin deadline."""
        request = retriever_pb2.SyncRequest(
            collection=collection, definition=definition_to_proto(body), dry_run=body.dry_run
        )
        report: retriever_pb2.SyncReport | None = None
        with rpc_errors("retriever"):
            async for event in self._stub.Sync(request, timeout=self._timeout):
                if event.WhichOneof("event") == "report":
                    report = event.report
        if report is None:
            raise BackendFailure("the retriever sent no sync report", dependency="retriever")
        return report_from_proto(report)
