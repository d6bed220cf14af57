"""Reasoning models through the real SDKs against the fake APIs: ``<think>`` blocks
split across deltas, unterminated at the end, and the thinking the APIs send apart
(OpenAI-compatible ``reasoning_content``, Anthropic ``thinking`` blocks) never reach
the text of a streamed or a whole reply; they come out as ReasoningDelta."""

from __future__ import annotations

from groundwire_orchestrator.llm.base import (
    ChatMessage,
    LLMProvider,
    LLMRequest,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
)
from tests.fakes.llm_server import FakeLLMServer, Reply, ToolUse

REQUEST = LLMRequest(system="Answer.", messages=(ChatMessage("user", "How fast?"),))
SECRET = "SECRET-MUSING"
SPLIT_THINK = ["Sure", ". <thi", "nk>I think ", SECRET, " [7]</th", "ink>", "\n\nSixty ", "[1]."]


async def _stream(llm: LLMProvider) -> list[StreamEvent]:
    return [e async for e in llm.stream(REQUEST, timeout_s=5)]


def _text(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def _thought(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, ReasoningDelta))


async def test_split_think_tags_stay_out_of_the_streamed_text(
    llm: LLMProvider, fake: FakeLLMServer
) -> None:
    fake.push(Reply(text=SPLIT_THINK))
    events = await _stream(llm)
    assert _text(events) == "Sure. Sixty [1]."
    assert _thought(events) == f"I think {SECRET} [7]"
    assert all(SECRET not in e.text for e in events if isinstance(e, TextDelta))


async def test_an_unterminated_block_never_reaches_the_text(
    llm: LLMProvider, fake: FakeLLMServer
) -> None:
    fake.push(Reply(text=["Start ", "<think", ">still ", SECRET, " </thi"]))
    events = await _stream(llm)
    assert _text(events) == "Start "
    assert SECRET in _thought(events)


async def test_thinking_sent_apart_is_not_text(llm: LLMProvider, fake: FakeLLMServer) -> None:
    """OpenAI-compatible: reasoning_content deltas; Anthropic: a thinking block."""
    fake.push(Reply(text="Sixty [1].", reasoning=f"Let me see {SECRET} [9]"))
    events = await _stream(llm)
    assert _text(events) == "Sixty [1]."
    assert _thought(events) == f"Let me see {SECRET} [9]"


async def test_thinking_before_a_tool_call(llm: LLMProvider, fake: FakeLLMServer) -> None:
    fake.push(
        Reply(
            text=["<think>", SECRET, "</think>", "Searching."],
            reasoning="apart",
            tool_calls=[ToolUse("search", {"query": "q"})],
        )
    )
    events = await _stream(llm)
    assert _text(events) == "Searching."
    assert [e.name for e in events if isinstance(e, ToolCall)] == ["search"]
    assert SECRET in _thought(events)


async def test_whole_replies_leave_the_thinking_out(
    llm: LLMProvider, fake: FakeLLMServer
) -> None:
    fake.push(
        Reply(text=f'<think>{SECRET} {{"x": 0}}</think>\n{{"ranking": [1]}}', reasoning="apart"),
        Reply(text=f"Answer <think>{SECRET}"),
    )
    assert await llm.complete(REQUEST, timeout_s=5) == '{"ranking": [1]}'
    assert await llm.complete(REQUEST, timeout_s=5) == "Answer "
    assert all(not r.body.get("stream") for r in fake.requests)
