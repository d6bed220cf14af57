"""An in-memory upstream (orchestrator + retriever) for the gateway's HTTP layer, and
clients of the app built on it (httpx over ASGI: no sockets)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any, cast

import httpx
import pytest

from groundwire_core.context import current_request_id
from groundwire_core.errors import AlreadyExists, GroundwireError, NotFound
from groundwire_gateway import job_models, models
from groundwire_gateway.app import create_app
from groundwire_gateway.settings import GatewaySettings
from groundwire_gateway.state import SearchReply, UpstreamApi

SERVING = models.DependencyOut(status="serving", target="127.0.0.1:1")

SOURCES = [
    models.Source(
        number=1,
        chunk_id="c1",
        source_id="install.md",
        title="Install",
        heading_path=["Guide", "Install"],
        url="https://docs.example.com/install",
        text="Run pip install groundwire.",
        score=0.9,
    ),
    models.Source(
        number=2,
        chunk_id="c2",
        source_id="limits.md",
        title="Rate limits",
        heading_path=["Guide", "Limits"],
        url="https://docs.example.com/limits",
        text="Clients get 15 chats a minute.",
        score=0.7,
    ),
]
STAGES = [
    models.StageOut(name="retrieval", ms=3.2, fallback=False),
    models.StageOut(
        name="rerank", ms=0.4, fallback=True, reason="no reranker", dependency="reranker"
    ),
    models.StageOut(name="answer", ms=12.0, fallback=False),
]
DELTAS = ["Install it ", "with pip [1]", "; clients get ", "15 chats [2]."]


def default_script() -> list[models.AskEvent | BaseException]:
    return [
        models.RetrievalEvent(sources=SOURCES),
        *(models.DeltaEvent(text=t) for t in DELTAS),
        models.CitationsEvent(
            sources=SOURCES,
            citations=[
                models.Citation(
                    number=1, sentence="Install it with pip [1]", status="supported", support=0.9
                ),
            ],
        ),
        models.StagesEvent(stages=STAGES),
        models.DoneEvent(mode="generated", answer="".join(DELTAS)),
    ]


class FakeStream:
    """Plays a script of events (an exception in it is raised at that point)."""

    def __init__(self, script: list[models.AskEvent | BaseException], delay_s: float) -> None:
        self.script = script
        self.delay_s = delay_s
        self.cancelled = False
        self.done = False
        self.llm_tokens: int | None = None

    def __aiter__(self) -> AsyncIterator[models.AskEvent]:
        return self._play()

    async def _play(self) -> AsyncIterator[models.AskEvent]:
        for i, item in enumerate(self.script):
            if i and self.delay_s:
                await asyncio.sleep(self.delay_s)
            if isinstance(item, BaseException):
                self.done = True
                raise item
            yield item
        self.done = True

    def cancel(self) -> bool:
        if self.done or self.cancelled:
            return False
        self.cancelled = True
        return True


class FakeJobs:
    """The retriever's jobs in memory: an ingest job runs at once through the fake
    ingest (so it is recorded there) and is queued, then succeeded, for watchers."""

    def __init__(self, upstream: FakeUpstream) -> None:
        self.upstream = upstream
        self.jobs: dict[str, job_models.JobOut] = {}
        self.owners: dict[str, str] = {}

    async def start_ingest(
        self, collection: str, body: models.IngestBody, files: list[tuple[str, bytes]]
    ) -> job_models.JobOut:
        report = await self.upstream.ingest(collection, body, files)
        now = datetime.now(UTC)
        job = job_models.JobOut(
            id=f"{len(self.jobs) + 1:032x}",
            collection=collection,
            kind="ingest",
            state="succeeded",
            created_at=now,
            started_at=now,
            finished_at=now,
            counts=job_models.JobCountsOut(
                total=len(report.documents),
                done=len(report.documents),
                ingested=report.ingested,
                updated=0,
                unchanged=0,
                skipped=0,
                failed=0,
                deleted=0,
                chunks_written=report.chunks_written,
            ),
            documents=[
                job_models.JobDocumentOut(source_id=d.source_id, outcome="ingested", chunks=1)
                for d in report.documents
            ],
            error="",
            delta=None,
            cancel_requested=False,
        )
        self.jobs[job.id] = job
        return job.model_copy(
            update={
                "state": "queued",
                "documents": [],
                "started_at": None,
                "finished_at": None,
                "counts": job_models.JobCountsOut(
                    **dict.fromkeys(job_models.JobCountsOut.model_fields, 0)
                ),
            }
        )

    async def start_sync(self, collection: str, body: Any) -> job_models.JobOut:
        now = datetime.now(UTC)
        job = job_models.JobOut(
            id=f"{len(self.jobs) + 1:032x}",
            collection=collection,
            kind="sync",
            state="queued",
            created_at=now,
            started_at=None,
            finished_at=None,
            counts=job_models.JobCountsOut(
                **dict.fromkeys(job_models.JobCountsOut.model_fields, 0)
            ),
            documents=[],
            error="",
            delta=None,
            cancel_requested=False,
        )
        self.jobs[job.id] = job
        return job

    def owner(self, job: job_models.JobOut) -> str:
        """As the retriever: a job belongs to its collection's tenant when started."""
        if job.id not in self.owners:
            found = self.upstream.collections.get(job.collection)
            self.owners[job.id] = found.tenant if found is not None else "public"
        return self.owners[job.id]

    async def get(self, job_id: str, tenant: str = "") -> job_models.JobOut:
        job = self.jobs.get(job_id)
        if job is None or tenant not in ("", self.owner(job)):
            raise NotFound(f"job {job_id!r} does not exist")
        return job

    async def cancel(self, job_id: str, tenant: str = "") -> job_models.JobOut:
        return await self.get(job_id, tenant)

    async def recent(
        self, collection: str = "", limit: int = 100, tenant: str = ""
    ) -> list[job_models.JobOut]:
        found = [
            j
            for j in self.jobs.values()
            if collection in ("", j.collection) and tenant in ("", self.owner(j))
        ]
        return [j.model_copy(update={"documents": []}) for j in reversed(found)][:limit]

    async def watch(self, job_id: str, tenant: str = "") -> AsyncIterator[job_models.JobOut]:
        job = await self.get(job_id, tenant)
        yield job.model_copy(update={"state": "running", "documents": []})
        yield job


class FakeUpstream:
    """The orchestrator and the retriever in memory. ``error`` makes search, ask and
    the admin calls raise; ``script`` is what Ask streams."""

    def __init__(self) -> None:
        self.error: BaseException | None = None
        self.calls: list[tuple[models.SearchBody, str, str]] = []
        self.asks: list[dict[str, Any]] = []
        self.streams: list[FakeStream] = []
        self.asked = asyncio.Event()
        self.script: list[models.AskEvent | BaseException] = default_script()
        self.delay_s = 0.0
        self.list_calls = 0
        self.counted_lists = 0
        """Listings that asked for counts (which count every chunk: admin only)."""
        self.health_calls = 0
        self.health_delay_s = 0.0
        self.search_llm_tokens = 0
        self.ingested: list[tuple[str, models.IngestBody, list[tuple[str, bytes]]]] = []
        self.jobs = FakeJobs(self)
        self.source_pages: list[tuple[str, str, int]] = []
        self.reads: list[tuple[str, str]] = []
        self.documents: dict[str, models.StoredDocument] = {}
        self.collections: dict[str, models.CollectionOut] = {}
        for name, extra in (("docs", []), ("team_notes-2", ["type"])):
            self.add_collection(name, extra)
        self.deps: dict[str, models.DependencyOut] = {
            name: SERVING for name in ("orchestrator", "retriever", "embedder", "reranker")
        }

    def add_collection(self, name: str, extra_fields: list[str], tenant: str = "public") -> None:
        self.collections[name] = models.CollectionOut(
            name=name,
            dense_dims=384,
            learned_sparse=False,
            bm25=True,
            filterable=["source_id", "doc_type", "title", *extra_fields],
            embedder_model="minilm",
            chunks=3,
            sources=2,
            tenant=tenant,
        )

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def _fail(self) -> None:
        if self.error is not None:
            raise self.error

    async def search(self, body: models.SearchBody, collection: str) -> SearchReply:
        self.calls.append((body, collection, current_request_id()))
        self._fail()
        result = models.SearchResult(
            rank=1,
            score=0.9,
            chunk_id="c1",
            source_id="s1",
            title="Guide",
            heading_path=["Guide", "Install"],
            url="https://example.com",
            text="Run it.",
        )
        return SearchReply(
            [result],
            [models.StageOut(name="retrieve", ms=1.5, fallback=False)],
            llm_tokens=self.search_llm_tokens,
        )

    def ask(
        self,
        messages: list[models.ChatMessage],
        collection: str,
        filters: list[models.FieldFilter],
        *,
        listwise_rerank: bool = False,
        max_agent_steps: int = 0,
        instructions: str = "",
    ) -> FakeStream:
        self.asks.append(
            {
                "messages": [(m.role, m.text) for m in messages],
                "collection": collection,
                "filters": [(f.field, f.any_of) for f in filters],
                "listwise_rerank": listwise_rerank,
                "max_agent_steps": max_agent_steps,
                "instructions": instructions,
            }
        )
        self.asked.set()
        script = list(self.script)
        if self.error is not None:
            script = [self.error]
        stream = FakeStream(script, self.delay_s)
        self.streams.append(stream)
        return stream

    async def list_collections(self, *, counts: bool) -> list[models.CollectionOut]:
        self.list_calls += 1
        self.counted_lists += counts
        return list(self.collections.values())

    async def describe_collection(self, name: str) -> models.CollectionOut:
        if name not in self.collections:
            raise NotFound(f"no collection '{name}'")
        return self.collections[name]

    async def create_collection(self, body: models.CollectionCreate) -> models.CollectionOut:
        self._fail()
        if body.name in self.collections:
            raise AlreadyExists(f"collection '{body.name}' exists")
        self.add_collection(body.name, body.filterable, body.tenant or "public")
        return self.collections[body.name]

    async def drop_collection(self, name: str) -> None:
        self._fail()
        if self.collections.pop(name, None) is None:
            raise NotFound(f"no collection '{name}'")

    async def ingest(
        self, collection: str, body: models.IngestBody, files: list[tuple[str, bytes]]
    ) -> models.IngestReportOut:
        self._fail()
        if collection not in self.collections:
            if not body.create_collection:
                raise NotFound(f"no collection '{collection}'")
            self.add_collection(collection, [])
        self.ingested.append((collection, body, files))
        ids = [d.source_id for d in body.documents] + [name for name, _ in files]
        return models.IngestReportOut(
            collection=collection,
            documents=[
                models.DocumentResultOut(source_id=i, status="ingested", chunks=1) for i in ids
            ],
            ingested=len(ids),
            unchanged=0,
            skipped=0,
            chunks_written=len(ids),
            seconds=0.01,
        )

    async def delete_source(self, collection: str, source_id: str) -> int:
        self._fail()
        if collection not in self.collections:
            raise NotFound(f"no collection '{collection}'")
        return 2

    async def list_sources(
        self, collection: str, page_token: str = "", limit: int = 100
    ) -> models.SourceList:
        self._fail()
        self.source_pages.append((collection, page_token, limit))
        if collection not in self.collections:
            raise NotFound(f"no collection '{collection}'")
        return models.SourceList(
            collection=collection,
            sources=[
                models.SourceOut(
                    source_id="a/index.html",
                    title="A",
                    url="",
                    doc_type="",
                    chunks=2,
                    content_hash="ab" * 32,
                    ingested_at=1.0,
                )
            ],
            next_page_token="a/index.html",
            total=2,
        )

    async def read_source(self, collection: str, source_id: str) -> models.StoredDocument:
        self._fail()
        self.reads.append((collection, source_id))
        if collection not in self.collections:
            raise NotFound(f"no collection '{collection}'")
        if source_id not in self.documents:
            raise NotFound(f"collection '{collection}' has no source '{source_id}'")
        return self.documents[source_id].model_copy(update={"collection": collection})

    async def health(self) -> dict[str, models.DependencyOut]:
        self.health_calls += 1
        if self.health_delay_s:
            await asyncio.sleep(self.health_delay_s)
        return dict(self.deps)


@pytest.fixture
def upstream() -> FakeUpstream:
    return FakeUpstream()


ClientFactory = Callable[..., httpx.AsyncClient]


@pytest.fixture
async def make_client(upstream: FakeUpstream) -> AsyncIterator[ClientFactory]:
    """Builds a client of a fresh app on ``upstream`` with the given settings."""
    clients: list[httpx.AsyncClient] = []
    started = contextlib.AsyncExitStack()

    def make(**settings: Any) -> httpx.AsyncClient:
        app = create_app(GatewaySettings(**settings), cast(UpstreamApi, upstream))
        # An unhandled exception is answered with a 500 and then re-raised to the
        # server (Starlette's ServerErrorMiddleware); the test looks at the response.
        transport = LifespanTransport(app, started)
        client = httpx.AsyncClient(transport=transport, base_url="http://gateway")
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()
    await started.aclose()


class LifespanTransport(httpx.ASGITransport):
    """ASGITransport that runs the app's start-up (its system of record migrated, …)
    before the first request and its shutdown when the test ends."""

    def __init__(self, app: Any, stack: contextlib.AsyncExitStack) -> None:
        super().__init__(app=app, raise_app_exceptions=False)
        self._app = app
        self._stack = stack
        self._starting = False
        self._started = asyncio.Event()  # concurrent first requests all wait for it

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not self._starting:
            self._starting = True
            await self._stack.enter_async_context(self._app.router.lifespan_context(self._app))
            self._started.set()
            await asyncio.sleep(0)  # the waiting requests go on together with this one
        await self._started.wait()
        return await super().handle_async_request(request)


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The error object of a JSON error response (checked for shape)."""
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["request_id"], str) and error["request_id"] not in ("", "-")
    return error


@pytest.fixture
def error_json() -> Callable[[httpx.Response], dict[str, Any]]:
    return error_of


def sse_events(text: str) -> list[tuple[str, str]]:
    """(event name, data) pairs of a text/event-stream body."""
    out: list[tuple[str, str]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith(":") or not line:
                continue
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
        if data:
            out.append((name, "\n".join(data)))
    return out


@pytest.fixture
def parse_sse() -> Callable[[str], list[tuple[str, str]]]:
    return sse_events


__all__ = ["FakeStream", "FakeUpstream", "GroundwireError"]
