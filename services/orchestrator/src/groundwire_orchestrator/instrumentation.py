"""Stage spans and stage metrics of the chain.

Every stage run gets one span, ``stage.<name>``, a child of the RPC's span, so the
calls the stage makes (embedder, retriever, reranker, LLM) nest under it. Its
attributes are the stage report's:

    groundwire.stage.name, .ms, .fallback, .reason, .dependency,
    .candidates_in, .candidates_out (the stages that take and give candidates),
    .tokens (the answer: the excerpts' approximate token count),
    groundwire.stage.detail.<key> (each of the report's details)

and its report feeds ``groundwire_stage_duration_seconds{stage}`` and, when the stage
fell back, ``groundwire_stage_fallbacks_total{stage,dependency}``. A fallback is not
a span error (the stage did its job the fallback way); an exception is.

The span is current only while the stage's own code runs (:meth:`StageSpan.current`,
:meth:`StageSpan.run`, :meth:`StageSpan.steps`), never across the ``yield`` of a
streamed answer, where the caller's code runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TypeVar

from opentelemetry import trace

from groundwire_core.metrics import STAGE_FALLBACKS, STAGE_LATENCY
from groundwire_orchestrator.domain import StageReport

T = TypeVar("T")
E = TypeVar("E")

tracer = trace.get_tracer("groundwire.orchestrator")

_DETAIL_CHARS = 256


class StageSpan:
    """The span of one stage run; :meth:`record` its report once the stage ended."""

    def __init__(self, span: trace.Span) -> None:
        self.span = span

    def current(self) -> AbstractContextManager[trace.Span]:
        """Makes the span current (exceptions inside are recorded on it)."""
        return trace.use_span(self.span, end_on_exit=False)

    def record(
        self,
        report: StageReport,
        *,
        candidates_out: int | None = None,
        tokens: int | None = None,
    ) -> None:
        """The report as span attributes and stage metrics."""
        span = self.span
        span.set_attribute("groundwire.stage.name", report.name)
        span.set_attribute("groundwire.stage.ms", round(report.ms, 3))
        span.set_attribute("groundwire.stage.fallback", report.fallback)
        if report.fallback:
            span.set_attribute("groundwire.stage.reason", report.reason)
            span.set_attribute("groundwire.stage.dependency", report.dependency)
        if candidates_out is not None:
            span.set_attribute("groundwire.stage.candidates_out", candidates_out)
        if tokens is not None:
            span.set_attribute("groundwire.stage.tokens", tokens)
        for key, value in report.details.items():
            span.set_attribute(f"groundwire.stage.detail.{key}", value[:_DETAIL_CHARS])
        STAGE_LATENCY.labels(report.name).observe(report.ms / 1e3)
        if report.fallback:
            STAGE_FALLBACKS.labels(report.name, report.dependency or "none").inc()

    async def run(self, work: Awaitable[tuple[T, StageReport]]) -> tuple[T, StageReport]:
        """Awaits a stage's ``run()`` with the span current and records its report
        (``candidates_out`` is the result's length when it is a list)."""
        with self.current():
            result, report = await work
        self.record(report, candidates_out=len(result) if isinstance(result, list) else None)
        return result, report

    async def steps(self, events: AsyncIterator[E]) -> AsyncIterator[E]:
        """``events``, with the span current while each one is produced."""
        try:
            while True:
                with self.current():
                    try:
                        event = await anext(events)
                    except StopAsyncIteration:
                        return
                yield event
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()


@contextmanager
def stage_span(
    name: str, *, candidates_in: int | None = None, tokens: int | None = None
) -> Iterator[StageSpan]:
    """Opens ``stage.<name>`` as a child of the current span; ends it on exit."""
    span = tracer.start_span(f"stage.{name}")
    if candidates_in is not None:
        span.set_attribute("groundwire.stage.candidates_in", candidates_in)
    if tokens is not None:
        span.set_attribute("groundwire.stage.tokens", tokens)
    try:
        yield StageSpan(span)
    finally:
        span.end()


async def run_stage(
    name: str, work: Awaitable[tuple[T, StageReport]], *, candidates_in: int | None = None
) -> tuple[T, StageReport]:
    """One stage's ``run()`` inside its span, its report recorded."""
    with stage_span(name, candidates_in=candidates_in) as stage:
        return await stage.run(work)
