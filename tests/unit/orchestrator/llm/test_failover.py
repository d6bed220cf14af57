"""The failover chain over in-memory providers: who answers, when it moves on, and
that it never mixes two providers in one answer."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from groundwire_core.errors import (
    BackendFailure,
    DeadlineExceeded,
    Overloaded,
    Unavailable,
)
from groundwire_orchestrator.llm.base import (
    ChatMessage,
    LLMProvider,
    LLMRequest,
    StreamEvent,
    TextDelta,
    ToolCall,
    close_stream,
    served_by,
    warm_up,
)
from groundwire_orchestrator.llm.failover import FailoverLLM
from tests.fakes.llm_provider import ScriptedLLM, ScriptedReply

REQUEST = LLMRequest(system="s", messages=(ChatMessage("user", "q"),))


def _text(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def _drain(llm: LLMProvider, timeout_s: float = 2.0) -> list[StreamEvent]:
    return [event async for event in llm.stream(REQUEST, timeout_s=timeout_s)]


def test_is_an_llm_provider() -> None:
    chain: LLMProvider = FailoverLLM([ScriptedLLM("a")])
    assert chain.name == "a"
    assert FailoverLLM([ScriptedLLM("a"), ScriptedLLM("b")]).name == "a>b"
    with pytest.raises(ValueError):
        FailoverLLM([])


async def test_first_provider_serves_when_healthy() -> None:
    first, second = ScriptedLLM("a", ["from a"]), ScriptedLLM("b", ["from b"])
    chain = FailoverLLM([first, second])
    stream = chain.stream(REQUEST, timeout_s=2)
    events = [e async for e in stream]
    assert _text(events) == "from a"
    assert stream.served_by == "a" == chain.last_served_by == chain.name
    assert second.requests == []


@pytest.mark.parametrize(
    "error",
    [
        Overloaded("busy", retry_after_s=3, dependency="llm:a"),
        Unavailable("down", dependency="llm:a"),
        DeadlineExceeded("slow", dependency="llm:a"),
    ],
)
async def test_moves_on_when_a_provider_fails_before_answering(error: Exception) -> None:
    first, second = ScriptedLLM("a", [error]), ScriptedLLM("b", ["from b"])
    chain = FailoverLLM([first, second])
    stream = chain.stream(REQUEST, timeout_s=2)
    assert _text([e async for e in stream]) == "from b"
    assert served_by(stream, chain) == "b"
    assert second.requests == [REQUEST]


async def test_a_rejected_request_is_not_retried_elsewhere() -> None:
    first, second = ScriptedLLM("a", [BackendFailure("400", dependency="llm:a")]), ScriptedLLM("b")
    with pytest.raises(BackendFailure):
        await _drain(FailoverLLM([first, second]))
    assert second.requests == []


async def test_no_failover_once_text_has_streamed() -> None:
    broken = ScriptedReply(
        text="half an answer", error=Overloaded("gone", dependency="llm:a"), error_after=1
    )
    first, second = ScriptedLLM("a", [broken]), ScriptedLLM("b", ["from b"])
    got: list[StreamEvent] = []
    with pytest.raises(Overloaded) as caught:
        async for event in FailoverLLM([first, second]).stream(REQUEST, timeout_s=2):
            got.append(event)
    assert got == [TextDelta("half ")]
    assert caught.value.dependency == "llm:a"
    assert second.requests == []  # never mixed into a's answer


async def test_no_failover_after_a_tool_call() -> None:
    call = ToolCall("c1", "search", {"query": "x"})
    broken = ScriptedReply(tool_calls=(call,), error=Unavailable("x"), error_after=1)
    first, second = ScriptedLLM("a", [broken]), ScriptedLLM("b", ["from b"])
    with pytest.raises(Unavailable):
        await _drain(FailoverLLM([first, second]))
    assert second.requests == []


async def test_a_provider_that_does_not_start_in_time_is_abandoned() -> None:
    first = ScriptedLLM("a", [ScriptedReply(hang=True)])
    second = ScriptedLLM("b", ["from b"])
    chain = FailoverLLM([first, second], attempt_timeout_s=0.1)
    start = time.monotonic()
    assert _text(await _drain(chain, timeout_s=5)) == "from b"
    assert time.monotonic() - start < 1.0
    assert first.open_streams == 0  # the hanging stream was closed, not leaked


async def test_the_attempt_timeout_does_not_cut_a_started_answer() -> None:
    slow = ScriptedReply(text="one two three four", event_delay_s=0.06)
    chain = FailoverLLM([ScriptedLLM("a", [slow])], attempt_timeout_s=0.1)
    assert _text(await _drain(chain)) == "one two three four"


async def test_attempts_share_the_call_budget() -> None:
    first = ScriptedLLM("a", [ScriptedReply(hang=True)])
    second = ScriptedLLM("b", [ScriptedReply(hang=True)])
    chain = FailoverLLM([first, second], attempt_timeout_s=10)
    start = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        await _drain(chain, timeout_s=0.2)
    assert time.monotonic() - start < 1.0
    assert second.requests == []  # a used the whole budget: nothing left for b


async def test_when_all_fail_the_last_error_is_raised() -> None:
    chain = FailoverLLM(
        [
            ScriptedLLM("a", [Unavailable("a down", dependency="llm:a")]),
            ScriptedLLM("b", [Overloaded("b busy", retry_after_s=4, dependency="llm:b")]),
        ]
    )
    with pytest.raises(Overloaded) as caught:
        await _drain(chain)
    assert caught.value.dependency == "llm:b"
    assert caught.value.retry_after_s == 4


async def test_an_empty_reply_is_an_answer() -> None:
    first, second = ScriptedLLM("a", [""]), ScriptedLLM("b", ["from b"])
    chain = FailoverLLM([first, second])
    stream = chain.stream(REQUEST, timeout_s=2)
    assert [e async for e in stream] == []
    assert stream.served_by == "a"
    assert second.requests == []


async def test_later_providers_get_the_remaining_budget() -> None:
    first = ScriptedLLM("a", [ScriptedReply(delay_s=0.1, error=Unavailable("x"))])
    second = ScriptedLLM("b", ["ok"])
    await _drain(FailoverLLM([first, second]), timeout_s=1.0)
    assert first.timeouts[0] == pytest.approx(1.0, abs=0.05)
    assert 0.8 <= second.timeouts[0] <= 0.92


async def test_cancelling_the_consumer_closes_the_provider_stream() -> None:
    provider = ScriptedLLM("a", [ScriptedReply(text="a b c d e f", event_delay_s=10)])
    chain = FailoverLLM([provider])
    first_event = asyncio.Event()

    async def consume() -> None:
        async for _ in chain.stream(REQUEST, timeout_s=30):
            first_event.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_event.wait(), 1)
    assert provider.open_streams == 1
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert provider.open_streams == 0


async def test_close_stream_stops_early() -> None:
    provider = ScriptedLLM("a", ["a b c d"])
    stream = FailoverLLM([provider]).stream(REQUEST, timeout_s=2)
    assert await stream.__anext__() == TextDelta("a ")
    await close_stream(stream)
    assert provider.open_streams == 0
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()


async def test_complete_fails_over_and_says_who_answered() -> None:
    first = ScriptedLLM("a", [Overloaded("busy", dependency="llm:a")])
    second = ScriptedLLM("b", ['{"rewritten_query": "x"}'])
    chain = FailoverLLM([first, second])
    completion = await chain.complete_served(REQUEST, timeout_s=2)
    assert completion.text == '{"rewritten_query": "x"}'
    assert completion.served_by == "b" == chain.last_served_by
    first.push("a is back")
    assert await chain.complete(REQUEST, timeout_s=2) == "a is back"
    assert chain.last_served_by == "a"


async def test_complete_abandons_a_hanging_provider() -> None:
    first = ScriptedLLM("a", [ScriptedReply(hang=True)])
    second = ScriptedLLM("b", ["from b"])
    chain = FailoverLLM([first, second], attempt_timeout_s=0.1)
    start = time.monotonic()
    assert await chain.complete(REQUEST, timeout_s=5) == "from b"
    assert time.monotonic() - start < 1.0


async def test_complete_does_not_fail_over_on_a_rejected_request() -> None:
    second = ScriptedLLM("b", ["x"])
    chain = FailoverLLM([ScriptedLLM("a", [BackendFailure("bad")]), second])
    with pytest.raises(BackendFailure):
        await chain.complete(REQUEST, timeout_s=2)
    assert second.requests == []


async def test_warm_up_reaches_every_provider() -> None:
    providers = [ScriptedLLM("a"), ScriptedLLM("b")]
    await warm_up(FailoverLLM(providers))
    assert all(p.warmed for p in providers)


async def test_aclose_closes_every_provider() -> None:
    providers = [ScriptedLLM("a"), ScriptedLLM("b")]
    await FailoverLLM(providers).aclose()
    assert all(p.closed for p in providers)
