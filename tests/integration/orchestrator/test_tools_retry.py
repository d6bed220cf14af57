"""The agent's kill switch and its retry without tools, through the real SDKs against
the fake APIs (both providers): ``max_agent_steps = 0`` sends the LLM the very request
of the pre-agent chain (no toolbox at all), byte for byte, and streams the same
events; a provider that rejects tools gets that same request once more after the
first tool-calling one fails, and the stage report says so; auth and quota errors are
not retried."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal

import pytest

from groundwire_orchestrator.agent import AgentToolbox
from groundwire_orchestrator.domain import AnswerDelta, Candidate
from groundwire_orchestrator.llm.base import LLMProvider, warm_up
from groundwire_orchestrator.llm.failures import ToolsUnsupported
from groundwire_orchestrator.stages.answer import (
    AnswerEvent,
    AnswerFailed,
    AnswerFinished,
    AnswerInput,
    GroundedAnswerStage,
)
from groundwire_orchestrator.stages.retrieval import SourceReader
from groundwire_orchestrator.text.ledger import SourceLedger
from tests.fakes.llm_server import FakeLLMServer, Reply
from tests.integration.llm.conftest import make_provider
from tests.unit.orchestrator.doubles import FakeEmbedder, FakeRetriever, chunk

Kind = Literal["anthropic", "openai"]
QUESTION = "How many requests per minute may one API key send?"
ANSWER = "Each API key may send sixty requests per minute [1]."
SEEDED = (
    chunk(1, "Each API key may send sixty requests per minute.", title="Limits"),
    chunk(2, "Quotas reset at midnight UTC.", title="Quotas"),
)


@pytest.fixture(params=["anthropic", "openai"])
async def llm(
    request: pytest.FixtureRequest, fake: FakeLLMServer
) -> AsyncIterator[LLMProvider]:
    kind: Kind = request.param
    provider = make_provider(kind, fake)
    await warm_up(provider)
    yield provider
    await provider.aclose()


@pytest.fixture
async def fake() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer(default=Reply(text=ANSWER)) as server:
        yield server


def _stage(llm: LLMProvider) -> GroundedAnswerStage:
    return GroundedAnswerStage(
        llm, timeout_s=10, max_tokens=300, context_tokens=2000, history_tokens=500
    )


def _input(steps: int, *, toolbox: bool) -> AnswerInput:
    ledger = SourceLedger()
    ledger.add(SEEDED)

    async def never(query: str) -> list[Candidate]:
        raise AssertionError("no tool may run")

    box = AgentToolbox(
        searcher=never,
        reader=SourceReader(FakeEmbedder(), FakeRetriever(), max_chunks=5),
        ledger=ledger,
        collection="docs",
        search_results=3,
        result_tokens=500,
    )
    return AnswerInput(QUESTION, (), ledger, steps, box if toolbox else None)


async def _run(llm: LLMProvider, inp: AnswerInput) -> list[AnswerEvent]:
    return [e async for e in _stage(llm).run(inp)]


def _finished(events: list[AnswerEvent]) -> tuple[str, dict[str, str]]:
    """The final answer and its stage details (the timing left out)."""
    finished = events[-1]
    assert isinstance(finished, AnswerFinished), finished
    assert all(isinstance(e, AnswerDelta) for e in events[:-1])
    return finished.text, dict(finished.report.details)


async def test_zero_steps_sends_the_pre_agent_request_byte_for_byte(
    llm: LLMProvider, fake: FakeLLMServer
) -> None:
    pre_agent = await _run(llm, _input(0, toolbox=False))
    kill_switch = await _run(llm, _input(0, toolbox=True))
    agentic = await _run(llm, _input(3, toolbox=True))
    first, second, third = fake.requests
    assert first.raw == second.raw, "max_agent_steps=0 is the pre-agent request"
    assert "tools" not in first.body
    assert "tools" in third.body and third.raw != first.raw, "the comparison can fail"
    assert kill_switch[:-1] == pre_agent[:-1], "the same deltas"
    assert _finished(kill_switch) == _finished(pre_agent)
    assert _finished(kill_switch)[0] == ANSWER
    assert isinstance(agentic[-1], AnswerFinished)


async def test_a_provider_without_tools_is_retried_once_without_them(
    llm: LLMProvider, fake: FakeLLMServer
) -> None:
    pre_agent = await _run(llm, _input(0, toolbox=False))
    fake.requests.clear()
    fake.reject_tools = True
    events = await _run(llm, _input(3, toolbox=True))
    refused, retried = fake.requests
    assert "tools" in refused.body and "tools" not in retried.body
    pre_agent_body = (await _pre_agent_raw(llm, fake))
    assert retried.raw == pre_agent_body, "the retry is the request max_agent_steps=0 sends"
    finished = events[-1]
    assert isinstance(finished, AnswerFinished) and finished.text == ANSWER
    assert events[:-1] == pre_agent[:-1], "the same events as the pre-agent chain"
    assert "retried without tools" in finished.report.details["tools_retry"]
    assert "does not support tools" in finished.report.details["tools_retry"]
    assert finished.report.details["steps"] == "0"


async def _pre_agent_raw(llm: LLMProvider, fake: FakeLLMServer) -> bytes:
    before = len(fake.requests)
    await _run(llm, _input(0, toolbox=False))
    return fake.requests[before].raw


async def test_a_second_refusal_is_not_retried_again(
    llm: LLMProvider, fake: FakeLLMServer
) -> None:
    """Tools refused, then the tool-less retry fails too: one retry, then the stage
    fails (the pipeline falls back to the extractive answer)."""
    fake.reject_tools = True
    fake.push(Reply(status=400, error_message="tools are not supported by this model"))
    events = await _run(llm, _input(3, toolbox=True))
    assert len(fake.requests) == 2
    failed = events[-1]
    assert isinstance(failed, AnswerFailed) and not failed.streamed


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (401, "invalid api key"),
        (403, "tools are not allowed for this key"),
        (429, "rate limit: too many tool calls"),
        (400, "the content of the request violates the usage policy"),
        (500, "function calling backend crashed"),
    ],
)
async def test_auth_quota_and_content_errors_are_not_retried(
    llm: LLMProvider, fake: FakeLLMServer, status: int, message: str
) -> None:
    fake.push(Reply(status=status, error_message=message))
    events = await _run(llm, _input(3, toolbox=True))
    assert len(fake.requests) == 1, "no retry"
    failed = events[-1]
    assert isinstance(failed, AnswerFailed)
    assert not isinstance(failed.error, ToolsUnsupported)
    assert "tools_retry" not in failed.details
