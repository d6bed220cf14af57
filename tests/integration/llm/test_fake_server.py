"""The fake LLM server's own promises, which other tests build on: replies computed
from the request, the default reply, an exhausted script, strict reply fields."""

from __future__ import annotations

import pytest

from groundwire_core.errors import Unavailable
from groundwire_orchestrator.llm.base import ChatMessage, LLMRequest
from tests.fakes.llm_server import FakeLLMServer, RecordedRequest, Reply
from tests.integration.llm.conftest import make_provider


def _request(text: str) -> LLMRequest:
    return LLMRequest(system="s", messages=(ChatMessage("user", text),))


async def test_a_reply_can_be_computed_from_the_request() -> None:
    def echo(request: RecordedRequest) -> Reply:
        return Reply(text=f"you said: {request.body['messages'][-1]['content']}")

    async with FakeLLMServer(default=echo) as fake:
        llm = make_provider("anthropic", fake)
        try:
            assert await llm.complete(_request("first"), timeout_s=5) == "you said: first"
            assert await llm.complete(_request("second"), timeout_s=5) == "you said: second"
        finally:
            await llm.aclose()
    assert fake.completed == 2


async def test_script_first_then_default() -> None:
    async with FakeLLMServer([Reply(text="scripted")], default=Reply(text="default")) as fake:
        llm = make_provider("openai", fake)
        try:
            answers = [await llm.complete(_request("q"), timeout_s=5) for _ in range(3)]
        finally:
            await llm.aclose()
    assert answers == ["scripted", "default", "default"]


async def test_an_exhausted_script_fails_loudly(fake: FakeLLMServer) -> None:
    llm = make_provider("openai", fake)
    try:
        with pytest.raises(Unavailable):
            await llm.complete(_request("q"), timeout_s=5)
    finally:
        await llm.aclose()
    assert len(fake.requests) == 1


def test_reply_fields_are_checked() -> None:
    assert Reply.from_dict({"text": "a b", "ttft_s": 0.1}).chunks() == ["a ", "b"]
    assert Reply.from_dict({"text": ["a", "bc"]}).chunks() == ["a", "bc"]
    assert Reply.from_dict({"json": {"k": 1}}).full_text() == '{"k": 1}'
    with pytest.raises(ValueError, match="txet"):
        Reply.from_dict({"txet": "typo"})
