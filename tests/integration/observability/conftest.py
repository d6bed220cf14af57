"""Spans of this test process, kept in memory while a test asks for them.

OpenTelemetry allows one global tracer provider per process: the first use of these
fixtures installs an SDK provider (or reuses one something else installed) with a
processor that hands finished spans to an in-memory exporter only while a test holds
the ``spans`` fixture, so later tests pay no export cost. The services'
instrumentation finds the provider through the global API, as in production, where
setup_telemetry() installs it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class _Recorder(SpanProcessor):
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.recording = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.recording:
            self.exporter.export((span,))


@pytest.fixture(scope="session")
def recorder() -> _Recorder:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
    installed = trace.get_tracer_provider()
    assert isinstance(installed, TracerProvider), "another provider was installed first"
    processor = _Recorder()
    installed.add_span_processor(processor)
    return processor


@pytest.fixture
def spans(recorder: _Recorder) -> Iterator[InMemorySpanExporter]:
    """The exporter, empty; spans that end during the test appear in
    ``get_finished_spans()``."""
    recorder.exporter.clear()
    recorder.recording = True
    try:
        yield recorder.exporter
    finally:
        recorder.recording = False
        recorder.exporter.clear()
