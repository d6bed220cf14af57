"""Replies real compatible servers send that the canonical fake does not: each
provider's SDK over an injected in-memory transport (no network)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

import httpx2
import pytest

from groundwire_core.errors import BackendFailure
from groundwire_orchestrator.llm.anthropic import AnthropicConfig, AnthropicProvider
from groundwire_orchestrator.llm.base import (
    ChatMessage,
    LLMProvider,
    LLMRequest,
    StreamEvent,
    TextDelta,
    ToolCall,
)
from groundwire_orchestrator.llm.openai_compat import OpenAICompatConfig, OpenAICompatProvider

REQUEST = LLMRequest(system="s", messages=(ChatMessage("user", "q"),))


def _sse(*payloads: object, done: bool = True) -> str:
    lines = [f"data: {json.dumps(p)}\n\n" for p in payloads]
    return "".join(lines) + ("data: [DONE]\n\n" if done else "")


def _chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _openai(body: str) -> tuple[LLMProvider, httpx2.AsyncClient]:
    def reply(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, text=body, headers={"content-type": "text/event-stream"})

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(reply))
    config = OpenAICompatConfig(base_url="http://compat.test/v1", strong_model="m")
    return OpenAICompatProvider(config, http_client=http), http


async def _run(
    make: Callable[[str], tuple[LLMProvider, httpx2.AsyncClient]], body: str
) -> list[StreamEvent]:
    llm, http = make(body)
    try:
        return [e async for e in llm.stream(REQUEST, timeout_s=5)]
    finally:
        await llm.aclose()
        await http.aclose()


async def test_a_whole_tool_call_without_index_or_finish_reason() -> None:
    # Ollama-style: the call arrives in one delta, and the stream just ends.
    whole = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "search", "arguments": '{"query": "x"}'},
    }
    body = _sse(
        _chunk({"role": "assistant", "content": "Looking."}),
        _chunk({"tool_calls": [whole]}),
        done=False,
    )
    events = await _run(_openai, body)
    assert events == [TextDelta("Looking."), ToolCall("call_1", "search", {"query": "x"})]


async def test_tool_calls_without_ids_get_stable_ones() -> None:
    head = {"index": 0, "function": {"name": "search", "arguments": ""}}
    body = _sse(
        _chunk({"tool_calls": [head]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"query"'}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ': "y"}'}}]}),
        _chunk({}, "tool_calls"),
    )
    assert await _run(_openai, body) == [ToolCall("call_0", "search", {"query": "y"})]


async def test_a_tool_call_without_a_name_is_malformed() -> None:
    body = _sse(
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
        _chunk({}, "tool_calls"),
    )
    with pytest.raises(BackendFailure):
        await _run(_openai, body)


async def test_arguments_that_are_not_an_object_are_malformed() -> None:
    head = {"index": 0, "id": "c1", "function": {"name": "search", "arguments": "[1, 2]"}}
    body = _sse(_chunk({"tool_calls": [head]}), _chunk({}, "tool_calls"))
    with pytest.raises(BackendFailure):
        await _run(_openai, body)


async def test_a_body_that_is_not_json_is_malformed() -> None:
    with pytest.raises(BackendFailure):
        await _run(_openai, "data: {not json\n\n")


def _anthropic(body: str) -> tuple[LLMProvider, httpx2.AsyncClient]:
    def reply(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, text=body, headers={"content-type": "text/event-stream"})

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(reply))
    config = AnthropicConfig(
        api_key=None, base_url="http://anthropic.test", fast_model="f", strong_model="s"
    )
    return AnthropicProvider(config, http_client=http), http


def _event(payload: Mapping[str, object]) -> str:
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n"


async def test_anthropic_text_inside_content_block_start_is_not_lost() -> None:
    body = "".join(
        _event(p)
        for p in (
            {
                "type": "message_start",
                "message": {
                    "id": "m",
                    "type": "message",
                    "role": "assistant",
                    "model": "s",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                },
            },
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": "Hello"},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": " world"},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 2},
            },
            {"type": "message_stop"},
        )
    )
    assert await _run(_anthropic, body) == [TextDelta("Hello"), TextDelta(" world")]


async def test_anthropic_json_delta_outside_a_tool_block_is_malformed() -> None:
    body = _event(
        {
            "type": "content_block_delta",
            "index": 3,
            "delta": {"type": "input_json_delta", "partial_json": "{}"},
        }
    )
    with pytest.raises(BackendFailure):
        await _run(_anthropic, body)
