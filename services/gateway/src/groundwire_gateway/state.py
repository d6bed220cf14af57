"""What every route needs, built once per app and passed to the route factories."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from groundwire_core.database import SessionFactory
from groundwire_gateway import job_models, models
from groundwire_gateway.auth import Authenticator
from groundwire_gateway.catalog import Catalog
from groundwire_gateway.db.conversations import ConversationStore
from groundwire_gateway.limits import Limiter
from groundwire_gateway.metrics import GatewayMetrics
from groundwire_gateway.settings import GatewaySettings
from groundwire_gateway.sync_models import SyncBody, SyncReportOut


class EventStream(Protocol):
    """One Ask call's events (``upstream.AskStream``, or a fake)."""

    llm_tokens: int | None
    """Tokens of every LLM call the answer made, once its done event came (None: not
    reported); the chat's token budget is settled with it."""

    def __aiter__(self) -> AsyncIterator[models.AskEvent]: ...

    def cancel(self) -> bool: ...


@dataclass(frozen=True)
class SearchReply:
    """The orchestrator's Search reply, as the HTTP layer needs it."""

    results: list[models.SearchResult]
    stages: list[models.StageOut]
    llm_tokens: int = 0
    """Tokens (input + output) of the LLM calls the search made (analysis, listwise),
    charged to the tenant's budget."""


class JobsApi(Protocol):
    """The retriever's job calls (``upstream_jobs.JobsClient``, or a fake)."""

    async def start_ingest(
        self, collection: str, body: models.IngestBody, files: list[tuple[str, bytes]]
    ) -> job_models.JobOut: ...

    async def start_sync(self, collection: str, body: SyncBody) -> job_models.JobOut: ...

    # tenant: only a job it owns (NotFound otherwise); "" for any (the operator)
    async def get(self, job_id: str, tenant: str = "") -> job_models.JobOut: ...

    async def cancel(self, job_id: str, tenant: str = "") -> job_models.JobOut: ...

    async def recent(
        self, collection: str = "", limit: int = 100, tenant: str = ""
    ) -> list[job_models.JobOut]: ...

    def watch(self, job_id: str, tenant: str = "") -> AsyncIterator[job_models.JobOut]: ...


class SyncApi(Protocol):
    """The retriever's Sync call (``upstream_sync.SyncClient``, or a fake)."""

    async def sync(self, collection: str, body: SyncBody) -> SyncReportOut: ...


class UpstreamApi(Protocol):
    """The orchestrator and retriever calls the routes make (``Upstream``, or a fake)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def search(self, body: models.SearchBody, collection: str) -> SearchReply: ...

    def ask(
        self,
        messages: list[models.ChatMessage],
        collection: str,
        filters: list[models.FieldFilter],
        *,
        listwise_rerank: bool = False,
        max_agent_steps: int = 0,
        instructions: str = "",
    ) -> EventStream: ...

    async def list_collections(self, *, counts: bool) -> list[models.CollectionOut]: ...

    async def describe_collection(self, name: str) -> models.CollectionOut: ...

    async def create_collection(self, body: models.CollectionCreate) -> models.CollectionOut: ...

    async def drop_collection(self, name: str) -> None: ...

    async def ingest(
        self, collection: str, body: models.IngestBody, files: list[tuple[str, bytes]]
    ) -> models.IngestReportOut: ...

    async def delete_source(self, collection: str, source_id: str) -> int: ...

    async def list_sources(
        self, collection: str, page_token: str = "", limit: int = 100
    ) -> models.SourceList: ...

    async def read_source(self, collection: str, source_id: str) -> models.StoredDocument: ...

    async def health(self) -> dict[str, models.DependencyOut]: ...

    @property
    def sync(self) -> SyncApi: ...

    @property
    def jobs(self) -> JobsApi: ...


@dataclass(frozen=True)
class GatewayState:
    settings: GatewaySettings
    upstream: UpstreamApi
    limiter: Limiter
    catalog: Catalog
    auth: Authenticator
    metrics: GatewayMetrics
    sessions: SessionFactory | None = None
    """The gateway's system of record (tenants, keys, audit, …; see db/)."""
    conversations: ConversationStore | None = None
    """Stored answers and feedback (None: not stored)."""
