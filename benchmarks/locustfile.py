"""Load on the gateway over HTTP: a mix of searches and streamed chats.

Run it as its own process (locust brings gevent, which patches the standard library)::

    locust -f benchmarks/locustfile.py --headless -u 32 -r 32 -t 60s \\
        --host http://127.0.0.1:8080 --csv var/load/step --only-summary

``benchmarks/load_report.py`` does that for each concurrency step against a local
cluster with a fake LLM, and turns the CSV files into the report.

What locust's statistics carry:

* ``POST search`` and ``POST chat``: end to end. A chat reads the SSE stream to its end,
  and its time is the whole stream, not just the headers. A 5xx, any other non-2xx, an
  ``error`` event, or a stream without exactly one ``done`` is a failure.
* ``stage <name>`` (request type ``stage``): the time each pipeline stage reported in the
  response (``stages`` in the search JSON, the ``stages`` event of a chat), one entry per
  stage, so locust's p50/p95 are per stage. A stage that fell back is still timed (its
  fallback is counted in the summary file, below), never a failure.
* ``client chat first event`` / ``client chat first delta``: when the chat's first SSE
  event (the numbered sources) and its first answer text reached the client.

Run with ``--stop-timeout`` so requests in flight when the time is up finish (and a 5xx
among them is counted). Locust writes its CSV files when the time is up, without those
requests; the summary file (below) is written when locust quits and has them all.

Settings (environment variables):

``GW_LOAD_SEARCH_WEIGHT`` (3), ``GW_LOAD_CHAT_WEIGHT`` (1)
    the task mix; 0 leaves a task out.
``GW_LOAD_WAIT_S`` (0)
    think time: each user waits uniformly 0..this between requests (0: back to back).
``GW_LOAD_COLLECTION`` (unset: the gateway's default collection)
``GW_LOAD_LISTWISE_SHARE`` (0)
    share of requests (0..1) that ask for the listwise LLM stage (search ``reasons``,
    chat ``listwise_rerank``).
``GW_LOAD_QUESTIONS`` (unset: the built-in questions about ``samples/corpus``)
    a text file, one question a line (``#`` comments).
``GW_LOAD_HOSTS`` (unset: locust's ``--host``)
    several gateways, comma-separated: users are dealt to them round-robin and each
    keeps its gateway (the load report's multi-process topology).
``GW_LOAD_SUMMARY_FILE`` (unset: none)
    where to write, when locust quits, every stats entry (count, failures, p50/p95/p99,
    requests/s) and error, and the counters locust does not carry: HTTP status codes per
    route, 5xx, ``error`` events by code, stage fallbacks and reasons, answer modes (JSON).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

from locust import FastHttpUser, between, constant, events

SEARCH_WEIGHT = int(os.environ.get("GW_LOAD_SEARCH_WEIGHT", "3"))
CHAT_WEIGHT = int(os.environ.get("GW_LOAD_CHAT_WEIGHT", "1"))
WAIT_S = float(os.environ.get("GW_LOAD_WAIT_S", "0"))
COLLECTION = os.environ.get("GW_LOAD_COLLECTION") or None
LISTWISE_SHARE = float(os.environ.get("GW_LOAD_LISTWISE_SHARE", "0"))
SUMMARY_FILE = os.environ.get("GW_LOAD_SUMMARY_FILE") or None
HOSTS = tuple(h.strip() for h in os.environ.get("GW_LOAD_HOSTS", "").split(",") if h.strip())
_DEALT = itertools.count()  # users dealt to HOSTS in turn

# Questions about samples/corpus (the documents the load report ingests).
BUILT_IN_QUESTIONS = (
    "how do I stop one user from flooding the API",
    "does a request still succeed when one part of the pipeline is broken",
    "how are long manuals cut into pieces before they become searchable",
    "could a malicious web page trick the assistant into ignoring its rules",
    "where can I see how long each step of a request took",
    "what happens when Redis is down",
    "how do I run Groundwire with docker compose",
    "which models can the embedder serve",
    "how is dense retrieval combined with keyword search",
    "what does the reranker do when it is overloaded",
    "how are citations checked against the sources",
    "how do I deploy to Kubernetes",
    "what is reciprocal rank fusion",
    "how do I install Groundwire on a laptop",
    "what does a 429 answer mean and when can I retry",
    "how are PDF and HTML files ingested",
    "which metrics does the gateway export",
    "can I filter search results by document type",
    "what happens when the LLM provider times out",
    "how many chats can run at the same time",
    "how is the daily token budget charged",
    "what is the extractive fallback answer",
    "how do I rotate API keys",
    "does re-ingesting an unchanged document cost anything",
)


def _questions() -> tuple[str, ...]:
    path = os.environ.get("GW_LOAD_QUESTIONS")
    if not path:
        return BUILT_IN_QUESTIONS
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    found = tuple(ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#"))
    if not found:
        raise SystemExit(f"GW_LOAD_QUESTIONS={path} holds no questions")
    return found


QUESTIONS = _questions()

# Counters for the summary file (one locust process, greenlets: no locking needed).
STARTED: Counter[str] = Counter()  # route -> requests sent (finished or not)
STATUS: Counter[str] = Counter()  # "search 200", "chat 503"
HTTP_5XX: Counter[str] = Counter()  # route -> count
ERROR_EVENTS: Counter[str] = Counter()  # the error event's code
STAGE_FALLBACKS: Counter[str] = Counter()  # stage -> fallbacks
FALLBACK_REASONS: Counter[str] = Counter()  # "stage: reason"
ANSWER_MODES: Counter[str] = Counter()


def parse_sse(raw: str) -> list[tuple[str, Any]]:
    """The (event name, JSON data) pairs of a server-sent event stream."""
    out: list[tuple[str, Any]] = []
    for block in raw.replace("\r\n", "\n").split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln and not ln.startswith(":")]
        name = next((ln[6:].strip() for ln in lines if ln.startswith("event:")), "message")
        data = [ln[5:].strip() for ln in lines if ln.startswith("data:")]
        if data:
            out.append((name, json.loads("\n".join(data))))
    return out


def _http_failure(route: str, status: int, body: str) -> str:
    code = ""
    try:
        code = str(json.loads(body)["error"]["code"])
    except (ValueError, KeyError, TypeError):
        pass
    if status >= 500:
        HTTP_5XX[route] += 1
        return f"HTTP 5xx: {status} {code}".strip()
    return f"HTTP {status} {code}".strip()


class GatewayUser(FastHttpUser):
    """One client of the gateway: searches and chats in the configured mix."""

    wait_time = between(0, WAIT_S) if WAIT_S > 0 else constant(0)
    network_timeout = 180.0
    connection_timeout = 10.0

    def __init__(self, environment: Any) -> None:
        if HOSTS:  # before the client is built on self.host
            self.host = HOSTS[next(_DEALT) % len(HOSTS)]
        super().__init__(environment)

    def _report_stages(self, stages: list[dict[str, Any]]) -> None:
        fire = self.environment.events.request.fire
        for stage in stages:
            name = str(stage["name"])
            fire(
                request_type="stage",
                name=name,
                response_time=float(stage["ms"]),
                response_length=0,
                exception=None,
                context={},
            )
            if stage.get("fallback"):
                STAGE_FALLBACKS[name] += 1
                FALLBACK_REASONS[f"{name}: {str(stage.get('reason', ''))[:120]}"] += 1

    def _client_time(self, name: str, ms: float) -> None:
        self.environment.events.request.fire(
            request_type="client",
            name=name,
            response_time=ms,
            response_length=0,
            exception=None,
            context={},
        )

    def search(self) -> None:
        body: dict[str, Any] = {"query": random.choice(QUESTIONS)}
        if COLLECTION:
            body["collection"] = COLLECTION
        if LISTWISE_SHARE and random.random() < LISTWISE_SHARE:
            body["reasons"] = True
        STARTED["search"] += 1
        with self.client.post("/v1/search", json=body, name="search", catch_response=True) as resp:
            STATUS[f"search {resp.status_code}"] += 1
            text = resp.text or ""
            if resp.status_code != 200:
                resp.failure(_http_failure("search", resp.status_code or 0, text))
                return
            try:
                stages = json.loads(text)["stages"]
            except (ValueError, KeyError, TypeError):
                resp.failure("search answered 200 without a stages report")
                return
            self._report_stages(stages)
            resp.success()

    def chat(self) -> None:
        body: dict[str, Any] = {"messages": [{"role": "user", "content": random.choice(QUESTIONS)}]}
        if COLLECTION:
            body["collection"] = COLLECTION
        if LISTWISE_SHARE and random.random() < LISTWISE_SHARE:
            body["listwise_rerank"] = True
        STARTED["chat"] += 1
        started = time.perf_counter()
        with self.client.post(
            "/v1/chat",
            json=body,
            name="chat",
            stream=True,
            catch_response=True,
            headers={"Accept": "text/event-stream", "Accept-Encoding": "identity"},
        ) as resp:
            STATUS[f"chat {resp.status_code}"] += 1
            if resp.status_code != 200:
                resp.failure(_http_failure("chat", resp.status_code or 0, resp.text or ""))
                return
            stream = resp._response  # geventhttpclient's response: read it line by line
            if stream is None:
                resp.failure("no response stream")
                return
            parts: list[bytes] = []
            first_event: float | None = None
            first_delta: float | None = None
            try:
                while line := stream.readline(b"\n"):
                    parts.append(line)
                    if first_event is None and line.startswith(b"data:"):
                        first_event = time.perf_counter()
                    if first_delta is None and line.startswith(b"event: delta"):
                        first_delta = time.perf_counter()
            except Exception as error:  # a cut stream, whatever the transport says
                resp.failure(f"stream broken: {type(error).__name__}: {error}")
                return
            # the request's time is the whole stream, not the headers
            resp.request_meta["response_time"] = (time.perf_counter() - started) * 1e3
            raw = b"".join(parts).decode("utf-8", errors="replace")
            resp.request_meta["response_length"] = len(raw)
            try:
                events_ = parse_sse(raw)
            except ValueError:
                resp.failure("a chat event is not JSON")
                return
            names = [name for name, _ in events_]
            for name, data in events_:
                if name == "stages":
                    self._report_stages(data["stages"])
                elif name == "error":
                    ERROR_EVENTS[str(data.get("code", "?"))] += 1
                elif name == "done":
                    ANSWER_MODES[str(data.get("mode", "?"))] += 1
            if "error" in names:
                error = dict(events_[names.index("error")][1])
                resp.failure(f"error event: {error.get('code')} {error.get('dependency') or ''}")
                return
            if names.count("done") != 1 or names[-1] != "done":
                resp.failure(f"the stream did not end with one done event: {names[-3:]}")
                return
            if first_event is not None:
                self._client_time("chat first event", (first_event - started) * 1e3)
            if first_delta is not None:
                self._client_time("chat first delta", (first_delta - started) * 1e3)
            resp.success()

    tasks = {
        task: weight
        for task, weight in ((search, SEARCH_WEIGHT), (chat, CHAT_WEIGHT))
        if weight > 0
    }
    if not tasks:
        raise SystemExit("GW_LOAD_SEARCH_WEIGHT and GW_LOAD_CHAT_WEIGHT are both 0")


def _entry(entry: Any) -> dict[str, Any]:
    return {
        "type": entry.method,
        "name": entry.name,
        "count": entry.num_requests,
        "failures": entry.num_failures,
        "p50_ms": entry.get_response_time_percentile(0.5),
        "p95_ms": entry.get_response_time_percentile(0.95),
        "p99_ms": entry.get_response_time_percentile(0.99),
        "mean_ms": round(entry.avg_response_time, 1),
        "max_ms": round(entry.max_response_time or 0.0, 1),
        "requests_per_s": round(entry.total_rps, 3),
    }


@events.quitting.add_listener
def _write_summary(environment: Any, **_: Any) -> None:
    # Written when locust quits, after --stop-timeout let the last requests finish: the
    # CSV files are written when the time limit hits and miss those requests.
    if not SUMMARY_FILE:
        return
    stats = environment.stats
    summary = {
        "entries": [_entry(e) for e in stats.entries.values()],
        "errors": [
            {"type": e.method, "name": e.name, "error": str(e.error), "occurrences": e.occurrences}
            for e in stats.errors.values()
        ],
        "started": dict(STARTED),
        "status": dict(STATUS),
        "http_5xx": dict(HTTP_5XX),
        "error_events": dict(ERROR_EVENTS),
        "stage_fallbacks": dict(STAGE_FALLBACKS),
        "fallback_reasons": dict(FALLBACK_REASONS.most_common(20)),
        "answer_modes": dict(ANSWER_MODES),
        "mix": {"search": SEARCH_WEIGHT, "chat": CHAT_WEIGHT},
        "wait_s": WAIT_S,
        "listwise_share": LISTWISE_SHARE,
        "questions": len(QUESTIONS),
    }
    Path(SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
