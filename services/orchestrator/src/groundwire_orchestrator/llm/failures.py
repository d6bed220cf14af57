"""How an LLM API's failures map onto the Groundwire error hierarchy.

Both providers speak HTTP and report failures the same way: a status code, an error
``type`` in the body (Anthropic: ``overloaded_error``; OpenAI-compatible servers:
``server_error``, ``rate_limit_exceeded``...) and, when overloaded, a retry-after
header. This module is the one table from those to GroundwireErrors; each provider
only extracts the three facts from its SDK's exception.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping

from groundwire_core.errors import (
    BackendFailure,
    DeadlineExceeded,
    GroundwireError,
    Overloaded,
    Unavailable,
)

DEFAULT_RETRY_AFTER_S = 1.0

_OVERLOADED_TYPES = frozenset(
    {"overloaded_error", "rate_limit_error", "rate_limit_exceeded", "insufficient_capacity"}
)
_TIMEOUT_TYPES = frozenset({"timeout_error", "timeout"})
_UNAVAILABLE_TYPES = frozenset({"api_error", "server_error", "service_unavailable"})


def dependency(provider: str) -> str:
    """The ``dependency`` every error of ``provider`` names, e.g. ``llm:anthropic``."""
    return f"llm:{provider}"


def retry_after_s(headers: Mapping[str, str] | None) -> float:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP
    date); :data:`DEFAULT_RETRY_AFTER_S` when absent or unreadable."""
    if not headers:
        return DEFAULT_RETRY_AFTER_S
    lowered = {k.lower(): v for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return DEFAULT_RETRY_AFTER_S
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return DEFAULT_RETRY_AFTER_S
    return max(0.0, when.timestamp() - time.time())


def error_for_status(
    provider: str,
    status: int,
    *,
    error_type: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> GroundwireError:
    """The error for an HTTP answer ``status`` (or, for an error reported inside a
    200 stream, ``status`` 200 and the body's ``error_type``).

    429/529/overloaded → Overloaded (with retry-after); 408/timeout → DeadlineExceeded;
    5xx/api_error → Unavailable; any other 4xx or unknown type → BackendFailure.
    """
    dep = dependency(provider)
    what = f"HTTP {status}" + (f", {error_type}" if error_type else "")
    if status in (429, 529) or error_type in _OVERLOADED_TYPES:
        return Overloaded(
            f"{provider} is overloaded ({what})",
            retry_after_s=retry_after_s(headers),
            dependency=dep,
        )
    if status == 408 or error_type in _TIMEOUT_TYPES:
        return DeadlineExceeded(f"{provider} timed out ({what})", dependency=dep)
    if status >= 500 or error_type in _UNAVAILABLE_TYPES:
        return Unavailable(f"{provider} failed ({what})", dependency=dep)
    return BackendFailure(f"{provider} rejected the request ({what})", dependency=dep)


def unreachable(provider: str) -> Unavailable:
    return Unavailable(f"{provider} cannot be reached", dependency=dependency(provider))


def timed_out(provider: str, timeout_s: float | None = None) -> DeadlineExceeded:
    within = f" within {timeout_s:.1f}s" if timeout_s is not None else ""
    return DeadlineExceeded(f"{provider} did not answer{within}", dependency=dependency(provider))


def malformed(provider: str, what: str) -> BackendFailure:
    return BackendFailure(
        f"{provider} sent a malformed reply: {what}", dependency=dependency(provider)
    )
