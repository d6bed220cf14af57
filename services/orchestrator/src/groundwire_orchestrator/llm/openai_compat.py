"""Any OpenAI-compatible ``/v1/chat/completions`` endpoint: vLLM, llama.cpp's server,
Ollama, LiteLLM, OpenAI itself.

Uses the official ``openai`` SDK (the client those servers document), streaming over
SSE. Tool calls arrive as ``tool_calls`` deltas whose JSON arguments come in
fragments; a :class:`ToolCall` is emitted once the choice finishes. A reasoning
model's thinking (``<think>`` blocks in the content, or the ``reasoning_content`` /
``reasoning`` deltas of vLLM, DeepSeek, OpenRouter) never reaches the answer text
(llm/reasoning.py). SDK retries are off: failing over is the failover chain's job.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletionChunk
from pydantic import SecretStr

from groundwire_core.errors import GroundwireError
from groundwire_orchestrator import usage
from groundwire_orchestrator.llm import failures, wire
from groundwire_orchestrator.llm.base import (
    LLMRequest,
    ModelRole,
    ReasoningDelta,
    StreamEvent,
    ToolCall,
    ToolResult,
    Turn,
)
from groundwire_orchestrator.llm.reasoning import ReasoningFilter, events, split_reasoning

log = logging.getLogger(__name__)

REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Where OpenAI-compatible servers put the thinking they split out themselves (vLLM,
DeepSeek: ``reasoning_content``; OpenRouter, newer vLLM: ``reasoning``)."""

NO_KEY = "EMPTY"
"""Given to the SDK, which insists on a key, when none is configured (keyless local
servers: vLLM, llama.cpp, Ollama); the Authorization header is then left out."""


@dataclass(frozen=True, kw_only=True)
class OpenAICompatConfig:
    """Where the endpoint is and which model names serve each role."""

    base_url: str
    """Including the API version path, e.g. ``http://127.0.0.1:8000/v1``."""
    strong_model: str
    fast_model: str | None = None
    """None: the strong model serves the fast role too (one-model servers)."""
    api_key: SecretStr | None = None
    name: str = "openai"

    def model(self, role: ModelRole) -> str:
        if role == "fast" and self.fast_model:
            return self.fast_model
        return self.strong_model


def to_openai_messages(system: str, turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """Our system prompt and turns as chat-completions ``messages``.

    Tool calls ride on the assistant message as ``tool_calls`` (arguments as a JSON
    string); each result is a ``tool`` message naming its call.
    """
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    for turn in turns:
        if isinstance(turn, ToolResult):
            messages.append({"role": "tool", "tool_call_id": turn.call_id, "content": turn.content})
            continue
        message: dict[str, Any] = {"role": turn.role, "content": turn.content}
        if turn.tool_calls:
            message["content"] = turn.content or None
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments))},
                }
                for call in turn.tool_calls
            ]
        messages.append(message)
    return messages


def request_params(request: LLMRequest, model: str, *, tools: bool) -> dict[str, Any]:
    """Keyword arguments of ``chat.completions.create`` for ``request`` (no ``stream``)."""
    params: dict[str, Any] = {
        "model": model,
        "messages": to_openai_messages(request.system, request.messages),
        # max_tokens, not max_completion_tokens: the one every compatible server reads
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
    }
    if request.stop:
        params["stop"] = list(request.stop)
    if tools and request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                },
            }
            for t in request.tools
        ]
    return params


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _ChunkReader:
    """Turns chat-completion chunks into our events (first choice only)."""

    def __init__(self, provider: str) -> None:
        self._provider = provider
        self._calls: dict[int, _PendingCall] = {}
        self._thinking = ReasoningFilter()
        self.finish_reason: str | None = None

    def feed(self, chunk: ChatCompletionChunk) -> Iterator[StreamEvent]:
        for choice in chunk.choices or ():
            if choice.index not in (0, None):
                continue
            delta = choice.delta
            if delta is not None:
                thought = _reasoning_of(delta.model_extra)
                if thought:
                    yield ReasoningDelta(thought)
                if delta.content:
                    yield from events(self._thinking.feed(delta.content))
                for part in delta.tool_calls or ():
                    # Some servers omit the index when a call arrives whole.
                    index = part.index if isinstance(part.index, int) else len(self._calls)
                    pending = self._calls.setdefault(index, _PendingCall())
                    if part.id:
                        pending.id = part.id
                    if part.function is not None:
                        if part.function.name:
                            pending.name += part.function.name
                        if part.function.arguments:
                            pending.arguments.append(part.function.arguments)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
                yield from self.flush()

    def flush(self) -> Iterator[StreamEvent]:
        """Text held back by the reasoning filter, then the tool calls accumulated so
        far, complete, in index order."""
        yield from events(self._thinking.flush())
        calls, self._calls = self._calls, {}
        for index in sorted(calls):
            pending = calls[index]
            if not pending.name:
                raise failures.malformed(self._provider, "a tool call without a name")
            yield ToolCall(
                pending.id or f"call_{index}",
                pending.name,
                wire.tool_arguments(self._provider, "".join(pending.arguments)),
            )


def _reasoning_of(extra: dict[str, Any] | None) -> str:
    """The thinking a message or delta carries in a reasoning field, if any."""
    if not extra:
        return ""
    return "".join(v for k in REASONING_FIELDS if isinstance(v := extra.get(k), str))


class OpenAICompatProvider:
    """An :class:`~groundwire_orchestrator.llm.base.LLMProvider` for an
    OpenAI-compatible chat-completions endpoint.

    ``http_client`` is injectable (tests pass a transport). Errors: Overloaded (429,
    529), Unavailable (5xx, connection), DeadlineExceeded (timeout), BackendFailure
    (other 4xx, malformed stream), all naming ``llm:<name>``.
    """

    def __init__(
        self, config: OpenAICompatConfig, *, http_client: httpx2.AsyncClient | None = None
    ) -> None:
        self._config = config
        self._http_client = http_client
        self._client: openai.AsyncOpenAI | None = None

    @property
    def name(self) -> str:
        return self._config.name

    def _sdk(self) -> openai.AsyncOpenAI:
        if self._client is None:
            key = self._config.api_key
            self._client = openai.AsyncOpenAI(
                api_key=key.get_secret_value() if key is not None else NO_KEY,
                base_url=self._config.base_url,
                max_retries=0,
                timeout=wire.DEFAULT_CLIENT_TIMEOUT,
                http_client=self._http_client,
            )
        return self._client

    def _extra_headers(self) -> dict[str, str | openai.Omit] | None:
        if self._config.api_key is None:
            return {"Authorization": openai.omit}
        return None

    def _failure(
        self, exc: BaseException, *, tools_offered: bool = False
    ) -> GroundwireError | None:
        """The GroundwireError for an SDK or transport exception; None for others.
        ``tools_offered``: the request offered tools (a refusal of them is
        ToolsUnsupported)."""
        name = self.name
        if isinstance(exc, openai.APITimeoutError | httpx2.TimeoutException):
            return failures.timed_out(name)
        if isinstance(exc, openai.APIConnectionError | httpx2.TransportError):
            return failures.unreachable(name)
        if isinstance(exc, openai.APIStatusError):
            log.warning("%s answered HTTP %s: %s", name, exc.status_code, exc.message)
            return failures.error_for_status(
                name,
                exc.status_code,
                error_type=exc.type or exc.code,
                headers=exc.response.headers,
                message=exc.message,
                tools_offered=tools_offered,
            )
        if isinstance(exc, openai.APIError):
            # An error reported inside a 200 stream: no status, only the body's type.
            log.warning("%s reported an error mid-stream: %s", name, exc.message)
            return failures.error_for_status(name, 200, error_type=exc.type or exc.code)
        if isinstance(exc, openai.OpenAIError | ValueError):
            log.warning("%s sent a malformed reply: %r", name, exc)
            return failures.malformed(name, "unreadable response")
        return None

    async def stream(self, request: LLMRequest, *, timeout_s: float) -> AsyncIterator[StreamEvent]:
        """Streams text deltas and tool calls; ``timeout_s`` bounds the whole call.

        Closing or cancelling the iteration closes the HTTP stream.
        """
        deadline = asyncio.get_running_loop().time() + timeout_s
        params = request_params(request, self._config.model(request.role), tools=True)
        failure = functools.partial(self._failure, tools_offered="tools" in params)
        chunks = await wire.call(
            self.name,
            failure,
            lambda: self._sdk().chat.completions.create(
                **params,
                stream=True,
                timeout=wire.http_timeout(timeout_s),
                extra_headers=self._extra_headers(),
            ),
            deadline=deadline,
            timeout_s=timeout_s,
        )
        reader = _ChunkReader(self.name)
        guarded = wire.items(
            self.name, self._failure, chunks, deadline=deadline, timeout_s=timeout_s
        )
        async with contextlib.aclosing(guarded) as stream:
            async for chunk in stream:
                for out in reader.feed(chunk):
                    yield out
        # A server that ends the stream without a finish_reason still meant its calls.
        for out in reader.flush():
            yield out
        log.debug("%s stream ended: %s", self.name, reader.finish_reason)

    async def complete(self, request: LLMRequest, *, timeout_s: float) -> str:
        """The reply's text, in one non-streaming call (tools are not offered)."""
        params = request_params(request, self._config.model(request.role), tools=False)
        completion = await wire.call(
            self.name,
            self._failure,
            lambda: self._sdk().chat.completions.create(
                **params,
                timeout=wire.http_timeout(timeout_s),
                extra_headers=self._extra_headers(),
            ),
            deadline=asyncio.get_running_loop().time() + timeout_s,
            timeout_s=timeout_s,
        )
        if not completion.choices:
            raise failures.malformed(self.name, "no choices")
        spent = completion.usage
        if spent is not None:  # the API's own count, for the request's token meter
            usage.record(spent.prompt_tokens or 0, spent.completion_tokens or 0, estimated=False)
        return split_reasoning(completion.choices[0].message.content or "").answer

    async def warm_up(self) -> None:
        """Pays the SDK's one-time costs before the first request, whose deadline they
        would otherwise eat (client construction, lazy imports, response models).
        Opens no connection: one canned streamed and one canned whole reply run
        through an in-memory transport."""
        self._sdk()
        config = replace(self._config, api_key=SecretStr("warm-up"), base_url=_REHEARSAL_URL)
        await wire.rehearse(
            lambda http: OpenAICompatProvider(config, http_client=http), _rehearsal_reply
        )

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


_REHEARSAL_URL = "http://warm-up.invalid/v1"


def _rehearsal_chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    chunk = {
        "id": "chatcmpl-warm-up",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "warm-up",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(chunk)}\n\n"


_REHEARSAL_STREAM = (
    _rehearsal_chunk({"role": "assistant", "content": "ok"})
    + _rehearsal_chunk(
        {
            "tool_calls": [
                {"index": 0, "id": "call_w", "type": "function", "function": {"name": "w"}}
            ]
        }
    )
    + _rehearsal_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]})
    + _rehearsal_chunk({}, "tool_calls")
    + "data: [DONE]\n\n"
)
_REHEARSAL_COMPLETION = {
    "id": "chatcmpl-warm-up",
    "object": "chat.completion",
    "created": 0,
    "model": "warm-up",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
}


def _rehearsal_reply(request: httpx2.Request) -> httpx2.Response:
    if json.loads(request.content).get("stream"):
        return httpx2.Response(
            200, text=_REHEARSAL_STREAM, headers={"content-type": "text/event-stream"}
        )
    return httpx2.Response(200, json=_REHEARSAL_COMPLETION)
