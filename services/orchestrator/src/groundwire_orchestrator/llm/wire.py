"""What the HTTP providers share besides the failure table: timeouts and tool-call
argument parsing."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2

from groundwire_orchestrator.llm import failures

CONNECT_TIMEOUT_S = 5.0
DEFAULT_CLIENT_TIMEOUT = httpx2.Timeout(60.0, connect=CONNECT_TIMEOUT_S)
"""The SDK clients' default; every call passes its own (see :func:`http_timeout`)."""


def http_timeout(timeout_s: float) -> httpx2.Timeout:
    """The transport timeouts of one call whose whole budget is ``timeout_s``."""
    return httpx2.Timeout(timeout_s, connect=min(timeout_s, CONNECT_TIMEOUT_S))


def tool_arguments(provider: str, raw: str) -> dict[str, Any]:
    """A tool call's complete JSON arguments ({} when empty); BackendFailure when they
    are not a JSON object."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        raise failures.malformed(provider, "tool arguments are not JSON") from None
    if not isinstance(value, dict):
        raise failures.malformed(provider, "tool arguments are not a JSON object")
    return value


def warm_transport() -> None:
    """Loads what the transport loads on its first real connection (the async
    backend of anyio, under httpx2's connection pool): an in-memory rehearsal does
    not reach it. Call inside a running event loop."""
    anyio.Event()
