"""The synchronous client (:class:`Client`); :mod:`groundwire_client.async_client`
is the same API with ``async``/``await``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import httpx_sse

from groundwire_client import models, wire

DEFAULT_URL = "http://127.0.0.1:8080"


class Client:
    """A Groundwire gateway over HTTP.

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
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url,
            headers=wire.headers(api_key, headers),
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _send(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        with wire.transport_errors():
            return self._http.request(method, url, **kwargs)

    @contextmanager
    def _events(self, method: str, url: str, **kwargs: Any) -> Iterator[httpx_sse.EventSource]:
        with (
            wire.transport_errors(),
            httpx_sse.connect_sse(self._http, method, url, **kwargs) as es,
        ):
            if es.response.status_code >= 400:
                es.response.read()
                wire.check(es.response)
            yield es

    # --- asking --------------------------------------------------------------------------

    def search(
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
        return wire.parse(models.SearchResponse, self._send("POST", "/v1/search", json=body))

    def chat(
        self,
        conversation: wire.MessagesIn,
        *,
        collection: str | None = None,
        filters: wire.Filters | None = None,
        listwise_rerank: bool = False,
    ) -> Iterator[models.ChatEvent]:
        """The answer as typed events, in the order the server sends them, ending with
        a :class:`~groundwire_client.models.DoneEvent` or an
        :class:`~groundwire_client.models.ErrorEvent` (yielded, not raised: the text
        so far may still be worth showing). A refusal before the answer starts (a
        limit, an unknown collection) raises."""
        body = wire.chat_body(
            conversation, collection=collection, filters=filters, listwise_rerank=listwise_rerank
        )
        with self._events("POST", "/v1/chat", json=body) as source:
            for sse in source.iter_sse():
                event = wire.chat_event(sse.event, sse.data)
                if event is not None:
                    yield event
                    if wire.is_last(event):
                        return

    def ask(
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
        with self._events("POST", "/v1/chat", json=body) as source:
            for sse in source.iter_sse():
                event = wire.chat_event(sse.event, sse.data)
                if event is not None:
                    answer.take(event)
                    if wire.is_last(event):
                        break
            return answer.result(source.response.headers.get(wire.REQUEST_ID_HEADER, ""))

    # --- collections and sources -----------------------------------------------------------

    def collection_names(self) -> list[str]:
        """The collections any caller may search (``GET /v1/models``)."""
        return wire.collection_names(self._send("GET", "/v1/models"))

    def collections(self) -> list[models.Collection]:
        """Every collection with its fields and counts (admin)."""
        response = self._send("GET", "/v1/admin/collections")
        return wire.parse(models.CollectionList, response).collections

    def collection(self, name: str) -> models.Collection:
        return wire.parse(models.Collection, self._send("GET", f"/v1/admin/collections/{name}"))

    def create_collection(self, name: str, filterable: Iterable[str] = ()) -> models.Collection:
        body = {"name": name, "filterable": list(filterable)}
        response = self._send("POST", "/v1/admin/collections", json=body)
        return wire.parse(models.Collection, response)

    def drop_collection(self, name: str) -> None:
        wire.check(self._send("DELETE", f"/v1/admin/collections/{name}"))

    def sources(
        self, collection: str, *, page_token: str = "", limit: int = 100
    ) -> models.SourcePage:
        """One page of the sources a collection holds, sorted by source id (admin)."""
        params = {"page_token": page_token, "limit": limit}
        response = self._send("GET", f"/v1/admin/collections/{collection}/sources", params=params)
        return wire.parse(models.SourcePage, response)

    def iter_sources(self, collection: str) -> Iterator[models.SourceInfo]:
        """Every source of a collection, page after page (admin)."""
        token = ""
        while True:
            page = self.sources(collection, page_token=token)
            yield from page.sources
            if not page.next_page_token:
                return
            token = page.next_page_token

    def delete_source(self, collection: str, source_id: str) -> int:
        """Deletes every chunk of one source; the number deleted (admin)."""
        response = self._send(
            "DELETE",
            f"/v1/admin/collections/{collection}/documents",
            params={"source_id": source_id},
        )
        return wire.deleted(response)

    # --- ingest and jobs -----------------------------------------------------------------

    def ingest_documents(
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
        response = self._send("POST", f"/v1/admin/collections/{collection}/documents", json=body)
        return wire.parse(models.Job, response, key="job")

    def upload_files(
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
        response = self._send(
            "POST", f"/v1/admin/collections/{collection}/files", files=parts, data=data
        )
        return wire.parse(models.Job, response, key="job")

    def sync(self, collection: str, source: Mapping[str, Any]) -> models.Job:
        """Queues a sync of a source set (a folder, git tree or site: see the sync
        docs for ``source``) and returns the job (admin)."""
        response = self._send("POST", f"/v1/admin/collections/{collection}/sync", json=source)
        return wire.parse(models.Job, response, key="job")

    def plan_sync(self, collection: str, source: Mapping[str, Any]) -> models.SyncDelta:
        """What a sync would change (a dry run), applying nothing (admin)."""
        body = {**source, "dry_run": True}
        response = self._send("POST", f"/v1/admin/collections/{collection}/sync", json=body)
        return wire.parse(models.SyncDelta, response, key="delta")

    def jobs(self, collection: str | None = None, *, limit: int = 100) -> list[models.Job]:
        """Recent jobs, newest first, without per-document reports (admin)."""
        params: dict[str, Any] = {"limit": limit}
        if collection:
            params["collection"] = collection
        return wire.parse(models.JobList, self._send("GET", "/v1/admin/jobs", params=params)).jobs

    def job(self, job_id: str) -> models.Job:
        return wire.parse(models.Job, self._send("GET", f"/v1/admin/jobs/{job_id}"))

    def watch_job(self, job_id: str) -> Iterator[models.Job]:
        """The job at each change of its progress; the last one is final (with its
        per-document report). Raises the API's error if following it fails."""
        with self._events("GET", f"/v1/admin/jobs/{job_id}/events") as source:
            for sse in source.iter_sse():
                job = wire.job_event(sse.event, sse.data)
                if job is not None:
                    yield job
                    if job.finished:
                        return

    def wait_for_job(self, job_id: str) -> models.Job:
        """Follows the job to its final state and returns it."""
        last: models.Job | None = None
        for job in self.watch_job(job_id):
            last = job
        return last if last is not None and last.finished else self.job(job_id)

    def cancel_job(self, job_id: str) -> models.Job:
        """Asks the job to stop; it may still be stopping (``cancel_requested``)."""
        return wire.parse(models.Job, self._send("POST", f"/v1/admin/jobs/{job_id}/cancel"))

    def health(self) -> dict[str, Any]:
        """The gateway's health and its dependencies' (details with an admin key)."""
        return wire.health(self._send("GET", "/v1/health"))
