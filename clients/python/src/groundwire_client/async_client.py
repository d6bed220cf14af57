"""The asynchronous client (:class:`AsyncClient`): :class:`~groundwire_client.Client`'s
API with ``async``/``await``; streams are async iterators."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import httpx_sse

from groundwire_client import models, wire
from groundwire_client.client import DEFAULT_URL


class AsyncClient:
    """A Groundwire gateway over HTTP, asynchronously (see :class:`~groundwire_client.Client`).

    ``api_key`` is sent as ``Authorization: Bearer``; admin calls (collections,
    ingest, jobs) need an admin key. Every method raises
    :class:`~groundwire_client.errors.APIError` (a subclass per refusal, with the
    API's code, request id and retry-after) or
    :class:`~groundwire_client.errors.APIConnectionError`.
    ``transport`` replaces the network (tests: ``httpx.MockTransport``)."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=wire.headers(api_key, headers),
            timeout=timeout,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _send(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        with wire.transport_errors():
            return await self._http.request(method, url, **kwargs)

    @asynccontextmanager
    async def _events(
        self, method: str, url: str, **kwargs: Any
    ) -> AsyncIterator[httpx_sse.EventSource]:
        with wire.transport_errors():
            async with httpx_sse.aconnect_sse(self._http, method, url, **kwargs) as es:
                if es.response.status_code >= 400:
                    await es.response.aread()
                    wire.check(es.response)
                yield es

    # --- asking --------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        collection: str | None = None,
        limit: int = 10,
        filters: wire.Filters | None = None,
        rerank: bool = True,
        reasons: bool = False,
        fusion: str | None = None,
        fusion_weights: Mapping[str, float] | None = None,
    ) -> models.SearchResponse:
        """Ranked passages with their sources, scores and the stage report."""
        body = wire.search_body(
            query,
            collection=collection,
            limit=limit,
            filters=filters,
            rerank=rerank,
            reasons=reasons,
            fusion=fusion,
            fusion_weights=fusion_weights,
        )
        return wire.parse(models.SearchResponse, await self._send("POST", "/v1/search", json=body))

    async def chat(
        self,
        conversation: wire.MessagesIn,
        *,
        collection: str | None = None,
        filters: wire.Filters | None = None,
        listwise_rerank: bool = False,
    ) -> AsyncIterator[models.ChatEvent]:
        """The answer as typed events, in the order the server sends them, ending with
        a :class:`~groundwire_client.models.DoneEvent` or an
        :class:`~groundwire_client.models.ErrorEvent` (yielded, not raised: the text
        so far may still be worth showing). A refusal before the answer starts (a
        limit, an unknown collection) raises."""
        body = wire.chat_body(
            conversation, collection=collection, filters=filters, listwise_rerank=listwise_rerank
        )
        async with self._events("POST", "/v1/chat", json=body) as source:
            async for sse in source.aiter_sse():
                event = wire.chat_event(sse.event, sse.data)
                if event is not None:
                    yield event
                    if wire.is_last(event):
                        return

    async def ask(
        self,
        conversation: wire.MessagesIn,
        *,
        collection: str | None = None,
        filters: wire.Filters | None = None,
        listwise_rerank: bool = False,
    ) -> models.Answer:
        """The final answer with its citations (each verified), the cited sources and
        the stage report. Raises the API's error, also one that ends the stream."""
        body = wire.chat_body(
            conversation, collection=collection, filters=filters, listwise_rerank=listwise_rerank
        )
        answer = wire.AnswerBuilder()
        async with self._events("POST", "/v1/chat", json=body) as source:
            async for sse in source.aiter_sse():
                event = wire.chat_event(sse.event, sse.data)
                if event is not None:
                    answer.take(event)
                    if wire.is_last(event):
                        break
            return answer.result(source.response.headers.get(wire.REQUEST_ID_HEADER, ""))

    # --- collections and sources -----------------------------------------------------------

    async def collection_names(self) -> list[str]:
        """The collections any caller may search (``GET /v1/models``)."""
        return wire.collection_names(await self._send("GET", "/v1/models"))

    async def collections(self) -> list[models.Collection]:
        """Every collection with its fields and counts (admin)."""
        response = await self._send("GET", "/v1/admin/collections")
        return wire.parse(models.CollectionList, response).collections

    async def collection(self, name: str) -> models.Collection:
        return wire.parse(
            models.Collection, await self._send("GET", f"/v1/admin/collections/{name}")
        )

    async def create_collection(
        self, name: str, filterable: Iterable[str] = ()
    ) -> models.Collection:
        body = {"name": name, "filterable": list(filterable)}
        response = await self._send("POST", "/v1/admin/collections", json=body)
        return wire.parse(models.Collection, response)

    async def drop_collection(self, name: str) -> None:
        wire.check(await self._send("DELETE", f"/v1/admin/collections/{name}"))

    async def sources(
        self, collection: str, *, page_token: str = "", limit: int = 100
    ) -> models.SourcePage:
        """One page of the sources a collection holds, sorted by source id (admin)."""
        params = {"page_token": page_token, "limit": limit}
        response = await self._send(
            "GET", f"/v1/admin/collections/{collection}/sources", params=params
        )
        return wire.parse(models.SourcePage, response)

    async def iter_sources(self, collection: str) -> AsyncIterator[models.SourceInfo]:
        """Every source of a collection, page after page (admin)."""
        token = ""
        while True:
            page = await self.sources(collection, page_token=token)
            for source in page.sources:
                yield source
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def delete_source(self, collection: str, source_id: str) -> int:
        """Deletes every chunk of one source; the number deleted (admin)."""
        response = await self._send(
            "DELETE",
            f"/v1/admin/collections/{collection}/documents",
            params={"source_id": source_id},
        )
        return wire.deleted(response)

    # --- ingest and jobs -----------------------------------------------------------------

    async def ingest_documents(
        self,
        collection: str,
        documents: Iterable[models.Document | Mapping[str, Any]],
        *,
        create_collection: bool = False,
        full_reindex: bool = False,
    ) -> models.Job:
        """Queues an ingest job of JSON documents and returns it at once (admin);
        follow it with :meth:`watch_job` or :meth:`wait_for_job`."""
        body = wire.ingest_body(
            documents, create_collection=create_collection, full_reindex=full_reindex
        )
        response = await self._send(
            "POST", f"/v1/admin/collections/{collection}/documents", json=body
        )
        return wire.parse(models.Job, response, key="job")

    async def upload_files(
        self,
        collection: str,
        files: Iterable[wire.FileIn],
        *,
        root: Path | None = None,
        create_collection: bool = False,
    ) -> models.Job:
        """Queues an ingest job of files (Markdown, text, HTML, PDF…) and returns it
        at once (admin). A file's source id is its path relative to ``root`` (else
        its name); ``(source_id, bytes)`` pairs are sent as they are."""
        parts = wire.upload_parts(files, root)
        data = {"create_collection": "true" if create_collection else "false"}
        response = await self._send(
            "POST", f"/v1/admin/collections/{collection}/files", files=parts, data=data
        )
        return wire.parse(models.Job, response, key="job")

    async def sync(self, collection: str, source: Mapping[str, Any]) -> models.Job:
        """Queues a sync of a source set (a folder, git tree or site: see the sync
        docs for ``source``) and returns the job (admin)."""
        response = await self._send("POST", f"/v1/admin/collections/{collection}/sync", json=source)
        return wire.parse(models.Job, response, key="job")

    async def plan_sync(self, collection: str, source: Mapping[str, Any]) -> models.SyncDelta:
        """What a sync would change (a dry run), applying nothing (admin)."""
        body = {**source, "dry_run": True}
        response = await self._send("POST", f"/v1/admin/collections/{collection}/sync", json=body)
        return wire.parse(models.SyncDelta, response, key="delta")

    async def jobs(self, collection: str | None = None, *, limit: int = 100) -> list[models.Job]:
        """Recent jobs, newest first, without per-document reports (admin)."""
        params: dict[str, Any] = {"limit": limit}
        if collection:
            params["collection"] = collection
        return wire.parse(
            models.JobList, await self._send("GET", "/v1/admin/jobs", params=params)
        ).jobs

    async def job(self, job_id: str) -> models.Job:
        return wire.parse(models.Job, await self._send("GET", f"/v1/admin/jobs/{job_id}"))

    async def watch_job(self, job_id: str) -> AsyncIterator[models.Job]:
        """The job at each change of its progress; the last one is final (with its
        per-document report). Raises the API's error if following it fails."""
        async with self._events("GET", f"/v1/admin/jobs/{job_id}/events") as source:
            async for sse in source.aiter_sse():
                job = wire.job_event(sse.event, sse.data)
                if job is not None:
                    yield job
                    if job.finished:
                        return

    async def wait_for_job(self, job_id: str) -> models.Job:
        """Follows the job to its final state and returns it."""
        last: models.Job | None = None
        async for job in self.watch_job(job_id):
            last = job
        return last if last is not None and last.finished else await self.job(job_id)

    async def cancel_job(self, job_id: str) -> models.Job:
        """Asks the job to stop; it may still be stopping (``cancel_requested``)."""
        return wire.parse(models.Job, await self._send("POST", f"/v1/admin/jobs/{job_id}/cancel"))

    async def health(self) -> dict[str, Any]:
        """The gateway's health and its dependencies' (details with an admin key)."""
        return wire.health(await self._send("GET", "/v1/health"))
