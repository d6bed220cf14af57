"""The orchestrator's LLM: the one mapping from settings to the provider factory's
config, and a wrapper that remembers how the last call went, for the Dependencies RPC
(an LLM API is not probed: a probe would cost a request)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from groundwire_core.errors import GroundwireError
from groundwire_orchestrator.llm import factory
from groundwire_orchestrator.llm.base import (
    LLMProvider,
    LLMRequest,
    StreamEvent,
    close_stream,
    warm_up,
)
from groundwire_orchestrator.settings import OrchestratorSettings


def llm_config(settings: OrchestratorSettings) -> factory.LLMConfig:
    """The settings' LLM fields as the factory's config. An OpenAI-compatible endpoint
    with only a fast model name uses it for both roles."""
    return factory.LLMConfig(
        anthropic_api_key=settings.anthropic_api_key,
        anthropic_base_url=settings.anthropic_base_url,
        anthropic_fast_model=settings.anthropic_fast_model,
        anthropic_strong_model=settings.anthropic_strong_model,
        openai_base_url=settings.openai_base_url,
        openai_api_key=settings.openai_api_key,
        openai_fast_model=settings.openai_fast_model or None,
        openai_strong_model=settings.openai_strong_model or settings.openai_fast_model or None,
        order=settings.llm_order,
        timeout_s=settings.llm_timeout_s,
    )


def build_llm(settings: OrchestratorSettings) -> ObservedLLM | None:
    """The configured providers as a failover chain, observed; None when no provider
    is configured (the chain answers extractively). Opens nothing. Raises ValueError
    for an OpenAI-compatible endpoint without a model name."""
    config = llm_config(settings)
    llm = factory.build_llm(config)
    if llm is None:
        return None
    names = tuple(p.name for p in factory.build_providers(config))
    return ObservedLLM(llm, names)


@dataclass(frozen=True)
class LLMStatus:
    ok: bool
    message: str
    at: float
    """time.monotonic() of the call."""


class _ObservedStream:
    def __init__(self, owner: ObservedLLM, inner: AsyncIterator[StreamEvent]) -> None:
        self._owner = owner
        self._inner = inner

    @property
    def served_by(self) -> str | None:
        name = getattr(self._inner, "served_by", None)
        return name if isinstance(name, str) else None

    def __aiter__(self) -> _ObservedStream:
        return self

    async def __anext__(self) -> StreamEvent:
        try:
            event = await self._inner.__anext__()
        except StopAsyncIteration:
            self._owner.record(None)
            raise
        except GroundwireError as error:
            self._owner.record(error)
            raise
        return event

    async def aclose(self) -> None:
        await close_stream(self._inner)


class ObservedLLM:
    """An LLMProvider that passes calls through and remembers the last outcome."""

    def __init__(self, inner: LLMProvider, names: tuple[str, ...]) -> None:
        self._inner = inner
        self.names = names
        """The providers behind it, in failover order."""
        self.last: LLMStatus | None = None

    @property
    def name(self) -> str:
        return self._inner.name

    def record(self, error: GroundwireError | None) -> None:
        message = "" if error is None else f"{error.dependency or 'llm'}: {error.message}"
        self.last = LLMStatus(error is None, message, time.monotonic())

    def stream(self, request: LLMRequest, *, timeout_s: float) -> AsyncIterator[StreamEvent]:
        return _ObservedStream(self, self._inner.stream(request, timeout_s=timeout_s))

    async def complete(self, request: LLMRequest, *, timeout_s: float) -> str:
        try:
            text = await self._inner.complete(request, timeout_s=timeout_s)
        except GroundwireError as error:
            self.record(error)
            raise
        self.record(None)
        return text

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def warm_up(self) -> None:
        """Pays the providers' one-time SDK costs at startup (no connection opened)."""
        await warm_up(self._inner)
