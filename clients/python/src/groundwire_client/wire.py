"""The one module that converts between the HTTP wire and the client's types: request
bodies, responses, server-sent events and error bodies. :class:`Client` and
:class:`AsyncClient` only send what this builds and hand back what it parses, so the
two stay the same API."""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import httpx_sse
from pydantic import BaseModel, ValidationError

from groundwire_client import models
from groundwire_client.errors import APIConnectionError, APIError, ProtocolError, error_class

REQUEST_ID_HEADER = "x-request-id"
T = TypeVar("T", bound=BaseModel)

Filters = Mapping[str, Sequence[str]]
"""Field -> accepted values; all must hold (fields the collection declares filterable)."""
MessagesIn = str | Sequence[models.Message | Mapping[str, str]]
"""A question, or the conversation (the last message the user's)."""
FileIn = Path | str | tuple[str, bytes]
"""A file to upload: a path, or (source id, content)."""


def headers(api_key: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    out = {"user-agent": "groundwire-client/0.1"}
    if api_key:
        out["authorization"] = f"Bearer {api_key}"
    out.update(extra or {})
    return out


def _filters(filters: Filters | None) -> list[dict[str, Any]]:
    return [{"field": k, "any_of": list(v)} for k, v in (filters or {}).items()]


def search_body(
    query: str,
    *,
    collection: str | None,
    limit: int,
    filters: Filters | None,
    rerank: bool,
    reasons: bool,
    fusion: str | None,
    fusion_weights: Mapping[str, float] | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "query": query,
        "limit": limit,
        "filters": _filters(filters),
        "rerank": rerank,
        "reasons": reasons,
    }
    if collection:
        body["collection"] = collection
    if fusion:
        body["fusion"] = fusion
    if fusion_weights:
        body["fusion_weights"] = dict(fusion_weights)
    return body


def messages(conversation: MessagesIn) -> list[dict[str, str]]:
    if isinstance(conversation, str):
        return [{"role": "user", "content": conversation}]
    return [
        m.model_dump() if isinstance(m, models.Message) else {**m}  # copies a mapping
        for m in conversation
    ]


def chat_body(
    conversation: MessagesIn,
    *,
    collection: str | None,
    filters: Filters | None,
    listwise_rerank: bool,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "messages": messages(conversation),
        "filters": _filters(filters),
        "listwise_rerank": listwise_rerank,
    }
    if collection:
        body["collection"] = collection
    return body


def ingest_body(
    documents: Iterable[models.Document | Mapping[str, Any]],
    *,
    create_collection: bool,
    full_reindex: bool,
) -> dict[str, Any]:
    docs = [
        d.model_dump(exclude_none=True)
        if isinstance(d, models.Document)
        else models.Document.model_validate(d).model_dump(exclude_none=True)
        for d in documents
    ]
    return {"documents": docs, "create_collection": create_collection, "full_reindex": full_reindex}


def upload_parts(
    files: Iterable[FileIn], root: Path | None
) -> list[tuple[str, tuple[str, bytes, str]]]:
    """Multipart parts: each file named by its source id (its path relative to
    ``root``, else its file name)."""
    parts: list[tuple[str, tuple[str, bytes, str]]] = []
    for item in files:
        if isinstance(item, tuple):
            name, content = item
        else:
            path = Path(item)
            name = path.relative_to(root).as_posix() if root else path.name
            content = path.read_bytes()
        mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
        parts.append(("files", (name, content, mime)))
    return parts


@contextmanager
def transport_errors() -> Iterator[None]:
    """httpx's transport failures as APIConnectionError, a non-SSE answer where
    events were expected as ProtocolError (the one place they are mapped)."""
    try:
        yield
    except httpx.TransportError as error:
        raise APIConnectionError(f"{type(error).__name__}: {error}") from error
    except httpx_sse.SSEError as error:
        raise ProtocolError(str(error)) from error


# --- responses -----------------------------------------------------------------------------


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def error_from_response(response: httpx.Response) -> APIError:
    """The exception for an error response (its body already read)."""
    rid = response.headers.get(REQUEST_ID_HEADER, "")
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        code, message, error = "http_error", response.text[:500] or response.reason_phrase, {}
    cls = error_class(code, response.status_code)
    return cls(
        message,
        code=code,
        status=response.status_code,
        request_id=str(error.get("request_id") or rid),
        dependency=error.get("dependency"),
        retry_after=_retry_after(response.headers.get("retry-after")),
        details=error.get("details"),
    )


def check(response: httpx.Response) -> None:
    """Raises the API's error for a 4xx/5xx response (its body already read)."""
    if response.status_code >= 400:
        raise error_from_response(response)


def parse(model: type[T], response: httpx.Response, key: str | None = None) -> T:
    """The response's JSON (or its ``key``) as ``model``; raises the API's error for
    an error status, ProtocolError for a body of another shape."""
    check(response)
    try:
        data = response.json()
        return model.model_validate(data[key] if key else data)
    except (ValueError, KeyError, TypeError, ValidationError) as error:
        raise ProtocolError(
            f"{response.request.method} {response.request.url.path}: unexpected body ({error})"
        ) from error


def collection_names(response: httpx.Response) -> list[str]:
    """The collections in ``GET /v1/models``'s list (model ids ``groundwire:NAME``)."""
    check(response)
    prefix = "groundwire:"
    return [m["id"][len(prefix) :] for m in response.json()["data"] if ":" in m["id"]]


def deleted(response: httpx.Response) -> int:
    """How many chunks a source's deletion removed."""
    check(response)
    return int(response.json()["deleted"])


def health(response: httpx.Response) -> dict[str, Any]:
    """The health body; a 503 (something is down) carries the same body."""
    if response.status_code not in (200, 503):
        check(response)
    result: dict[str, Any] = response.json()
    return result


def error_from_event(event: models.ErrorEvent) -> APIError:
    cls = error_class(event.code, None)
    return cls(
        event.message,
        code=event.code,
        request_id=event.request_id,
        dependency=event.dependency,
        retry_after=event.retry_after_s,
    )


def _data(name: str, data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError as error:
        raise ProtocolError(f"event {name!r}: data is not JSON") from error


def chat_event(name: str, data: str) -> models.ChatEvent | None:
    """One SSE event of ``POST /v1/chat``; None for an event this client does not know
    (a newer server's)."""
    cls = models.CHAT_EVENTS.get(name)
    if cls is None:
        return None
    try:
        return cls.model_validate(_data(name, data))
    except ValidationError as error:
        raise ProtocolError(f"event {name!r}: unexpected data ({error})") from error


def job_event(name: str, data: str) -> models.Job | None:
    """One SSE event of a job's ``/events``: the job (``progress`` or ``done``); raises
    the API's error for an ``error`` event; None for an unknown event."""
    if name == "error":
        raise error_from_event(models.ErrorEvent.model_validate(_data(name, data)))
    if name not in ("progress", "done"):
        return None
    try:
        return models.Job.model_validate(_data(name, data))
    except ValidationError as error:
        raise ProtocolError(f"event {name!r}: unexpected data ({error})") from error


class AnswerBuilder:
    """Folds a chat's events into the final :class:`~groundwire_client.models.Answer`."""

    def __init__(self) -> None:
        self.retrieved: list[models.Source] = []
        self.citations = models.CitationsEvent(sources=[], citations=[])
        self.stages: list[models.Stage] = []
        self.done: models.DoneEvent | None = None

    def take(self, event: models.ChatEvent) -> None:
        """Raises the API's error for an ``error`` event."""
        if isinstance(event, models.ErrorEvent):
            raise error_from_event(event)
        if isinstance(event, models.RetrievalEvent):
            self.retrieved = event.sources
        elif isinstance(event, models.CitationsEvent):
            self.citations = event
        elif isinstance(event, models.StagesEvent):
            self.stages = event.stages
        elif isinstance(event, models.DoneEvent):
            self.done = event

    def result(self, request_id: str) -> models.Answer:
        """Raises ProtocolError when the stream ended without ``done``."""
        if self.done is None:
            raise ProtocolError("the answer stream ended without a done event")
        return models.Answer(
            answer=self.done.answer,
            mode=self.done.mode,
            citations=self.citations.citations,
            sources=self.citations.sources,
            retrieved=self.retrieved,
            withheld=self.citations.withheld,
            stages=self.stages,
            unsupported_citations=self.done.unsupported_citations,
            request_id=request_id,
        )


def is_last(event: models.ChatEvent) -> bool:
    return isinstance(event, models.DoneEvent | models.ErrorEvent)
