"""OpenTelemetry setup from settings.

A tracer provider is always installed, so trace ids exist and propagate across hops
(and appear in logs) even when nothing is exported; the exporter is chosen by
``otel_exporter``: none (default), otlp or console.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)

from groundwire_core.settings import ServiceSettings


def _exporter(settings: ServiceSettings) -> SpanExporter | None:
    if settings.otel_exporter == "otlp":
        # imported here: the OTLP exporter pulls grpc channels we only want when asked
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=settings.otel_endpoint, insecure=True)
    if settings.otel_exporter == "console":
        return ConsoleSpanExporter()
    return None


def setup_telemetry(
    settings: ServiceSettings, service: str, *extra: SpanProcessor
) -> TracerProvider:
    """Installs the global tracer provider for ``service`` and returns it."""
    provider = TracerProvider(resource=Resource.create({"service.name": f"groundwire-{service}"}))
    exporter = _exporter(settings)
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    for processor in extra:
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider


def tracer_provider() -> trace.TracerProvider:
    """The global tracer provider (a no-op one until setup_telemetry ran)."""
    return trace.get_tracer_provider()
