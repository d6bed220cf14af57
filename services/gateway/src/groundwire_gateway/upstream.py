"""The gateway's clients of the orchestrator and the retriever.

The only gateway module that touches protobuf messages: it converts them to the
HTTP models, and AioRpcErrors to GroundwireErrors (through the shared mapper).
One idea at ~500 lines: the gateway's one protobuf boundary (as qdrant-client keeps
one conversion module), so every RPC's conversion stands here and nowhere else.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc

from groundwire.common.v1 import common_pb2
from groundwire.orchestrator.v1 import orchestrator_pb2, orchestrator_pb2_grpc
from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.errors import BackendFailure, GroundwireError
from groundwire_core.grpc.client import check_health, create_channel, rpc_errors
from groundwire_core.grpc.errors import from_error_info
from groundwire_gateway import models
from groundwire_gateway.settings import GatewaySettings
from groundwire_gateway.state import SearchReply
from groundwire_gateway.upstream_jobs import (
    IngestInterrupted,
    JobsClient,
    documents_to_proto,
    ingest_report,
)
from groundwire_gateway.upstream_sync import SyncClient

_DEP_STATUS: dict[int, str] = {
    orchestrator_pb2.DEPENDENCY_STATUS_SERVING: "serving",
    orchestrator_pb2.DEPENDENCY_STATUS_NOT_SERVING: "not_serving",
    orchestrator_pb2.DEPENDENCY_STATUS_DISABLED: "disabled",
}
_MODES: dict[int, models.AnswerMode] = {
    orchestrator_pb2.ANSWER_MODE_GENERATED: "generated",
    orchestrator_pb2.ANSWER_MODE_EXTRACTIVE: "extractive",
    orchestrator_pb2.ANSWER_MODE_DECLINED: "declined",
}
_VERIFICATION: dict[int, str] = {
    orchestrator_pb2.VERIFICATION_STATUS_SUPPORTED: "supported",
    orchestrator_pb2.VERIFICATION_STATUS_UNSUPPORTED: "unsupported",
    orchestrator_pb2.VERIFICATION_STATUS_UNCHECKED: "unchecked",
    orchestrator_pb2.VERIFICATION_STATUS_CONTRADICTED: "contradicted",
    orchestrator_pb2.VERIFICATION_STATUS_QUOTED: "quoted",
    orchestrator_pb2.VERIFICATION_STATUS_SIMILAR: "similar",
    orchestrator_pb2.VERIFICATION_STATUS_UNRELATED: "unrelated",
}
_ORCHESTRATOR = orchestrator_pb2.DESCRIPTOR.services_by_name["OrchestratorService"].full_name
_RETRIEVER = retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name
_ROLES = {"user": orchestrator_pb2.ROLE_USER, "assistant": orchestrator_pb2.ROLE_ASSISTANT}
_DOC_STATUS: dict[int, str] = {
    retriever_pb2.DOCUMENT_STATUS_INGESTED: "ingested",
    retriever_pb2.DOCUMENT_STATUS_UNCHANGED: "unchanged",
    retriever_pb2.DOCUMENT_STATUS_SKIPPED: "skipped",
    retriever_pb2.DOCUMENT_STATUS_UPDATED: "updated",
}


def _document_result(d: retriever_pb2.DocumentResult) -> models.DocumentResultOut:
    return models.DocumentResultOut(
        source_id=d.source_id,
        status=_DOC_STATUS.get(d.status, "unspecified"),
        chunks=d.chunks,
        reason=d.reason,
    )


def _stage(st: common_pb2.StageReport) -> models.StageOut:
    return models.StageOut(
        name=st.name,
        ms=st.ms,
        fallback=st.fallback,
        reason=st.reason,
        dependency=st.dependency,
        details=dict(st.details),
    )


def _source(s: orchestrator_pb2.Source) -> models.Source:
    return models.Source(
        number=s.number,
        chunk_id=s.chunk_id,
        source_id=s.source_id,
        title=s.title,
        heading_path=list(s.heading_path),
        url=s.url,
        text=s.text,
        score=s.score,
        match_reason=s.match_reason,
        injection_flagged=s.injection_flagged,
        live=s.live,
        fetched_at=s.fetched_at,
    )


def _collection(c: retriever_pb2.Collection) -> models.CollectionOut:
    return models.CollectionOut(
        name=c.name,
        dense_dims=c.dense_dims,
        learned_sparse=c.learned_sparse,
        bm25=c.bm25,
        filterable=list(c.filterable),
        embedder_model=c.embedder_model,
        chunks=c.chunks,
        sources=c.sources,
        tenant=c.tenant or "public",
        default_access=list(c.default_access) or ["public"],
        restricted=c.restricted,
    )


def _span(citation: orchestrator_pb2.Citation, name: str) -> list[int] | None:
    """A citation's span as [start, end), None when the orchestrator sent none."""
    if not citation.HasField(name):
        return None
    span = getattr(citation, name)
    return [span.start, span.end]


def _event(event: orchestrator_pb2.AskEvent) -> models.AskEvent | None:
    kind = event.WhichOneof("event")
    if kind == "retrieval":
        return models.RetrievalEvent(sources=[_source(s) for s in event.retrieval.sources])
    if kind == "delta":
        return models.DeltaEvent(text=event.delta.text)
    if kind == "reset":
        return models.ResetEvent(reason=event.reset.reason)
    if kind == "citations":
        return models.CitationsEvent(
            sources=[_source(s) for s in event.citations.sources],
            citations=[
                models.Citation(
                    number=c.number,
                    sentence=c.sentence,
                    status=_VERIFICATION.get(c.status, "unspecified"),
                    support=c.support,
                    method=c.method or "none",
                    contradiction=c.contradiction,
                    answer_span=_span(c, "answer_span"),
                    source_span=_span(c, "source_span"),
                    reason=c.reason,
                    chunk_span=_span(c, "chunk_span"),
                )
                for c in event.citations.citations
            ],
            withheld=[
                models.WithheldSentence(
                    sentence=w.sentence,
                    numbers=list(w.numbers),
                    status=_VERIFICATION.get(w.status, "unspecified"),
                    reason=w.reason,
                )
                for w in event.citations.withheld
            ],
        )
    if kind == "stages":
        return models.StagesEvent(stages=[_stage(st) for st in event.stages.stages])
    if kind == "done":
        return models.DoneEvent(
            mode=_MODES.get(event.done.mode, "unspecified"),
            answer=event.done.answer,
            unsupported_citations=event.done.unsupported_citations,
        )
    if kind == "error":
        raise from_error_info(event.error)
    return None  # an event kind newer than this gateway: skip it


DRAIN_AFTER_DONE_S = 1.0
"""How long the end of an Ask call may take to arrive after its done event."""


def fusion_to_proto(method: str | None) -> orchestrator_pb2.Fusion:
    """The wire value of a ``SearchBody.fusion`` name (checked against the enum by the
    model); None is UNSPECIFIED: the orchestrator's setting."""
    if method is None:
        return orchestrator_pb2.FUSION_UNSPECIFIED
    value: orchestrator_pb2.Fusion = orchestrator_pb2.Fusion.Value(f"FUSION_{method.upper()}")
    return value


class AskStream:
    """One Ask call: iterate it for events (an error event raises its
    GroundwireError); ``cancel()`` cancels the gRPC call, which the orchestrator sees
    as its client going away."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self.finished = False
        self.llm_tokens: int | None = None
        """Tokens (input + output) of every LLM call the answer made, from its done
        event; None until then, or when the orchestrator reported none."""

    def __aiter__(self) -> AsyncIterator[models.AskEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[models.AskEvent]:
        with rpc_errors("orchestrator"):
            async for raw in self._call:
                event = _event(raw)
                if event is None:
                    continue
                if isinstance(event, models.DoneEvent) and raw.done.HasField("llm_usage"):
                    spent = raw.done.llm_usage
                    self.llm_tokens = spent.input_tokens + spent.output_tokens
                if isinstance(event, models.DoneEvent):
                    await self._read_to_end()
                    self.finished = True
                    yield event
                    return
                yield event
        raise BackendFailure(
            "the orchestrator ended the answer without a done event", dependency="orchestrator"
        )

    async def _read_to_end(self) -> None:
        """Reads past done (nothing follows it: the orchestrator ends the call there).

        Readers stop at done; unread, the call never completes on this side, and its
        trace span (ended by the tracing interceptor when the stream is exhausted)
        would never be exported, leaving the orchestrator's spans without their
        parent. Bounded, and a failure after done changes nothing.
        """
        try:
            async with asyncio.timeout(DRAIN_AFTER_DONE_S):
                async for _ in self._call:
                    pass
        except (TimeoutError, grpc.aio.AioRpcError):
            self._call.cancel()

    def cancel(self) -> bool:
        """Cancels the call unless it already ended; True when this call cancelled it."""
        return bool(self._call.cancel())


class Upstream:
    def __init__(self, settings: GatewaySettings) -> None:
        self._settings = settings
        self._orchestrator_channel: grpc.aio.Channel | None = None
        self._retriever_channel: grpc.aio.Channel | None = None

    async def start(self) -> None:
        self._orchestrator_channel = create_channel(self._settings.orchestrator_addr)
        self._retriever_channel = create_channel(self._settings.retriever_addr)

    async def stop(self) -> None:
        for channel in (self._orchestrator_channel, self._retriever_channel):
            if channel is not None:
                await channel.close()

    @property
    def _orchestrator(self) -> orchestrator_pb2_grpc.OrchestratorServiceStub:
        assert self._orchestrator_channel is not None, "Upstream.start() was not called"
        return orchestrator_pb2_grpc.OrchestratorServiceStub(self._orchestrator_channel)

    @property
    def jobs(self) -> JobsClient:
        """The retriever's job calls (``upstream_jobs``), on the same channel."""
        assert self._retriever_channel is not None, "Upstream.start() was not called"
        return JobsClient(self._retriever_channel, self._settings)

    @property
    def sync(self) -> SyncClient:
        """The retriever's Sync call (``upstream_sync``), on the same channel."""
        assert self._retriever_channel is not None, "Upstream.start() was not called"
        return SyncClient(self._retriever_channel, self._settings)

    @property
    def _retriever(self) -> retriever_pb2_grpc.RetrieverServiceStub:
        assert self._retriever_channel is not None, "Upstream.start() was not called"
        return retriever_pb2_grpc.RetrieverServiceStub(self._retriever_channel)

    # --- orchestrator --------------------------------------------------------------------

    async def search(self, body: models.SearchBody, collection: str) -> SearchReply:
        request = orchestrator_pb2.SearchRequest(
            collection=collection,
            query=body.query,
            limit=body.limit,
            filters=[
                orchestrator_pb2.FieldFilter(field=f.field, any_of=f.any_of) for f in body.filters
            ],
            rerank=body.rerank,
            reasons=body.reasons,
            fusion=fusion_to_proto(body.fusion),
            fusion_weights={str(path): w for path, w in (body.fusion_weights or {}).items()},
            group_by=orchestrator_pb2.GROUP_BY_DOCUMENT
            if body.group_by == "document"
            else orchestrator_pb2.GROUP_BY_CHUNK,
        )
        with rpc_errors("orchestrator"):
            reply = await self._orchestrator.Search(
                request, timeout=self._settings.request_timeout_s
            )
        results = [
            models.SearchResult(
                rank=s.number,
                score=s.score,
                chunk_id=s.chunk_id,
                source_id=s.source_id,
                title=s.title,
                heading_path=list(s.heading_path),
                url=s.url,
                text=s.text,
                match_reason=s.match_reason,
                injection_flagged=s.injection_flagged,
                matching_chunks=s.matching_chunks,
                other_headings=list(s.other_headings),
            )
            for s in reply.results
        ]
        usage = reply.llm_usage
        return SearchReply(
            results,
            [_stage(st) for st in reply.stages],
            llm_tokens=usage.input_tokens + usage.output_tokens,
        )

    def ask(
        self,
        messages: Sequence[models.ChatMessage],
        collection: str,
        filters: Sequence[models.FieldFilter] = (),
        *,
        listwise_rerank: bool = False,
        max_agent_steps: int = 0,
        instructions: str = "",
    ) -> AskStream:
        """Starts an Ask call (nothing is sent until the stream is iterated);
        ``instructions``: the operator's (an OpenAI client's system messages)."""
        request = orchestrator_pb2.AskRequest(
            collection=collection,
            messages=[
                orchestrator_pb2.Message(role=_ROLES[m.role], content=m.text) for m in messages
            ],
            filters=[orchestrator_pb2.FieldFilter(field=f.field, any_of=f.any_of) for f in filters],
            listwise_rerank=listwise_rerank,
            max_agent_steps=max_agent_steps,
            instructions=instructions,
        )
        return AskStream(self._orchestrator.Ask(request, timeout=self._settings.chat_timeout_s))

    # --- retriever -----------------------------------------------------------------------

    async def list_collections(self, *, counts: bool) -> list[models.CollectionOut]:
        """Every collection; ``counts`` fills chunks and sources, which count and facet
        every chunk (an admin call: without it the counts are 0 and nothing is read)."""
        with rpc_errors("retriever"):
            reply = await self._retriever.ListCollections(
                retriever_pb2.ListCollectionsRequest(counts=counts),
                timeout=self._settings.request_timeout_s,
            )
        return [_collection(c) for c in reply.collections]

    async def describe_collection(self, name: str) -> models.CollectionOut:
        with rpc_errors("retriever"):
            reply = await self._retriever.DescribeCollection(
                retriever_pb2.DescribeCollectionRequest(name=name),
                timeout=self._settings.request_timeout_s,
            )
        return _collection(reply)

    async def create_collection(self, body: models.CollectionCreate) -> models.CollectionOut:
        with rpc_errors("retriever"):
            reply = await self._retriever.CreateCollection(
                retriever_pb2.CreateCollectionRequest(
                    name=body.name,
                    filterable=body.filterable,
                    tenant=body.tenant or "",
                    default_access=body.default_access,
                    restricted=body.restricted,
                ),
                timeout=self._settings.request_timeout_s,
            )
        return _collection(reply)

    async def drop_collection(self, name: str) -> None:
        with rpc_errors("retriever"):
            await self._retriever.DropCollection(
                retriever_pb2.DropCollectionRequest(name=name),
                timeout=self._settings.request_timeout_s,
            )

    async def ingest(
        self, collection: str, body: models.IngestBody, files: Sequence[tuple[str, bytes]] = ()
    ) -> models.IngestReportOut:
        """Ingests JSON documents (``body``) and uploaded files ((filename, bytes)),
        waiting for the retriever's final report."""
        request = retriever_pb2.IngestRequest(
            collection=collection,
            documents=documents_to_proto(body, files),
            create_collection=body.create_collection,
            full_reindex=body.full_reindex,
        )
        report: retriever_pb2.IngestReport | None = None
        done: list[models.DocumentResultOut] = []  # as each document's switch landed
        started = time.perf_counter()
        try:
            with rpc_errors("retriever"):
                async for event in self._retriever.Ingest(
                    request, timeout=self._settings.admin_timeout_s
                ):
                    if event.WhichOneof("event") == "report":
                        report = event.report
                    elif event.WhichOneof("event") == "progress":
                        done.append(_document_result(event.progress.document))
        except GroundwireError as error:
            if not done:
                raise
            # e.g. 507 after some documents were written: say which (issue 31, 18)
            partial = ingest_report(collection, done, time.perf_counter() - started)
            raise IngestInterrupted(error, partial) from error
        if report is None:
            raise BackendFailure("the retriever sent no ingest report", dependency="retriever")
        return models.IngestReportOut(
            collection=collection,
            documents=[_document_result(d) for d in report.documents],
            ingested=report.ingested,
            updated=report.updated,
            unchanged=report.unchanged,
            skipped=report.skipped,
            chunks_written=report.chunks_written,
            seconds=report.seconds,
        )

    async def delete_source(self, collection: str, source_id: str) -> int:
        with rpc_errors("retriever"):
            reply = await self._retriever.DeleteBySource(
                retriever_pb2.DeleteBySourceRequest(collection=collection, source_id=source_id),
                timeout=self._settings.request_timeout_s,
            )
        return int(reply.deleted)

    async def list_sources(
        self, collection: str, page_token: str = "", limit: int = 100
    ) -> models.SourceList:
        with rpc_errors("retriever"):
            reply = await self._retriever.ListSources(
                retriever_pb2.ListSourcesRequest(
                    collection=collection, page_token=page_token, limit=limit
                ),
                timeout=self._settings.admin_timeout_s,
            )
        return models.SourceList(
            collection=collection,
            sources=[
                models.SourceOut(
                    source_id=s.source_id,
                    title=s.title,
                    url=s.url,
                    doc_type=s.doc_type,
                    chunks=s.chunks,
                    content_hash=s.content_hash,
                    ingested_at=s.ingested_at,
                )
                for s in reply.sources
            ],
            next_page_token=reply.next_page_token,
            total=reply.total,
        )

    async def read_source(self, collection: str, source_id: str) -> models.StoredDocument:
        """The source's chunks in document order (the first 1000: ReadSource's default)."""
        with rpc_errors("retriever"):
            reply = await self._retriever.ReadSource(
                retriever_pb2.ReadSourceRequest(collection=collection, source_id=source_id),
                timeout=self._settings.request_timeout_s,
            )
        first = reply.chunks[0] if reply.chunks else retriever_pb2.Chunk()
        return models.StoredDocument(
            collection=collection,
            source_id=source_id,
            title=first.title,
            url=first.url,
            doc_type=first.doc_type,
            chunks=[
                models.StoredChunk(
                    chunk_id=c.chunk_id,
                    chunk_index=c.chunk_index,
                    heading_path=list(c.heading_path),
                    text=c.text,
                )
                for c in reply.chunks
            ],
            total=reply.total,
        )

    # --- health --------------------------------------------------------------------------

    async def _retriever_storage(self) -> models.DependencyOut | None:
        """The retriever's data disk while it refuses writes (under its free-space
        floor, see Info.storage_warning): not_serving, so health says degraded while
        searches go on. None while writes are accepted, or when Info does not answer
        (the retriever's readiness already reports that)."""
        try:
            info = await self._retriever.Info(retriever_pb2.InfoRequest(), timeout=1.0)
        except grpc.aio.AioRpcError:
            return None
        if not info.storage_warning:
            return None
        return models.DependencyOut(
            status="not_serving", target=info.location, message=info.storage_warning
        )

    async def health(self) -> dict[str, models.DependencyOut]:
        """Each dependency's health: the orchestrator's view of its own, plus ours."""
        assert self._orchestrator_channel is not None and self._retriever_channel is not None
        s = self._settings

        async def direct(
            channel: grpc.aio.Channel, target: str, service: str
        ) -> models.DependencyOut:
            # the service's own health name: its readiness (see groundwire_core.grpc.server)
            ok, ms, reason = await check_health(channel, service, timeout_s=1.0)
            return models.DependencyOut(
                status="serving" if ok else "not_serving",
                target=target,
                latency_ms=ms,
                message=reason,
            )

        orch, retr = await asyncio.gather(
            direct(self._orchestrator_channel, s.orchestrator_addr, _ORCHESTRATOR),
            direct(self._retriever_channel, s.retriever_addr, _RETRIEVER),
        )
        deps = {"orchestrator": orch, "retriever": retr}
        if retr.status == "serving":
            storage = await self._retriever_storage()
            if storage is not None:
                deps["retriever_storage"] = storage
        if orch.status == "serving":
            try:
                with rpc_errors("orchestrator"):
                    reply = await self._orchestrator.Dependencies(
                        orchestrator_pb2.DependenciesRequest(), timeout=2.0
                    )
            except Exception as error:  # health must answer whatever failed
                deps["orchestrator"] = models.DependencyOut(
                    status="not_serving", target=s.orchestrator_addr, message=str(error)
                )
            else:
                for d in reply.dependencies:
                    if d.name not in deps:
                        deps[d.name] = models.DependencyOut(
                            status=_DEP_STATUS.get(d.status, "not_serving"),
                            target=d.target,
                            latency_ms=d.latency_ms,
                            message=d.message,
                        )
        return deps
