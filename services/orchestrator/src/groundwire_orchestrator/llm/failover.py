"""A chain of LLM providers tried in order: the next one answers when one fails
before it has said anything.

Failing over is only safe before the first event: once text (or a tool call) has
reached the caller, an error propagates, so one answer never mixes two models.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass

from groundwire_core.errors import (
    DeadlineExceeded,
    GroundwireError,
    Overloaded,
    Unavailable,
)
from groundwire_orchestrator.llm import failures
from groundwire_orchestrator.llm.base import (
    LLMProvider,
    LLMRequest,
    StreamEvent,
    close_stream,
    warm_up,
)

log = logging.getLogger(__name__)

DEFAULT_FAILOVER_ON: tuple[type[GroundwireError], ...] = (
    Unavailable,
    Overloaded,
    DeadlineExceeded,
)
"""Errors that say "this provider, now" rather than "this request": another provider
may well answer. A BackendFailure (a 4xx, a malformed reply) propagates."""


@dataclass(frozen=True)
class Completion:
    """A whole reply and the provider that wrote it."""

    text: str
    served_by: str


class ServedStream:
    """The events of one failover call, and which provider is producing them.

    ``served_by`` is None until a provider has produced its first event (or ended
    its reply); it never changes after that. ``aclose()`` stops the call and closes
    the provider's HTTP stream.
    """

    def __init__(self) -> None:
        self.served_by: str | None = None
        self._events: AsyncGenerator[StreamEvent, None] | None = None

    def __aiter__(self) -> ServedStream:
        return self

    async def __anext__(self) -> StreamEvent:
        assert self._events is not None
        return await self._events.__anext__()

    async def aclose(self) -> None:
        if self._events is not None:
            await self._events.aclose()


class FailoverLLM:
    """Tries ``providers`` in order; an :class:`LLMProvider` itself.

    A provider is abandoned for the next when, before its first event, it raises one
    of ``failover_on`` (default: Unavailable, Overloaded, DeadlineExceeded) or does
    not start answering within ``attempt_timeout_s`` (None: it may use the call's
    whole remaining budget). Every attempt shares the call's ``timeout_s``. When all
    fail, the last provider's error is raised.

    ``name`` is the provider that served the most recent call (the chain's names
    joined by ``>`` before any did); with concurrent calls read ``served_by`` from
    the stream :meth:`stream` returns, or use :meth:`complete_served`.
    """

    def __init__(
        self,
        providers: Sequence[LLMProvider],
        *,
        attempt_timeout_s: float | None = None,
        failover_on: tuple[type[GroundwireError], ...] = DEFAULT_FAILOVER_ON,
    ) -> None:
        if not providers:
            raise ValueError("a failover chain needs at least one provider")
        if attempt_timeout_s is not None and attempt_timeout_s <= 0:
            raise ValueError("attempt_timeout_s must be positive")
        self._providers = tuple(providers)
        self._attempt_timeout_s = attempt_timeout_s
        self._failover_on = failover_on
        self.last_served_by: str | None = None

    @property
    def name(self) -> str:
        return self.last_served_by or ">".join(p.name for p in self._providers)

    @property
    def providers(self) -> tuple[LLMProvider, ...]:
        return self._providers

    def stream(self, request: LLMRequest, *, timeout_s: float) -> ServedStream:
        """Streams the first provider's events that starts answering in time.

        Errors: the last provider's error when none could answer; any error once
        events have been streamed.
        """
        served = ServedStream()
        served._events = self._events(request, timeout_s, served)
        return served

    async def _events(
        self, request: LLMRequest, timeout_s: float, served: ServedStream
    ) -> AsyncGenerator[StreamEvent, None]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        last_error: GroundwireError | None = None
        for provider in self._providers:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            events = provider.stream(request, timeout_s=remaining)
            try:
                try:
                    first = await self._first_event(provider, events, remaining)
                except GroundwireError as exc:
                    if not isinstance(exc, self._failover_on):
                        raise
                    self._note_failure(provider, exc)
                    last_error = exc
                    continue
                served.served_by = self.last_served_by = provider.name
                if first is None:
                    return
                yield first
                # From here on the caller has output from this provider: no failover.
                async for event in events:
                    yield event
                return
            finally:
                await close_stream(events)
        raise last_error or _out_of_time(timeout_s)

    async def _first_event(
        self, provider: LLMProvider, events: AsyncIterator[StreamEvent], remaining: float
    ) -> StreamEvent | None:
        """The provider's first event, None when its reply is empty."""
        wait_s = self._attempt_budget(remaining)
        try:
            async with asyncio.timeout(wait_s):
                return await events.__anext__()
        except StopAsyncIteration:
            return None
        except TimeoutError:
            raise failures.timed_out(provider.name, wait_s) from None

    async def complete(self, request: LLMRequest, *, timeout_s: float) -> str:
        """The first answer any provider gives in time (see :meth:`complete_served`)."""
        return (await self.complete_served(request, timeout_s=timeout_s)).text

    async def complete_served(self, request: LLMRequest, *, timeout_s: float) -> Completion:
        """A whole reply and who wrote it; each attempt is bounded by
        ``attempt_timeout_s`` and all by ``timeout_s``.

        Errors: the last provider's error when none answered.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        last_error: GroundwireError | None = None
        for provider in self._providers:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            wait_s = self._attempt_budget(remaining)
            try:
                async with asyncio.timeout(wait_s):
                    text = await provider.complete(request, timeout_s=wait_s)
            except TimeoutError:
                exc: GroundwireError = failures.timed_out(provider.name, wait_s)
            except GroundwireError as error:
                if not isinstance(error, self._failover_on):
                    raise
                exc = error
            else:
                self.last_served_by = provider.name
                return Completion(text, provider.name)
            self._note_failure(provider, exc)
            last_error = exc
        raise last_error or _out_of_time(timeout_s)

    def _attempt_budget(self, remaining: float) -> float:
        if self._attempt_timeout_s is None:
            return remaining
        return min(remaining, self._attempt_timeout_s)

    def _note_failure(self, provider: LLMProvider, exc: GroundwireError) -> None:
        later = self._providers[self._providers.index(provider) + 1 :]
        nxt = f"; trying {later[0].name}" if later else "; no provider left"
        log.warning("LLM %s failed before answering (%s: %s)%s", provider.name, exc.code, exc, nxt)

    async def warm_up(self) -> None:
        """Warms every provider that can be (see :func:`warm_up`)."""
        await asyncio.gather(*(warm_up(p) for p in self._providers))

    async def aclose(self) -> None:
        """Closes every provider of the chain."""
        results = await asyncio.gather(
            *(p.aclose() for p in self._providers), return_exceptions=True
        )
        for provider, result in zip(self._providers, results, strict=True):
            if isinstance(result, Exception):
                log.warning("closing LLM %s failed: %r", provider.name, result)


def _out_of_time(timeout_s: float) -> DeadlineExceeded:
    return DeadlineExceeded(f"no LLM answered within {timeout_s:.1f}s", dependency="llm")
