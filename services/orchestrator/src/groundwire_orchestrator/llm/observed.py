"""The wrapper every LLM call of the orchestrator goes through. It remembers how the last call
went, for the Dependencies RPC (an LLM API is not probed: a probe would cost a
request), and observes each call: one span ``llm.<provider>`` (the provider that
served it; ``llm`` when none did) and the ``groundwire_llm_*`` metrics."""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

from opentelemetry import trace

from groundwire_core.errors import GroundwireError
from groundwire_core.metrics import LLM_CALLS, LLM_LATENCY
from groundwire_orchestrator import usage
from groundwire_orchestrator.llm.base import (
    LLMProvider,
    LLMRequest,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    close_stream,
    warm_up,
)
from groundwire_orchestrator.llm.failover import FailoverLLM

tracer = trace.get_tracer("groundwire.orchestrator.llm")

# Streams do not pass the APIs' token usage up (the anthropic SDK's own span, nested
# under ours, records it), whole replies do (see groundwire_orchestrator.usage): what
# is not reported is estimated like the gateway's input budget, four characters to a
# token.
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class LLMStatus:
    ok: bool
    message: str
    at: float
    """time.monotonic() of the call."""


class _LLMCall:
    """One LLM call's span and metrics: opened on creation, finished once.

    Span attributes: ``gen_ai.operation.name``, ``gen_ai.provider.name``,
    ``gen_ai.request.max_tokens``, ``groundwire.llm.role``, ``.providers`` (the
    failover chain), ``.stream``, ``.outcome``, ``.output_chars``,
    ``.output_tokens_estimate``, ``.tool_calls``, ``.first_event_ms`` (streams).
    """

    def __init__(self, request: LLMRequest, providers: tuple[str, ...], *, stream: bool) -> None:
        self._role = request.role
        self._started = time.perf_counter()
        self._chars = 0
        self._input_chars = len(request.system) + sum(len(t.content) for t in request.messages)
        self.reported = usage.LLMUsage()
        """Tokens the provider reported for this call (whole replies only)."""
        self._tool_calls = 0
        self._first_event_ms: float | None = None
        self._finished = False
        self._span = tracer.start_span(
            "llm",
            kind=trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.max_tokens": request.max_tokens,
                "groundwire.llm.role": request.role,
                "groundwire.llm.providers": ",".join(providers),
                "groundwire.llm.stream": stream,
            },
        )

    def current(self) -> AbstractContextManager[trace.Span]:
        """The span as the current one, so the SDK's own span of the HTTP call (the
        anthropic SDK makes one, with the API's token usage) nests under it."""
        return trace.use_span(
            self._span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        )

    def saw(self, event: StreamEvent | str) -> None:
        if self._first_event_ms is None:
            self._first_event_ms = (time.perf_counter() - self._started) * 1e3
        if isinstance(event, str):
            self._chars += len(event)
        elif isinstance(event, TextDelta | ReasoningDelta):
            # thinking is never shown, but the model wrote (and bills) it
            self._chars += len(event.text)
        elif isinstance(event, ToolCall):
            self._tool_calls += 1

    def finish(self, served_by: str | None, error: BaseException | None = None) -> None:
        """Ends the span and records the metrics; a second call does nothing."""
        if self._finished:
            return
        self._finished = True
        if isinstance(error, GroundwireError):
            outcome = error.code
            provider = served_by or (error.dependency or "llm").removeprefix("llm:")
        elif error is not None:
            outcome = "cancelled" if isinstance(error, asyncio.CancelledError) else "internal"
            provider = served_by or "llm"
        else:
            outcome, provider = "ok", served_by or "llm"
        span = self._span
        span.update_name(f"llm.{provider}")
        span.set_attribute("gen_ai.provider.name", provider)
        span.set_attribute("groundwire.llm.outcome", outcome)
        span.set_attribute("groundwire.llm.output_chars", self._chars)
        span.set_attribute(
            "groundwire.llm.output_tokens_estimate", math.ceil(self._chars / CHARS_PER_TOKEN)
        )
        span.set_attribute("groundwire.llm.tool_calls", self._tool_calls)
        if self._first_event_ms is not None:
            span.set_attribute("groundwire.llm.first_event_ms", round(self._first_event_ms, 1))
        if isinstance(error, GroundwireError):
            span.set_attribute("error.type", error.code)
            span.set_status(trace.StatusCode.ERROR, error.message)
        elif error is not None and outcome != "cancelled":
            span.record_exception(error)
            span.set_status(trace.StatusCode.ERROR, type(error).__name__)
        span.end()
        reported = self.reported
        if reported.input_tokens or reported.output_tokens:
            usage.record(reported.input_tokens, reported.output_tokens, estimated=False)
        else:  # a stream, or an API that sent no usage: estimated like the span's figure
            usage.record(
                math.ceil(self._input_chars / CHARS_PER_TOKEN),
                math.ceil(self._chars / CHARS_PER_TOKEN),
                estimated=True,
            )
        LLM_CALLS.labels(provider, self._role, outcome).inc()
        LLM_LATENCY.labels(provider, self._role).observe(time.perf_counter() - self._started)


class _ObservedStream:
    def __init__(
        self, owner: ObservedLLM, inner: AsyncIterator[StreamEvent], call: _LLMCall
    ) -> None:
        self._owner = owner
        self._inner = inner
        self._call = call

    @property
    def served_by(self) -> str | None:
        name = getattr(self._inner, "served_by", None)
        return name if isinstance(name, str) else None

    def __aiter__(self) -> _ObservedStream:
        return self

    def _served_by(self) -> str | None:
        # a stream of one provider (not a failover chain) is that provider's own
        return self.served_by or (None if hasattr(self._inner, "served_by") else self._owner.name)

    async def __anext__(self) -> StreamEvent:
        try:
            with self._call.current():
                event = await self._inner.__anext__()
        except StopAsyncIteration:
            self._owner.record(None)
            self._call.finish(self._served_by())
            raise
        except GroundwireError as error:
            self._owner.record(error)
            self._call.finish(self._served_by(), error)
            raise
        except BaseException as error:
            self._call.finish(self._served_by(), error)
            raise
        self._call.saw(event)
        return event

    async def aclose(self) -> None:
        try:
            await close_stream(self._inner)
        finally:
            # closed before its end: the caller stopped reading (or was cancelled)
            self._call.finish(self._served_by(), asyncio.CancelledError())


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
        call = _LLMCall(request, self.names, stream=True)
        return _ObservedStream(self, self._inner.stream(request, timeout_s=timeout_s), call)

    async def complete(self, request: LLMRequest, *, timeout_s: float) -> str:
        call = _LLMCall(request, self.names, stream=False)
        try:
            # the provider records the API's usage into the call's own meter
            with call.current(), usage.metered() as call.reported:
                if isinstance(self._inner, FailoverLLM):
                    completion = await self._inner.complete_served(request, timeout_s=timeout_s)
                    text, served_by = completion.text, completion.served_by
                else:
                    text = await self._inner.complete(request, timeout_s=timeout_s)
                    served_by = self._inner.name
        except GroundwireError as error:
            self.record(error)
            call.finish(None, error)
            raise
        except BaseException as error:
            call.finish(None, error)
            raise
        self.record(None)
        call.saw(text)
        call.finish(served_by)
        return text

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def warm_up(self) -> None:
        """Pays the providers' one-time SDK costs at startup (no connection opened).

        Not traced: the rehearsal calls run under a parent that is not sampled, so the
        SDK's spans of them are dropped instead of exported as stray traces.
        """
        with trace.use_span(_unsampled_parent(), end_on_exit=False):
            await warm_up(self._inner)


def _unsampled_parent() -> trace.Span:
    """A valid span context whose sampled flag is off: the default (parent-based)
    sampler drops every span started under it."""
    context = trace.SpanContext(
        trace_id=random.getrandbits(128) or 1,
        span_id=random.getrandbits(64) or 1,
        is_remote=False,
        trace_flags=trace.TraceFlags(trace.TraceFlags.DEFAULT),
    )
    return trace.NonRecordingSpan(context)
