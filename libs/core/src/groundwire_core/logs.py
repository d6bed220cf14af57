"""Logging setup: every line carries the service, the request id and the trace id."""

from __future__ import annotations

import json
import logging
import sys

from opentelemetry import trace

from groundwire_core.context import current_request_id
from groundwire_core.settings import ServiceSettings


class _ContextFilter(logging.Filter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self._service = service

    def filter(self, record: logging.LogRecord) -> bool:
        record.service = self._service
        record.request_id = current_request_id()
        ctx = trace.get_current_span().get_span_context()
        record.trace_id = format(ctx.trace_id, "032x") if ctx.is_valid else "-"
        return True


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": self.formatTime(record),
            "level": record.levelname,
            "service": getattr(record, "service", "-"),
            "logger": record.name,
            "request_id": getattr(record, "request_id", "-"),
            "trace_id": getattr(record, "trace_id", "-"),
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


TEXT_FORMAT = (
    "%(asctime)s %(levelname)s %(service)s %(name)s "
    "rid=%(request_id)s trace=%(trace_id)s %(message)s"
)


def configure_logging(settings: ServiceSettings, service: str) -> None:
    """Routes the root logger to stderr with request/trace ids on every line."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_ContextFilter(service))
    handler.setFormatter(_JsonFormatter() if settings.log_json else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level)
