"""Claude through the Anthropic Messages API (the official ``anthropic`` SDK, async).

Streams text deltas and tool calls; sends tool results back as ``tool_result``
blocks. Thinking never reaches the answer text: ``thinking`` blocks, and the
``<think>`` blocks that reasoning models behind Anthropic-compatible endpoints write
into their text (llm/reasoning.py), come out as ``ReasoningDelta``. The SDK's own
retries are off: a failing provider is left to the failover chain, which knows
whether another provider can answer instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import anthropic
import httpx2
from anthropic.types import (
    InputJSONDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    TextBlock,
    ThinkingBlock,
    ThinkingDelta,
    ToolUseBlock,
)
from anthropic.types import TextDelta as SdkTextDelta
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

WEB_SEARCH_TOOL = "web_search_20250305"
"""The version of Anthropic's server-side web search tool offered for live lookups."""


@dataclass(frozen=True, kw_only=True)
class AnthropicConfig:
    """Where Claude is and which models serve each role."""

    fast_model: str
    strong_model: str
    api_key: SecretStr | None = None
    """None with a ``base_url`` set: a gateway that needs no key."""
    base_url: str | None = None
    """None: the SDK's default (the public API)."""
    name: str = "anthropic"

    def model(self, role: ModelRole) -> str:
        return self.fast_model if role == "fast" else self.strong_model


def to_anthropic_messages(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """Our turns as Messages API ``messages``.

    Consecutive turns of one role become one message (the API alternates roles);
    tool results travel as ``tool_result`` blocks of a user message, right after the
    assistant turn whose ``tool_use`` blocks asked for them. A message that is one
    text block is sent as a plain string.
    """
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    for turn in turns:
        if isinstance(turn, ToolResult):
            add(
                "user",
                [{"type": "tool_result", "tool_use_id": turn.call_id, "content": turn.content}],
            )
            continue
        blocks: list[dict[str, Any]] = []
        if turn.content:
            blocks.append({"type": "text", "text": turn.content})
        blocks.extend(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)}
            for call in turn.tool_calls
        )
        if blocks:  # the API rejects empty content
            add(turn.role, blocks)
    for message in messages:
        content = message["content"]
        if len(content) == 1 and content[0]["type"] == "text":
            message["content"] = content[0]["text"]
    return messages


def request_params(request: LLMRequest, model: str, *, tools: bool) -> dict[str, Any]:
    """Keyword arguments of ``messages.create`` for ``request`` (no ``stream``)."""
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": to_anthropic_messages(request.messages),
    }
    # No temperature: the Messages API of SDK 2.x has no sampling parameters.
    if request.system:
        params["system"] = request.system
    if request.stop:
        params["stop_sequences"] = list(request.stop)
    if tools and request.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
            for t in request.tools
        ]
    if tools and request.web_search is not None and request.web_search.max_uses > 0:
        # Anthropic's server-side web search, kept to the collection's documentation
        # sites and to the live lookup's budget (stages/live_docs.py)
        params.setdefault("tools", []).append(
            {
                "type": WEB_SEARCH_TOOL,
                "name": "web_search",
                "allowed_domains": list(request.web_search.allowed_domains),
                "max_uses": request.web_search.max_uses,
            }
        )
    return params


class _StreamReader:
    """Turns raw Messages API stream events into our events."""

    def __init__(self, provider: str) -> None:
        self._provider = provider
        self._tool_uses: dict[int, tuple[str, str, list[str]]] = {}
        self._thinking = ReasoningFilter()
        self.stop_reason: str | None = None

    def feed(self, event: object) -> Iterator[StreamEvent]:
        if isinstance(event, RawContentBlockStartEvent):
            block = event.content_block
            if isinstance(block, ToolUseBlock):
                self._tool_uses[event.index] = (block.id, block.name, [])
            elif isinstance(block, TextBlock) and block.text:
                yield from events(self._thinking.feed(block.text))
            elif isinstance(block, ThinkingBlock) and block.thinking:
                yield ReasoningDelta(block.thinking)
        elif isinstance(event, RawContentBlockDeltaEvent):
            delta = event.delta
            if isinstance(delta, SdkTextDelta):
                if delta.text:
                    yield from events(self._thinking.feed(delta.text))
            elif isinstance(delta, ThinkingDelta):
                if delta.thinking:
                    yield ReasoningDelta(delta.thinking)
            elif isinstance(delta, InputJSONDelta):
                pending = self._tool_uses.get(event.index)
                if pending is None:
                    raise failures.malformed(self._provider, "input_json_delta outside a tool_use")
                pending[2].append(delta.partial_json)
        elif isinstance(event, RawContentBlockStopEvent):
            pending = self._tool_uses.pop(event.index, None)
            if pending is not None:
                call_id, name, parts = pending
                yield ToolCall(call_id, name, wire.tool_arguments(self._provider, "".join(parts)))
        elif isinstance(event, RawMessageDeltaEvent):
            self.stop_reason = event.delta.stop_reason

    def flush(self) -> Iterator[StreamEvent]:
        """Text the reasoning filter still holds, at the end of the stream."""
        yield from events(self._thinking.flush())


class AnthropicProvider:
    """An :class:`~groundwire_orchestrator.llm.base.LLMProvider` for Claude.

    ``http_client`` is injectable (tests pass a transport); by default the SDK makes
    its own on first use. Errors: Overloaded (429, 529, overloaded_error),
    Unavailable (5xx, connection), DeadlineExceeded (timeout), BackendFailure (other
    4xx, malformed stream), all naming ``llm:<name>``.
    """

    def __init__(
        self, config: AnthropicConfig, *, http_client: httpx2.AsyncClient | None = None
    ) -> None:
        self._config = config
        self._http_client = http_client
        self._client: anthropic.AsyncAnthropic | None = None

    @property
    def name(self) -> str:
        return self._config.name

    def _sdk(self) -> anthropic.AsyncAnthropic:
        if self._client is None:
            key = self._config.api_key
            self._client = anthropic.AsyncAnthropic(
                # An explicit key (even "") keeps the SDK from reading credentials from
                # the environment or disk: settings are the only source.
                api_key=key.get_secret_value() if key is not None else "",
                base_url=self._config.base_url,
                max_retries=0,
                timeout=wire.DEFAULT_CLIENT_TIMEOUT,
                http_client=self._http_client,
            )
        return self._client

    def _extra_headers(self) -> dict[str, str | anthropic.Omit] | None:
        if self._config.api_key is None:
            # No key: send no Authorization at all (the SDK would send "Bearer ").
            return {"Authorization": anthropic.omit}
        return None

    def _failure(
        self, exc: BaseException, *, tools_offered: bool = False
    ) -> GroundwireError | None:
        """The GroundwireError for an SDK or transport exception; None for others.
        ``tools_offered``: the request offered tools (a refusal of them is
        ToolsUnsupported)."""
        name = self.name
        if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException | TimeoutError):
            return failures.timed_out(name)
        if isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):
            return failures.unreachable(name)
        if isinstance(exc, anthropic.APIStatusError):
            log.warning("%s answered HTTP %s: %s", name, exc.status_code, exc.api_message)
            return failures.error_for_status(
                name,
                exc.status_code,
                error_type=exc.type,
                headers=exc.response.headers,
                message=exc.api_message,
                tools_offered=tools_offered,
            )
        if isinstance(exc, anthropic.AnthropicError | ValueError):
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
        events = await wire.call(
            self.name,
            failure,
            lambda: self._sdk().messages.create(
                **params,
                stream=True,
                timeout=wire.http_timeout(timeout_s),
                extra_headers=self._extra_headers(),
            ),
            deadline=deadline,
            timeout_s=timeout_s,
        )
        reader = _StreamReader(self.name)
        guarded = wire.items(
            self.name, self._failure, events, deadline=deadline, timeout_s=timeout_s
        )
        async with contextlib.aclosing(guarded) as stream:
            async for event in stream:
                for out in reader.feed(event):
                    yield out
        for out in reader.flush():
            yield out
        log.debug("%s stream ended: %s", self.name, reader.stop_reason)

    async def complete(self, request: LLMRequest, *, timeout_s: float) -> str:
        """The reply's text, in one non-streaming call (tools are not offered)."""
        params = request_params(request, self._config.model(request.role), tools=False)
        message = await wire.call(
            self.name,
            self._failure,
            lambda: self._sdk().messages.create(
                **params,
                timeout=wire.http_timeout(timeout_s),
                extra_headers=self._extra_headers(),
            ),
            deadline=asyncio.get_running_loop().time() + timeout_s,
            timeout_s=timeout_s,
        )
        spent = getattr(message, "usage", None)
        if spent is not None:  # the API's own count, for the request's token meter
            usage.record(spent.input_tokens or 0, spent.output_tokens or 0, estimated=False)
        content = cast(list[object], message.content)
        text = "".join(block.text for block in content if isinstance(block, TextBlock))
        return split_reasoning(text).answer

    async def warm_up(self) -> None:
        """Pays the SDK's one-time costs before the first request, whose deadline they
        would otherwise eat (client construction, lazy imports, response models: up to
        seconds on a busy CPU). Opens no connection: one canned streamed and one
        canned whole reply run through an in-memory transport."""
        self._sdk()
        config = replace(self._config, api_key=SecretStr("warm-up"), base_url=_REHEARSAL_URL)
        await wire.rehearse(
            lambda http: AnthropicProvider(config, http_client=http), _rehearsal_reply
        )

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


_REHEARSAL_URL = "http://warm-up.invalid"
_REHEARSAL_STREAM = "".join(
    f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
    for event in (
        {
            "type": "message_start",
            "message": {
                "id": "msg_warm_up",
                "type": "message",
                "role": "assistant",
                "model": "warm-up",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_w", "name": "w", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": "{}"},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    )
)
_REHEARSAL_MESSAGE = {
    "id": "msg_warm_up",
    "type": "message",
    "role": "assistant",
    "model": "warm-up",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


def _rehearsal_reply(request: httpx2.Request) -> httpx2.Response:
    if json.loads(request.content).get("stream"):
        return httpx2.Response(
            200, text=_REHEARSAL_STREAM, headers={"content-type": "text/event-stream"}
        )
    return httpx2.Response(200, json=_REHEARSAL_MESSAGE)
