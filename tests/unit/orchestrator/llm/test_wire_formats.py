"""Our request types as each API's wire format: messages, tools, tool results."""

from __future__ import annotations

import json

from groundwire_orchestrator.llm import anthropic as anthropic_llm
from groundwire_orchestrator.llm import openai_compat
from groundwire_orchestrator.llm.base import (
    ChatMessage,
    LLMRequest,
    ToolCall,
    ToolResult,
    ToolSpec,
)

SEARCH = ToolSpec(
    "search",
    "Search the collection again.",
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)
CALL_A = ToolCall("call_a", "search", {"query": "install linux"})
CALL_B = ToolCall("call_b", "read_document", {"source": "guide.md"})
TURNS = (
    ChatMessage("user", "How do I install it?"),
    ChatMessage("assistant", "Let me look.", tool_calls=(CALL_A, CALL_B)),
    ToolResult("call_a", "search", "[1] Install > Linux ..."),
    ToolResult("call_b", "read_document", "whole guide"),
    ChatMessage("user", "Only Linux, please."),
)


def test_anthropic_tool_results_are_one_user_message_after_the_tool_use() -> None:
    messages = anthropic_llm.to_anthropic_messages(TURNS)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[0]["content"] == "How do I install it?"
    assert messages[1]["content"] == [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "call_a", "name": "search", "input": {"query": "install linux"}},
        {
            "type": "tool_use",
            "id": "call_b",
            "name": "read_document",
            "input": {"source": "guide.md"},
        },
    ]
    # tool results first, then the user's own text, in one message (roles alternate)
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_a", "content": "[1] Install > Linux ..."},
        {"type": "tool_result", "tool_use_id": "call_b", "content": "whole guide"},
        {"type": "text", "text": "Only Linux, please."},
    ]


def test_anthropic_drops_empty_text_blocks() -> None:
    turns = (ChatMessage("user", "q"), ChatMessage("assistant", "", tool_calls=(CALL_A,)))
    messages = anthropic_llm.to_anthropic_messages(turns)
    assert messages[1]["content"] == [
        {"type": "tool_use", "id": "call_a", "name": "search", "input": {"query": "install linux"}}
    ]


def test_anthropic_params_pick_the_model_by_role_and_send_tools() -> None:
    config = anthropic_llm.AnthropicConfig(fast_model="fast-m", strong_model="strong-m")
    request = LLMRequest(
        system="Answer from the excerpts.",
        messages=(ChatMessage("user", "q"),),
        role="fast",
        max_tokens=300,
        tools=(SEARCH,),
        stop=("</answer>",),
    )
    params = anthropic_llm.request_params(request, config.model(request.role), tools=True)
    assert params["model"] == "fast-m"
    assert params["system"] == "Answer from the excerpts."
    assert params["max_tokens"] == 300
    assert params["stop_sequences"] == ["</answer>"]
    assert params["tools"] == [
        {"name": "search", "description": SEARCH.description, "input_schema": SEARCH.parameters}
    ]
    assert "temperature" not in params  # the 2.x Messages API has no sampling knobs
    without = anthropic_llm.request_params(request, "m", tools=False)
    assert "tools" not in without


def test_openai_messages_carry_tool_calls_and_tool_messages() -> None:
    messages = openai_compat.to_openai_messages("Be brief.", TURNS)
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert messages[1] == {"role": "user", "content": "How do I install it?"}
    assistant = messages[2]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == "Let me look."
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_a", "call_b"]
    assert assistant["tool_calls"][0]["type"] == "function"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {
        "query": "install linux"
    }
    assert messages[3] == {
        "role": "tool",
        "tool_call_id": "call_a",
        "content": "[1] Install > Linux ...",
    }
    assert messages[4]["tool_call_id"] == "call_b"
    assert messages[5] == {"role": "user", "content": "Only Linux, please."}


def test_openai_params_and_one_model_servers() -> None:
    config = openai_compat.OpenAICompatConfig(base_url="http://x/v1", strong_model="qwen")
    assert config.model("fast") == "qwen"  # no fast model: the strong one serves both
    request = LLMRequest(system="", messages=(ChatMessage("user", "q"),), tools=(SEARCH,))
    params = openai_compat.request_params(request, config.model("strong"), tools=True)
    assert params["messages"] == [{"role": "user", "content": "q"}]  # no empty system
    assert params["max_tokens"] == 1024
    assert params["temperature"] == 0.0
    assert params["tools"][0]["function"]["parameters"] == SEARCH.parameters
