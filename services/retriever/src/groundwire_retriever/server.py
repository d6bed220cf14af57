"""gRPC transport of the retriever: convert, call RetrieverCore, convert back."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Sequence

import grpc
from sqlalchemy.ext.asyncio import AsyncEngine

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.clients.embedder import EmbedderClient
from groundwire_core.database import create_engine, prepare, sqlite_url
from groundwire_core.errors import InvalidInput
from groundwire_core.grpc.client import create_channel
from groundwire_retriever import convert, convert_jobs
from groundwire_retriever.db.base import MIGRATIONS
from groundwire_retriever.db.jobs import JobTables
from groundwire_retriever.ingest.pipeline import ChunkingPolicy
from groundwire_retriever.ingest.sandbox import ParseSandbox
from groundwire_retriever.jobs.runner import JobPolicy, JobRunner
from groundwire_retriever.live import LiveLookup, LivePolicy
from groundwire_retriever.private_files import keep_private
from groundwire_retriever.service import IngestSummary, IngestTick, RetrieverCore
from groundwire_retriever.settings import RetrieverSettings
from groundwire_retriever.store import EdgeStore, VectorStore
from groundwire_retriever.store_wiring import qdrant_store
from groundwire_retriever.sync import sync_events


class RetrieverService(retriever_pb2_grpc.RetrieverServiceServicer):
    name = "retriever"
    service_names: Sequence[str] = (
        retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name,
    )

    def __init__(self, settings: RetrieverSettings, *, store: VectorStore | None = None) -> None:
        """``store``: one built by the caller instead of from the settings (tests that
        run two replicas on one qdrant-client local-mode instance)."""
        self._settings = settings
        self._given_store = store
        self._channel: grpc.aio.Channel | None = None
        self._core: RetrieverCore | None = None
        self._sandbox: ParseSandbox | None = None
        self._jobs: JobRunner | None = None
        self._database: AsyncEngine | None = None
        self._live: LiveLookup | None = None

    def register(self, server: grpc.aio.Server) -> None:
        retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(self, server)

    async def start(self) -> None:
        s = self._settings
        if not s.qdrant_url:  # the embedded engine's files: every document's text
            keep_private(s.data_path)
        self._channel = create_channel(s.embedder_addr)
        # Its worker processes start at the first ingest: serving searches costs nothing.
        self._sandbox = ParseSandbox(
            workers=s.parse_workers,
            time_budget_s=s.parse_time_budget_s,
            memory_budget_bytes=s.parse_memory_budget_mib << 20,
        )
        self._core = RetrieverCore(
            self._given_store or self._store(),
            EmbedderClient(self._channel, timeout_s=s.embed_timeout_s),
            policy=ChunkingPolicy(
                min_tokens=s.chunk_min_tokens,
                max_tokens=s.chunk_max_tokens,
                overlap_tokens=s.chunk_overlap_tokens,
                max_document_bytes=s.max_document_bytes,
                max_document_tokens=s.max_document_tokens,
            ),
            embed_batch=s.embed_batch,
            optimize_after_chunks=s.optimize_after_chunks,
            sandbox=self._sandbox,
            keep_multi_vectors=s.keep_multi_vectors,
        )
        await self._core.start()
        self._live = LiveLookup(
            self._core,
            EmbedderClient(self._channel),
            outbound=s.outbound_policy(),
            policy=LivePolicy(
                max_lookups=s.live_max_lookups,
                max_page_bytes=s.live_max_page_bytes,
                fetch_timeout_s=s.live_fetch_timeout_s,
                total_timeout_s=s.live_total_timeout_s,
                domains={k: tuple(v) for k, v in s.live_domains.items()},
            ),
        )
        # the system of record of the jobs: shared by every replica (PostgreSQL), or a
        # SQLite file beside the collections for one machine
        url = s.database_url.get_secret_value() or sqlite_url(
            (s.jobs_path or s.data_path / ".jobs") / "jobs.sqlite3"
        )
        self._database = create_engine(url)
        await prepare(self._database, MIGRATIONS, migrate=s.migrate_on_start)
        self._jobs = JobRunner(
            self._core,
            JobTables(self._database),
            sync_roots=s.sync_roots,
            outbound=s.outbound_policy(),
            policy=JobPolicy(
                poll_s=s.job_poll_s,
                heartbeat_s=s.job_heartbeat_s,
                stale_after_s=s.job_stale_after_s,
                workers=s.job_workers,
                max_jobs_per_tenant=s.max_queued_jobs_per_tenant,
                max_bytes_per_tenant=s.max_queued_job_bytes_per_tenant,
            ),
        )
        await self._jobs.start()

    def _store(self) -> VectorStore:
        """A Qdrant server (or qdrant-client's local mode) when QDRANT_URL is set,
        else the embedded engine on DATA_PATH."""
        s = self._settings
        if s.qdrant_url:
            return qdrant_store(s, s.qdrant_url)
        return EdgeStore(
            s.data_path,
            search_threads=s.search_threads,
            min_free_bytes=s.min_free_disk_mib * 1024 * 1024,
        )

    async def stop(self) -> None:
        if self._jobs is not None:  # running jobs stop at a document boundary first
            await self._jobs.stop()
        if self._database is not None:
            await self._database.dispose()
        if self._core is not None:
            await self._core.stop()
        if self._sandbox is not None:
            await self._sandbox.close()
        if self._channel is not None:
            await self._channel.close()

    async def check(self) -> None:
        """Unavailable while the Qdrant server does not answer (the embedded engine is
        in this process). The embedder is not checked: searches take vectors from
        their caller, and ingest names the embedder when it is away."""
        await self.core.check()

    @property
    def core(self) -> RetrieverCore:
        if self._core is None:
            raise RuntimeError("the retriever is not started")
        return self._core

    async def CreateCollection(
        self, request: retriever_pb2.CreateCollectionRequest, context: grpc.aio.ServicerContext
    ) -> retriever_pb2.Collection:
        await self.core.create_collection(
            request.name,
            list(request.filterable),
            default_access=list(request.default_access),
            restricted=request.restricted,
            tenant=request.tenant,
        )
        return convert.collection_to_proto(await self.core.describe(request.name))

    async def ListCollections(
        self, request: retriever_pb2.ListCollectionsRequest, context: grpc.aio.ServicerContext
    ) -> retriever_pb2.ListCollectionsResponse:
        stats = await self.core.list_collections(counts=request.counts)
        return retriever_pb2.ListCollectionsResponse(
            collections=[convert.collection_to_proto(s) for s in stats]
        )

    async def DescribeCollection(
        self, request: retriever_pb2.DescribeCollectionRequest, context: grpc.aio.ServicerContext
    ) -> retriever_pb2.Collection:
        return convert.collection_to_proto(await self.core.describe(request.name))

    async def DropCollection(
        self, request: retriever_pb2.DropCollectionRequest, context: grpc.aio.ServicerContext
    ) -> retriever_pb2.DropCollectionResponse:
        await self.core.drop_collection(request.name)
        return retriever_pb2.DropCollectionResponse()

    async def Ingest(
        self, request: retriever_pb2.IngestRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[retriever_pb2.IngestEvent]:
        docs = [convert.document_from_proto(d) for d in request.documents]
        events = self.core.ingest(
            request.collection,
            docs,
            create=request.create_collection,
            full_reindex=request.full_reindex,
        )
        # aclosing: when the caller goes away, the ingest's cleanup (dropping an
        # unfinished re-index) runs now, not whenever the generator is collected.
        async with contextlib.aclosing(events):
            async for item in events:
                yield self._ingest_event(item)

    @staticmethod
    def _ingest_event(item: IngestTick | IngestSummary) -> retriever_pb2.IngestEvent:
        if isinstance(item, IngestSummary):
            outcomes = item.outcomes
            return retriever_pb2.IngestEvent(
                report=retriever_pb2.IngestReport(
                    documents=[convert.outcome_to_proto(o) for o in outcomes],
                    ingested=sum(o.status == "ingested" for o in outcomes),
                    updated=sum(o.status == "updated" for o in outcomes),
                    unchanged=sum(o.status == "unchanged" for o in outcomes),
                    skipped=sum(o.status == "skipped" for o in outcomes),
                    chunks_written=item.chunks_written,
                    seconds=item.seconds,
                )
            )
        return retriever_pb2.IngestEvent(
            progress=retriever_pb2.IngestProgress(
                done=item.done,
                total=item.total,
                document=convert.outcome_to_proto(item.outcome),
            )
        )

    @property
    def jobs(self) -> JobRunner:
        if self._jobs is None:
            raise RuntimeError("the retriever is not started")
        return self._jobs

    async def StartJob(
        self, request: retriever_pb2.StartJobRequest, context: grpc.aio.ServicerContext
    ) -> retriever_pb2.Job:
        kind = request.WhichOneof("job")
        if kind == "sync":
            definition = convert.sync_definition_from_proto(request.sync)
            return convert_jobs.job_to_proto(
                await self.jobs.start_sync(request.collection, definition)
            )
        if kind != "ingest":
            raise InvalidInput("StartJob: send the job (ingest or sync)")
        spec = request.ingest
        job = await self.jobs.start_ingest(
            request.collection,
            [convert.document_from_proto(d) for d in spec.documents],
            create=spec.create_collection,
            full_reindex=spec.full_reindex,
        )
        return convert_jobs.job_to_proto(job)

    async def GetJob(
        self, request: retriever_pb2.GetJobRequest, context: grpc.aio.ServicerContext
    ) -> retriever_pb2.Job:
        return convert_jobs.job_to_proto(await self.jobs.get(request.id, request.tenant))

    async def WatchJob(
        self, request: retriever_pb2.GetJobRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[retriever_pb2.Job]:
        async with contextlib.aclosing(self.jobs.watch(request.id, request.tenant)) as updates:
            async for job in updates:
                yield convert_jobs.job_to_proto(job, documents=job.state.final)

    async def CancelJob(
        self, request: retriever_pb2.CancelJobRequest, context: grpc.aio.ServicerContext
    ) -> retriever_pb2.Job:
        return convert_jobs.job_to_proto(await self.jobs.cancel(request.id, request.tenant))

    async def ListJobs(
        self, request: retriever_pb2.ListJobsRequest, context: grpc.aio.ServicerContext
    ) -> retriever_pb2.ListJobsResponse:
        jobs = await self.jobs.recent(request.collection, request.limit or 100, request.tenant)
        return retriever_pb2.ListJobsResponse(
            jobs=[convert_jobs.job_to_proto(j, documents=False) for j in jobs]
        )

    async def Upsert(
        self, request: retriever_pb2.UpsertRequest, context: grpc.aio.ServicerContext
    ) -> retriever_pb2.UpsertResponse:
        chunks = [convert.chunk_from_proto(c) for c in request.chunks]
        return retriever_pb2.UpsertResponse(
            upserted=await self.core.upsert(request.collection, chunks)
        )

    async def DeleteBySource(
        self, request: retriever_pb2.DeleteBySourceRequest, context: grpc.aio.ServicerContext
    ) -> retriever_pb2.DeleteBySourceResponse:
        deleted = await self.core.delete_by_source(request.collection, request.source_id)
        return retriever_pb2.DeleteBySourceResponse(deleted=deleted)

    async def ListSources(
        self, request: retriever_pb2.ListSourcesRequest, context: grpc.aio.ServicerContext
    ) -> retriever_pb2.ListSourcesResponse:
        page = await self.core.list_sources(
            request.collection, page_token=request.page_token, limit=request.limit or 100
        )
        return convert.source_page_to_proto(page)

    async def ReadSource(
        self, request: retriever_pb2.ReadSourceRequest, context: grpc.aio.ServicerContext
    ) -> retriever_pb2.ReadSourceResponse:
        found = await self.core.read_source(
            request.collection,
            request.source_id,
            offset=request.offset,
            limit=request.limit or 1000,
        )
        return convert.source_chunks_to_proto(found)

    async def Search(
        self, request: retriever_pb2.SearchRequest, context: grpc.aio.ServicerContext
    ) -> retriever_pb2.SearchResponse:
        started = time.perf_counter()
        query = convert.query_from_proto(request)
        inner = time.perf_counter()
        result = await self.core.search(request.collection, query)
        done = time.perf_counter()
        response = retriever_pb2.SearchResponse(
            paths=[convert.path_report_to_proto(p) for p in result.paths]
        )
        if result.late_interaction is not None:
            response.late_interaction.CopyFrom(
                convert.late_interaction_to_proto(result.late_interaction)
            )
        for hit in result.hits:
            convert.hit_to_proto(hit, response.hits.add())
        timing = response.timing
        timing.queue_ms = (inner - started) * 1e3
        timing.inference_ms = (done - inner) * 1e3
        timing.total_ms = (time.perf_counter() - started) * 1e3
        return response

    async def Stats(
        self, request: retriever_pb2.StatsRequest, context: grpc.aio.ServicerContext
    ) -> retriever_pb2.StatsResponse:
        stats = await self.core.list_collections(counts=True)
        return retriever_pb2.StatsResponse(
            collections=[convert.collection_to_proto(s) for s in stats], engine=self.core.engine
        )

    async def Info(
        self, request: retriever_pb2.InfoRequest, context: grpc.aio.ServicerContext
    ) -> retriever_pb2.InfoResponse:
        specs = await self.core.list_specs()  # no counts: Info is a cheap probe
        return retriever_pb2.InfoResponse(
            engine=self.core.engine,
            location=self.core.location,
            embedder=self._settings.embedder_addr,
            collections=len(specs),
            storage_warning=self.core.storage_warning(),
        )

    async def LookupLive(
        self, request: retriever_pb2.LookupLiveRequest, context: grpc.aio.ServicerContext
    ) -> retriever_pb2.LookupLiveResponse:
        if self._live is None:
            raise RuntimeError("the retriever is not started")
        if not self._settings.live_max_lookups:
            raise InvalidInput("live lookups are off (LIVE_MAX_LOOKUPS is 0)")
        result = await self._live.lookup(
            request.collection,
            request.query,
            max_lookups=request.max_lookups,
            allowed_domains=list(request.allowed_domains),
            limit=request.limit or 5,
            timeout_s=request.timeout_s,
            domains_only=request.domains_only,
        )
        return convert.live_result_to_proto(result)

    async def Sync(
        self, request: retriever_pb2.SyncRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[retriever_pb2.SyncEvent]:
        events = sync_events(
            self.core,
            request.collection,
            convert.sync_definition_from_proto(request.definition),
            dry_run=request.dry_run,
            folder_roots=self._settings.sync_roots,
            outbound=self._settings.outbound_policy(),
        )
        # aclosing: a caller that goes away cancels the sync between sources now
        async with contextlib.aclosing(events):
            async for item in events:
                yield convert.sync_event_to_proto(item)
