"""The client side of ``POST /v1/chat``: its server-sent events read into one ChatOutcome.

Used by `groundwire demo` and `groundwire eval answers`. The SSE parser is the small
part of the WHATWG grammar the gateway uses (``event:``, ``data:``, comment lines,
a blank line ends an event); the event payloads are the gateway's JSON models
(services/gateway/src/groundwire_gateway/models.py), read into plain dataclasses so
the CLI does not depend on the gateway package.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

SUPPORTED = "supported"
QUOTED = "quoted"
MEANING_METHODS = ("nli", "llm")
"""Verifiers that read meaning: only their verdicts say supported (similarity says
quoted, similar or unrelated)."""


class ChatProtocolError(Exception):
    """The stream broke the chat grammar (bad JSON, a missing field, no done event)."""


class ChatRequestError(Exception):
    """The gateway refused the chat before streaming (a plain HTTP error)."""

    def __init__(
        self, status: int, code: str, message: str, retry_after_s: float | None = None
    ) -> None:
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class SseEvent:
    name: str
    data: str


def parse_sse(lines: Iterable[str]) -> Iterator[SseEvent]:
    """Server-sent events from the stream's lines (line endings already removed or not).
    Events without data are dropped, as the SSE grammar says."""
    name = ""
    data: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield SseEvent(name or "message", "\n".join(data))
            name, data = "", []
            continue
        if line.startswith(":"):
            continue  # a comment (the gateway's keep-alive pings)
        key, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if key == "event":
            name = value
        elif key == "data":
            data.append(value)
    if data:
        yield SseEvent(name or "message", "\n".join(data))


@dataclass(frozen=True)
class Source:
    number: int
    source_id: str
    title: str
    heading_path: tuple[str, ...]
    url: str
    score: float
    injection_flagged: bool
    text: str = ""
    """The chunk's text, as the answer's excerpt (the citations' source spans index it)."""
    live: bool = False
    """Looked up live on the documentation site (``url``), not in the collection."""
    fetched_at: float = 0.0


@dataclass(frozen=True)
class Citation:
    number: int
    sentence: str
    status: str
    """supported, unsupported, contradicted (nli or llm); quoted, similar, unrelated
    (similarity only); unchecked."""
    support: float
    answer_span: tuple[int, int] | None = None
    """[start, end) of the sentence in the final answer; None when the server sent none."""
    source_span: tuple[int, int] | None = None
    """[start, end) of its best support in the cited source's text; None when none."""
    method: str = ""
    """Who judged it: nli, llm or similarity (which shows shared words and meaning,
    not that the passage proves the claim); empty when the server sent none."""


@dataclass(frozen=True)
class Stage:
    name: str
    ms: float
    fallback: bool
    reason: str
    dependency: str
    details: Mapping[str, str]


@dataclass(frozen=True)
class ChatError:
    code: str
    message: str
    dependency: str | None


@dataclass
class ChatOutcome:
    """Everything one chat streamed, in the order it arrived."""

    events: list[str] = field(default_factory=list)
    """Event names, in order."""
    sources: list[Source] = field(default_factory=list)
    """Every numbered source (retrieval events, the agent's included)."""
    streamed: str = ""
    """The text as a client shows it: deltas since the last reset."""
    resets: list[str] = field(default_factory=list)
    cited: list[Source] = field(default_factory=list)
    """The sources the answer cites (the citations event)."""
    citations: list[Citation] = field(default_factory=list)
    stages: list[Stage] = field(default_factory=list)
    mode: str | None = None
    """generated, extractive or declined (the done event); None when it never came."""
    answer: str = ""
    unsupported_citations: int = 0
    error: ChatError | None = None

    @property
    def finished(self) -> bool:
        return self.mode is not None

    def stage(self, name: str) -> Stage | None:
        return next((s for s in self.stages if s.name == name), None)

    def tools_used(self) -> list[str]:
        """Tool names the agent called, from the answer stage's ``tools`` trace
        ("search(query) -> 2 new; read_document(3) -> 4 parts, 1 new")."""
        answer = self.stage("answer")
        trace = answer.details.get("tools", "") if answer else ""
        return [part.strip().split("(", 1)[0] for part in trace.split(";") if "(" in part]

    def take_error(self, code: str, message: str, dependency: str | None = None) -> None:
        """Records a failure that happened outside the stream (HTTP, transport)."""
        self.error = ChatError(code, message, dependency)

    def take(self, event: SseEvent) -> None:
        """Adds one event. Raises ChatProtocolError for a payload that is not the
        gateway's."""
        try:
            payload = json.loads(event.data)
            if not isinstance(payload, dict):
                raise TypeError("the payload is not a JSON object")
            self._take(event.name, payload)
        except (ValueError, KeyError, TypeError) as error:
            raise ChatProtocolError(f"bad {event.name!r} event: {error}") from error
        self.events.append(event.name)

    def _take(self, name: str, payload: dict[str, Any]) -> None:
        if name == "retrieval":
            self.sources.extend(_source(s) for s in payload["sources"])
        elif name == "delta":
            self.streamed += str(payload["text"])
        elif name == "reset":
            self.resets.append(str(payload["reason"]))
            self.streamed = ""
        elif name == "citations":
            self.cited = [_source(s) for s in payload["sources"]]
            self.citations = [
                Citation(int(c["number"]), str(c["sentence"]), str(c["status"]),
                         float(c["support"]), _span(c.get("answer_span")),
                         _span(c.get("source_span")), str(c.get("method", "")))
                for c in payload["citations"]
            ]
        elif name == "stages":
            self.stages = [
                Stage(
                    str(s["name"]),
                    float(s["ms"]),
                    bool(s["fallback"]),
                    str(s.get("reason", "")),
                    str(s.get("dependency", "")),
                    {str(k): str(v) for k, v in s.get("details", {}).items()},
                )
                for s in payload["stages"]
            ]
        elif name == "done":
            self.mode = str(payload["mode"])
            self.answer = str(payload["answer"])
            self.unsupported_citations = int(payload.get("unsupported_citations", 0))
        elif name == "error":
            dependency = payload.get("dependency")
            self.error = ChatError(
                str(payload["code"]),
                str(payload["message"]),
                str(dependency) if dependency else None,
            )

    @classmethod
    def from_events(cls, events: Iterable[SseEvent]) -> ChatOutcome:
        """The outcome of a whole stream; raises ChatProtocolError when it ends with
        neither a done nor an error event."""
        outcome = cls()
        for event in events:
            outcome.take(event)
            if event.name in ("done", "error"):
                return outcome
        raise ChatProtocolError("the stream ended without a done or error event")


def _source(raw: Mapping[str, Any]) -> Source:
    return Source(
        int(raw["number"]),
        str(raw["source_id"]),
        str(raw.get("title", "")),
        tuple(str(h) for h in raw.get("heading_path", ())),
        str(raw.get("url", "")),
        float(raw.get("score", 0.0)),
        bool(raw.get("injection_flagged", False)),
        str(raw.get("text", "")),
        bool(raw.get("live", False)),
        float(raw.get("fetched_at", 0.0)),
    )


def _span(raw: Any) -> tuple[int, int] | None:
    """A ``[start, end)`` pair from the citations event (None when absent)."""
    if raw is None:
        return None
    start, end = raw
    return int(start), int(end)


def ask(
    client: httpx.Client,
    question: str,
    *,
    collection: str | None = None,
    max_agent_steps: int = 0,
) -> ChatOutcome:
    """Asks one question through ``POST /v1/chat`` and reads the whole answer. Raises
    ChatRequestError (refused before streaming), ChatProtocolError, httpx.HTTPError."""
    body: dict[str, Any] = {"messages": [{"role": "user", "content": question}]}
    if collection:
        body["collection"] = collection
    if max_agent_steps:
        body["max_agent_steps"] = max_agent_steps
    with client.stream("POST", "/v1/chat", json=body) as reply:
        if reply.status_code != 200:
            reply.read()
            code, message = "http_error", reply.text[:500]
            try:
                error = reply.json()["error"]
                code, message = str(error["code"]), str(error["message"])
            except (ValueError, KeyError, TypeError):
                pass
            raise ChatRequestError(
                reply.status_code, code, message, _retry_after(reply.headers.get("retry-after"))
            )
        return ChatOutcome.from_events(parse_sse(reply.iter_lines()))


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None  # an HTTP date: the caller waits its default
