"""The per-request LLM token meter: every call through ObservedLLM inside a meter
adds its tokens (estimated, 4 characters per token), in tasks the request starts
too; calls outside a meter count nowhere."""

from __future__ import annotations

import asyncio

from groundwire_orchestrator import usage
from groundwire_orchestrator.llm.base import ChatMessage, LLMRequest
from groundwire_orchestrator.llm.observed import ObservedLLM
from tests.unit.orchestrator.doubles import ScriptedLLM


async def test_calls_inside_a_meter_add_their_tokens() -> None:
    inner = ScriptedLLM(default_fast="x" * 40, default_strong="y" * 8)
    llm = ObservedLLM(inner, ("fake",))
    request = LLMRequest("s" * 20, (ChatMessage("user", "q" * 20),), role="fast")
    await llm.complete(request, timeout_s=1)  # outside: not counted anywhere
    with usage.metered() as spent:
        await llm.complete(request, timeout_s=1)  # 40 chars in, 40 out
        strong = LLMRequest("s" * 4, (ChatMessage("user", "q" * 4),), role="strong")
        # a task started by the request shares its meter
        await asyncio.gather(asyncio.create_task(_stream(llm, strong)))
    assert (spent.input_tokens, spent.output_tokens) == (10 + 2, 10 + 2)
    assert spent.estimated
    with usage.metered() as fresh:
        pass
    assert (fresh.input_tokens, fresh.output_tokens, fresh.estimated) == (0, 0, False)


async def _stream(llm: ObservedLLM, request: LLMRequest) -> None:
    async for _ in llm.stream(request, timeout_s=1):
        pass


class ReportingLLM(ScriptedLLM):
    """A provider that reports the API's usage, as the real ones do for whole replies."""

    async def complete(self, request: LLMRequest, *, timeout_s: float) -> str:
        text = await super().complete(request, timeout_s=timeout_s)
        usage.record(123, 7, estimated=False)
        return text


async def test_the_apis_reported_usage_wins_over_the_estimate() -> None:
    llm = ObservedLLM(ReportingLLM(default_fast="x" * 400), ("fake",))
    request = LLMRequest("s", (ChatMessage("user", "q"),), role="fast")
    with usage.metered() as spent:
        await llm.complete(request, timeout_s=1)
        await llm.complete(request, timeout_s=1)
    assert (spent.input_tokens, spent.output_tokens, spent.estimated) == (246, 14, False)
