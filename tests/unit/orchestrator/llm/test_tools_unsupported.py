"""Which provider errors mean "this model has no tools" (retried once without them by
the agentic loop) and which do not (auth, quota, content, server errors)."""

from __future__ import annotations

import pytest

from groundwire_core.errors import BackendFailure, Overloaded, Unavailable
from groundwire_orchestrator.llm.failures import ToolsUnsupported, error_for_status

REFUSALS = [
    (400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser'),
    (400, "registry.ollama.ai/library/gemma:2b does not support tools"),
    (400, "Unrecognized request argument supplied: tools"),
    (422, "tools: Extra inputs are not permitted"),
    (404, "function calling is not available for this model"),
    (501, "Tool use is unsupported"),
]


@pytest.mark.parametrize(("status", "message"), REFUSALS)
def test_a_refusal_of_offered_tools_is_typed(status: int, message: str) -> None:
    error = error_for_status("vllm", status, message=message, tools_offered=True)
    assert isinstance(error, ToolsUnsupported) and isinstance(error, BackendFailure)
    assert error.dependency == "llm:vllm" and "does not support tools" in error.message
    # the same answer to a request that offered no tools is an ordinary failure
    plain = error_for_status("vllm", status, message=message, tools_offered=False)
    assert not isinstance(plain, ToolsUnsupported)


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (401, "tools are not allowed without a key", BackendFailure),
        (403, "this key may not use function calling", BackendFailure),
        (429, "rate limit for tool calls exceeded", Overloaded),
        (400, "your prompt was flagged by the content filter", BackendFailure),
        (400, "max_tokens is too large", BackendFailure),
        (500, "function calling crashed; tools unsupported", Unavailable),
        (400, None, BackendFailure),
    ],
)
def test_other_errors_are_not(status: int, message: str | None, kind: type) -> None:
    error = error_for_status("vllm", status, message=message, tools_offered=True)
    assert type(error) is kind
