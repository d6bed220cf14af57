"""Fakes of the remote LLM APIs we cannot reach from tests: the Anthropic Messages API
and the OpenAI chat-completions API, speaking their real wire protocols (JSON and
streamed SSE), so the real SDKs can be driven against them.

Programmable per test: a script of replies (text chunks, tool calls, JSON answers),
delays (time to first token, per-token delay), failures (any HTTP status with the
API's error body, 429/529 with retry-after, a hang before or during the stream, an
error event or a dropped connection mid-stream), a reasoning model's thinking
(``reasoning``: OpenAI ``reasoning_content`` deltas, Anthropic ``thinking`` blocks;
``<think>`` blocks go in ``text`` as chunks split wherever a test likes) and a model
without tools (``reject_tools``: a 400 for any request that offers tools, as vLLM or
Ollama answer). Every request body is recorded, and
so is every client disconnect (with the time it happened), so tests can assert what
the model was sent and that a cancelled stream was closed.

In-process (any test)::

    from tests.fakes.llm_server import FakeLLMServer, Reply

    async with FakeLLMServer([Reply(text="Hello world")]) as fake:
        ...  # anthropic: base_url=fake.url; openai: base_url=fake.openai_url
        fake.requests[0].body["system"]

As a process (load tests, end-to-end tests); it only needs aiohttp and the standard
library, so it runs as a plain script::

    python tests/fakes/llm_server.py --port 0 --ready-file F --script '[{"text": "hi"}]' \\
        --ttft-s 0.2 --token-delay-s 0.02 --default-text "an answer [1]"

With ``--orchestrator-answers WORDS`` (the load report's fake) every request the
script does not answer gets a plausible reply to the orchestrator's prompt: analysis
JSON, a listwise ranking, or cited sentences from the excerpts; ``--keep-log N``
bounds what is recorded.

The ready file receives the port once the server listens. ``GET /_fake/log`` returns
what was recorded, ``POST /_fake/script`` appends replies (a JSON list), and
``POST /_fake/reset`` clears both.

Routes: ``POST /v1/messages`` (Anthropic) and ``POST /v1/chat/completions``
(OpenAI-compatible). When the script runs out, the ``default`` reply answers; with
no default, an HTTP 500 says the script is exhausted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import re
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from aiohttp import web

Api = Literal["anthropic", "openai"]

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    529: "overloaded_error",
}
_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "server_error",
    529: "overloaded_error",
}


TOOLS_REJECTED: dict[Api, str] = {
    # what vLLM (started without a tool parser) and Ollama (a model without tools) say
    "openai": '"auto" tool choice requires --enable-auto-tool-choice and '
    "--tool-call-parser to be set",
    "anthropic": "registry.ollama.ai/library/gemma:2b does not support tools",
}


@dataclass
class ToolUse:
    """A tool call the fake model makes. ``arguments`` may be a raw string to send
    malformed JSON."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments))


@dataclass
class Reply:
    """One scripted answer.

    ``text``: a string (streamed word by word) or a list of chunks (streamed as
    given). ``json``: a JSON value sent as the text. ``tool_calls``: tool uses after
    the text. ``status`` other than 200: an HTTP error with the API's error body
    (``error_type`` overrides the body's type; ``retry_after`` adds the header).
    ``hang``: never answer (not even headers). After ``hang_after_chunks``,
    ``drop_after_chunks`` or ``error_after_chunks`` content chunks the stream stalls,
    the connection is cut, or an error event (``error_type``, default an overload)
    is sent. ``ttft_s``/``token_delay_s`` override the server's delays.
    ``reasoning``: thinking sent before the text, apart from it (a string streamed
    word by word, or chunks).
    """

    text: str | list[str] = ""
    json: Any = None
    tool_calls: list[ToolUse] = field(default_factory=list)
    status: int = 200
    error_type: str | None = None
    error_message: str | None = None
    retry_after: float | None = None
    hang: bool = False
    hang_after_chunks: int | None = None
    drop_after_chunks: int | None = None
    error_after_chunks: int | None = None
    ttft_s: float | None = None
    token_delay_s: float | None = None
    stop_reason: str | None = None
    reasoning: str | list[str] = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reply:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown reply fields: {sorted(unknown)}")
        values = dict(data)
        values["tool_calls"] = [
            call if isinstance(call, ToolUse) else ToolUse(**call)
            for call in values.get("tool_calls", [])
        ]
        return cls(**values)

    def chunks(self) -> list[str]:
        if self.json is not None:
            return _split_text(json.dumps(self.json))
        if isinstance(self.text, list):
            return list(self.text)
        return _split_text(self.text)

    def full_text(self) -> str:
        return "".join(self.chunks())

    def reasoning_chunks(self) -> list[str]:
        if isinstance(self.reasoning, list):
            return list(self.reasoning)
        return _split_text(self.reasoning)


ReplyFactory = Callable[["RecordedRequest"], Reply]
"""In-process only: a reply computed from the request it answers."""
ScriptItem = Reply | Mapping[str, Any] | ReplyFactory


@dataclass(frozen=True)
class RecordedRequest:
    api: Api
    path: str
    headers: dict[str, str]
    body: Any
    at: float
    """time.monotonic() when the request arrived."""
    raw: bytes = field(default=b"", repr=False)
    """The body as sent, byte for byte (not in ``/_fake/log``)."""


@dataclass(frozen=True)
class RecordedDisconnect:
    """The client went away before the reply was complete."""

    api: Api
    request_index: int
    chunks_sent: int
    at: float
    """time.monotonic() when the server noticed."""


class _Dropped(Exception):
    """The script asked to cut the connection."""


def _split_text(text: str) -> list[str]:
    return re.findall(r"\s*\S+\s*|\s+", text) if text else []


def _fragments(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _as_reply(item: ScriptItem, request: RecordedRequest) -> Reply:
    if isinstance(item, Reply):
        return item
    if isinstance(item, Mapping):
        return Reply.from_dict(item)
    return item(request)


class FakeLLMServer:
    """Both fake APIs on one port, with one shared script of replies.

    Start it with ``async with`` (or :meth:`start`/:meth:`stop`) on the test's event
    loop; ``port`` 0 picks a free port. ``api_key``, when set, is required (as
    ``x-api-key`` or ``Authorization: Bearer``); otherwise any key is accepted.
    ``reject_tools`` (settable at any time): every request that offers tools gets an
    HTTP 400 saying the model does not support them, without using the script.
    """

    def __init__(
        self,
        script: Iterable[ScriptItem] = (),
        *,
        default: ScriptItem | None = None,
        ttft_s: float = 0.0,
        token_delay_s: float = 0.0,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        reject_tools: bool = False,
    ) -> None:
        self.script: deque[ScriptItem] = deque(script)
        self.default = default
        self.ttft_s = ttft_s
        self.token_delay_s = token_delay_s
        self.api_key = api_key
        self.reject_tools = reject_tools
        self.requests: list[RecordedRequest] = []
        self.disconnects: list[RecordedDisconnect] = []
        self.completed = 0
        """Replies delivered in full."""
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None
        self._ids = itertools.count(1)
        self._changed = asyncio.Event()

    # -- lifecycle ---------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=32 * 1024 * 1024)
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_get("/_fake/log", self._log)
        app.router.add_post("/_fake/script", self._push_script)
        app.router.add_post("/_fake/reset", self._reset)
        app.router.add_get("/health", self._health)
        return app

    async def start(self) -> FakeLLMServer:
        # handler_cancellation: a client that disconnects cancels its handler at once,
        # even mid-sleep; that is how disconnects are seen and recorded.
        runner = web.AppRunner(
            self.app(), handler_cancellation=True, access_log=None, shutdown_timeout=0.2
        )
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._port)
        await site.start()
        self._runner = runner
        self._port = int(runner.addresses[0][1])
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeLLMServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        """The Anthropic base URL (the SDK appends ``/v1/messages``)."""
        return f"http://{self._host}:{self._port}"

    @property
    def openai_url(self) -> str:
        """The OpenAI base URL (the SDK appends ``/chat/completions``)."""
        return f"{self.url}/v1"

    # -- scripting and inspection ------------------------------------------------

    def push(self, *replies: ScriptItem) -> None:
        self.script.extend(replies)

    def bodies(self, api: Api | None = None) -> list[Any]:
        return [r.body for r in self.requests if api is None or r.api == api]

    async def wait_for_disconnect(self, timeout_s: float = 1.0, *, count: int = 1) -> float:
        """Waits until ``count`` disconnects were recorded; returns when the last one
        happened (monotonic). TimeoutError when they don't come in time."""
        await self._wait_until(lambda: len(self.disconnects) >= count, timeout_s)
        return self.disconnects[count - 1].at

    async def wait_for_requests(self, count: int = 1, timeout_s: float = 1.0) -> None:
        await self._wait_until(lambda: len(self.requests) >= count, timeout_s)

    async def _wait_until(self, done: Callable[[], bool], timeout_s: float) -> None:
        async with asyncio.timeout(timeout_s):
            while not done():
                await self._changed.wait()

    def _note_change(self) -> None:
        # Wake every waiter, then arm a fresh event for the next change.
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def log(self) -> dict[str, Any]:
        return {
            "requests": [
                {k: v for k, v in asdict(r).items() if k != "raw"} for r in self.requests
            ],
            "disconnects": [asdict(d) for d in self.disconnects],
            "completed": self.completed,
            "script_left": len(self.script),
        }

    # -- HTTP handlers -----------------------------------------------------------

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def _log(self, request: web.Request) -> web.Response:
        return web.json_response(self.log())

    async def _push_script(self, request: web.Request) -> web.Response:
        items = await request.json()
        if not isinstance(items, list):
            raise web.HTTPBadRequest(text="expected a JSON list of replies")
        self.push(*(Reply.from_dict(item) for item in items))
        return web.json_response({"script_left": len(self.script)})

    async def _reset(self, request: web.Request) -> web.Response:
        self.script.clear()
        self.requests.clear()
        self.disconnects.clear()
        self.completed = 0
        return web.json_response({"ok": True})

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        return await self._serve("anthropic", request)

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        return await self._serve("openai", request)

    def _authorized(self, request: web.Request) -> bool:
        if self.api_key is None:
            return True
        bearer = request.headers.get("Authorization", "")
        return request.headers.get("x-api-key") == self.api_key or bearer == (
            f"Bearer {self.api_key}"
        )

    async def _serve(self, api: Api, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return self._error(api, 400, "invalid_request_error", "body is not JSON")
        recorded = RecordedRequest(
            api=api,
            path=request.path,
            headers=dict(request.headers),
            body=body,
            at=time.monotonic(),
            raw=raw,
        )
        self.requests.append(recorded)
        self._note_change()
        index = len(self.requests) - 1
        if not self._authorized(request):
            return self._error(api, 401, None, "invalid api key")
        if self.reject_tools and body.get("tools"):
            return self._error(api, 400, None, TOOLS_REJECTED[api])
        if self.script:
            reply = _as_reply(self.script.popleft(), recorded)
        elif self.default is not None:
            reply = _as_reply(self.default, recorded)
        else:
            return self._error(api, 500, None, "the fake's script is exhausted")

        sent = [0]
        try:
            if reply.hang:
                await asyncio.Event().wait()
            if reply.status != 200:
                return self._error(
                    api, reply.status, reply.error_type, reply.error_message, reply.retry_after
                )
            model = str(body.get("model", "fake-model"))
            if body.get("stream"):
                response = await self._stream(api, request, reply, model, sent)
            else:
                await asyncio.sleep(self._ttft(reply))
                response = self._whole(api, reply, model)
            self.completed += 1
            return response
        except asyncio.CancelledError:
            self._disconnected(api, index, sent[0])
            raise
        except ConnectionResetError:
            # The client went away between two writes (before the cancellation that
            # would have said so).
            self._disconnected(api, index, sent[0])
            return web.Response(status=499)
        except _Dropped:
            self._disconnected(api, index, sent[0])
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError from None

    def _disconnected(self, api: Api, index: int, chunks_sent: int) -> None:
        self.disconnects.append(RecordedDisconnect(api, index, chunks_sent, time.monotonic()))
        self._note_change()

    def _ttft(self, reply: Reply) -> float:
        return self.ttft_s if reply.ttft_s is None else reply.ttft_s

    def _token_delay(self, reply: Reply) -> float:
        return self.token_delay_s if reply.token_delay_s is None else reply.token_delay_s

    def _error(
        self,
        api: Api,
        status: int,
        error_type: str | None,
        message: str | None = None,
        retry_after: float | None = None,
    ) -> web.Response:
        headers = {"request-id": f"req_fake_{next(self._ids)}"}
        if retry_after is not None:
            headers["retry-after"] = f"{retry_after:g}"
        message = message or f"fake error {status}"
        if api == "anthropic":
            kind = error_type or _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
            payload: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
        else:
            kind = error_type or _OPENAI_ERROR_TYPES.get(status, "server_error")
            payload = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
        return web.json_response(payload, status=status, headers=headers)

    # -- replies -----------------------------------------------------------------

    def _whole(self, api: Api, reply: Reply, model: str) -> web.Response:
        text = reply.full_text()
        ident = next(self._ids)
        thought = "".join(reply.reasoning_chunks())
        if api == "anthropic":
            content: list[dict[str, Any]] = []
            if thought:
                content.append({"type": "thinking", "thinking": thought, "signature": "sig"})
            if text:
                content.append({"type": "text", "text": text})
            for n, call in enumerate(reply.tool_calls):
                content.append(
                    {
                        "type": "tool_use",
                        "id": call.id or f"toolu_fake_{ident}_{n}",
                        "name": call.name,
                        "input": json.loads(call.arguments_json() or "{}"),
                    }
                )
            return web.json_response(
                {
                    "id": f"msg_fake_{ident}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": content,
                    "stop_reason": reply.stop_reason
                    or ("tool_use" if reply.tool_calls else "end_turn"),
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": len(reply.chunks())},
                }
            )
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if thought:
            message["reasoning_content"] = thought
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id or f"call_fake_{ident}_{n}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json()},
                }
                for n, call in enumerate(reply.tool_calls)
            ]
        return web.json_response(
            {
                "id": f"chatcmpl-fake-{ident}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": reply.stop_reason
                        or ("tool_calls" if reply.tool_calls else "stop"),
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": len(reply.chunks())},
            }
        )

    async def _stream(
        self, api: Api, request: web.Request, reply: Reply, model: str, sent: list[int]
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        ident = next(self._ids)
        events = (
            _anthropic_events(reply, model, ident)
            if api == "anthropic"
            else _openai_events(reply, model, ident)
        )
        first = True
        for is_content, payload in events:
            if is_content:
                await asyncio.sleep(self._ttft(reply) if first else self._token_delay(reply))
                first = False
                if sent[0] == reply.hang_after_chunks:
                    await asyncio.Event().wait()
                if sent[0] == reply.drop_after_chunks:
                    raise _Dropped
                if sent[0] == reply.error_after_chunks:
                    await response.write(_stream_error(api, reply))
                    await response.write_eof()
                    return response
                sent[0] += 1
            await response.write(payload)
        await response.write_eof()
        return response


def _sse(event: str | None, data: Any) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def _stream_error(api: Api, reply: Reply) -> bytes:
    message = reply.error_message or "fake mid-stream error"
    if api == "anthropic":
        kind = reply.error_type or "overloaded_error"
        return _sse("error", {"type": "error", "error": {"type": kind, "message": message}})
    kind = reply.error_type or "server_error"
    return _sse(None, {"error": {"message": message, "type": kind, "code": kind}})


def _anthropic_events(reply: Reply, model: str, ident: int) -> Iterable[tuple[bool, bytes]]:
    """(is_content, SSE bytes) of one streamed Messages API reply."""
    chunks = reply.chunks()
    yield (
        False,
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_fake_{ident}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
        ),
    )
    yield False, _sse("ping", {"type": "ping"})
    index = 0
    thinking = reply.reasoning_chunks()
    if thinking:
        yield (
            False,
            _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                },
            ),
        )
        for piece in thinking:
            delta = {"type": "thinking_delta", "thinking": piece}
            yield (
                True,
                _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                ),
            )
        signature = {"type": "signature_delta", "signature": "sig"}
        yield (
            False,
            _sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": signature},
            ),
        )
        yield False, _sse("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    if chunks:
        yield (
            False,
            _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
        )
        for chunk in chunks:
            yield (
                True,
                _sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": chunk},
                    },
                ),
            )
        yield False, _sse("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    for n, call in enumerate(reply.tool_calls):
        yield (
            False,
            _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": call.id or f"toolu_fake_{ident}_{n}",
                        "name": call.name,
                        "input": {},
                    },
                },
            ),
        )
        for fragment in _fragments(call.arguments_json()):
            yield (
                True,
                _sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": fragment},
                    },
                ),
            )
        yield False, _sse("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    stop = reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")
    yield (
        False,
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": max(1, len(chunks))},
            },
        ),
    )
    yield False, _sse("message_stop", {"type": "message_stop"})


def _openai_events(reply: Reply, model: str, ident: int) -> Iterable[tuple[bool, bytes]]:
    """(is_content, SSE bytes) of one streamed chat-completions reply."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(
            None,
            {
                "id": f"chatcmpl-fake-{ident}",
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            },
        )

    yield False, chunk({"role": "assistant", "content": ""})
    for thought in reply.reasoning_chunks():
        yield True, chunk({"reasoning_content": thought})
    for text in reply.chunks():
        yield True, chunk({"content": text})
    for n, call in enumerate(reply.tool_calls):
        head = {
            "index": n,
            "id": call.id or f"call_fake_{ident}_{n}",
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        yield True, chunk({"tool_calls": [head]})
        for fragment in _fragments(call.arguments_json()):
            yield True, chunk({"tool_calls": [{"index": n, "function": {"arguments": fragment}}]})
    finish = reply.stop_reason or ("tool_calls" if reply.tool_calls else "stop")
    yield False, chunk({}, finish)
    yield False, _sse(None, "[DONE]")


# -- the orchestrator's prompts, answered plausibly (load runs) ------------------------


_QUERY = re.compile(r"<query>\n(.*?)\n</query>", re.DOTALL)
_PASSAGE = re.compile(r'<passage n="(\d+)">', re.DOTALL)
_EXCERPT = re.compile(r'<excerpt n="(\d+)"[^>]*>\n[^\n]*\n(.*?)\n</excerpt>', re.DOTALL)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _flat_text(content: Any) -> str:
    """The text of an Anthropic ``system`` or message ``content`` (a string or blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return ""


_LEAD_INS = (
    "According to the documentation,",
    "The excerpts say that",
    "In short,",
    "As described there,",
)


def orchestrator_reply_text(body: Any, answer_words: int, *, quote: bool = False) -> str:
    """What the fake model says to one Messages API request of the orchestrator.

    Analysis prompt: valid analysis JSON built from the query. Listwise prompt: the
    passages in their given order. Anything else (the answer prompt): up to
    ``answer_words`` words of sentences from the excerpts, each citing its excerpt,
    behind a lead-in as a model's paraphrase would be (so the citation check embeds the
    sentence and the chunk, as it does for real answers), or verbatim with ``quote``
    (the check accepts a verbatim quote without the embedder: a cheaper load).
    """
    system = _flat_text(body.get("system", ""))
    user = "\n".join(_flat_text(m.get("content", "")) for m in body.get("messages", []))
    if "You analyse search queries" in system:
        match = _QUERY.search(user)
        query = " ".join((match.group(1) if match else user[-300:]).split())
        return json.dumps(
            {
                "rewritten_query": query,
                "hyde_document": f"The documentation explains {query}. It describes the "
                "settings involved and what happens when a part of the system fails.",
                "intent": query[:100],
                "filters": [],
                "negatives": [],
            }
        )
    if "You check claims against the passages" in system:
        return judge_reply(user)
    if "You rank search results" in system:
        numbers = [int(n) for n in _PASSAGE.findall(user)] or [1]
        return json.dumps(
            {"ranking": numbers, "reasons": {str(n): "it answers the query" for n in numbers[:3]}}
        )
    sentences: list[str] = []
    words = 0
    excerpts = _EXCERPT.findall(user)
    for number, text in excerpts:
        for sentence in _SENTENCE.split(" ".join(text.split()))[:2]:
            cut = sentence.split()[:30]
            if len(cut) < 4:
                continue
            claim = " ".join(cut).rstrip(".!?")
            if not quote:
                lead = _LEAD_INS[len(sentences) % len(_LEAD_INS)]
                claim = f"{lead} {claim[0].lower()}{claim[1:]}"
            sentences.append(f"{claim} [{number}].")
            words += len(cut)
            if words >= answer_words:
                break
        if words >= answer_words:
            break
    if not sentences:
        return "I can't answer that from the available documents: they say nothing about it."
    return " ".join(sentences)


_JUDGE_PASSAGE = re.compile(r'<passage id="(P\d+)">\n(.*?)\n</passage>', re.DOTALL)
_JUDGE_CLAIM = re.compile(r'<claim number="(\d+)" passage="(P\d+)">(.*?)</claim>', re.DOTALL)
_WORD = re.compile(r"[a-z0-9]{4,}")


def judge_reply(user: str) -> str:
    """The judge prompt's verdicts, as a crude but honest judge: a claim is supported
    when half or more of its longer words occur in its passage (the evidence: the passage
    sentence sharing most of them), not addressed otherwise."""
    passages = dict(_JUDGE_PASSAGE.findall(user))
    verdicts = []
    for number, passage_id, claim in _JUDGE_CLAIM.findall(user):
        passage = passages.get(passage_id, "")
        words = set(_WORD.findall(claim.lower()))
        found = words & set(_WORD.findall(passage.lower()))
        sentences = _SENTENCE.split(" ".join(passage.split()))
        best = max(sentences, key=lambda t: len(words & set(_WORD.findall(t.lower()))))
        supported = bool(words) and len(found) >= 0.5 * len(words)
        verdicts.append(
            {
                "claim": int(number),
                "verdict": "supported" if supported else "not_addressed",
                "evidence": best if supported else "",
                "confidence": 0.9,
            }
        )
    return json.dumps({"verdicts": verdicts})


# -- as a process ------------------------------------------------------------------


def _load_script(raw: str | None) -> tuple[list[Reply], dict[str, Any]]:
    """``--script``: inline JSON or ``@path``; a list of replies, or an object with
    ``replies`` and optional ``default``, ``ttft_s``, ``token_delay_s``."""
    if not raw:
        return [], {}
    text = Path(raw[1:]).read_text() if raw.startswith("@") else raw
    data = json.loads(text)
    if isinstance(data, list):
        return [Reply.from_dict(item) for item in data], {}
    options = {k: v for k, v in data.items() if k != "replies"}
    return [Reply.from_dict(item) for item in data.get("replies", [])], options


async def _main(args: argparse.Namespace) -> None:
    replies, options = _load_script(args.script)
    default: ScriptItem | None = None
    if "default" in options:
        default = Reply.from_dict(options["default"])
    if args.default_text is not None:
        default = Reply(text=args.default_text)
    if args.orchestrator_answers is not None:
        words, quote = args.orchestrator_answers, args.quote

        def default(request: RecordedRequest) -> Reply:
            return Reply(text=orchestrator_reply_text(request.body, words, quote=quote))

    server = FakeLLMServer(
        replies,
        default=default,
        ttft_s=args.ttft_s if args.ttft_s is not None else options.get("ttft_s", 0.0),
        token_delay_s=(
            args.token_delay_s
            if args.token_delay_s is not None
            else options.get("token_delay_s", 0.0)
        ),
        api_key=args.api_key,
        host=args.host,
        port=args.port,
        reject_tools=args.reject_tools,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        if args.ready_file:
            # written last, atomically: its presence means listening on this port
            ready = Path(args.ready_file)
            tmp = ready.with_suffix(".tmp")
            tmp.write_text(str(server.port))
            tmp.replace(ready)
        print(f"fake LLM server on {server.url}", file=sys.stderr, flush=True)
        if args.keep_log is None:
            await stop.wait()
            return
        # under load the recorded requests would grow without bound: keep the last N
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=5)
            del server.requests[: -args.keep_log or None]
            del server.disconnects[: -args.keep_log or None]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake Anthropic and OpenAI-compatible APIs.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file", help="receives the port once listening")
    parser.add_argument("--script", help="replies as JSON, or @FILE")
    parser.add_argument("--default-text", help="the reply once the script is exhausted")
    parser.add_argument("--ttft-s", type=float, default=None, help="time to first token")
    parser.add_argument("--token-delay-s", type=float, default=None, help="delay per chunk")
    parser.add_argument("--api-key", default=None, help="require this key")
    parser.add_argument(
        "--orchestrator-answers",
        type=int,
        default=None,
        metavar="WORDS",
        help="answer the orchestrator's prompts plausibly once the script is exhausted: "
        "analysis JSON, a listwise ranking, and answers of up to WORDS words of cited "
        "sentences from the excerpts (load runs)",
    )
    parser.add_argument(
        "--quote", action="store_true", help="with --orchestrator-answers: quote verbatim"
    )
    parser.add_argument(
        "--reject-tools",
        action="store_true",
        help="answer every request that offers tools with HTTP 400 (a model without tools)",
    )
    parser.add_argument(
        "--keep-log", type=int, default=None, help="record only the last N requests (load runs)"
    )
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args))


if __name__ == "__main__":
    main()
