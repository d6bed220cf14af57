"""How an LLM API's failures map onto the Groundwire error hierarchy.

Both providers speak HTTP and report failures the same way: a status code, an error
``type`` in the body (Anthropic: ``overloaded_error``; OpenAI-compatible servers:
``server_error``, ``rate_limit_exceeded``...) and, when overloaded, a retry-after
header. This module is the one table from those to GroundwireErrors; each provider
only extracts the three facts from its SDK's exception.
"""

from __future__ import annotations

import email.utils
import re
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

_TOOLS_STATUSES = frozenset({400, 404, 422, 501})
_TOOLS_WORD = re.compile(r"\b(tools?|tool[_ ]choice|functions?|function[_ ]call(?:ing|s)?)\b", re.I)
_TOOLS_REFUSAL = re.compile(
    r"not support|unsupported|doesn't support|does not support|not enabled|requires?|"
    r"not permitted|not allowed|unrecognized|unknown|extra (?:inputs|fields)|not available",
    re.I,
)


class ToolsUnsupported(BackendFailure):
    """The provider refused a request because it offered tools: the model or server
    has no function calling (vLLM without a tool parser, an Ollama model without
    tools, a gateway that drops the field). The same request without tools can
    succeed; the agentic loop retries once without them."""


def rejects_tools(status: int, message: str | None) -> bool:
    """Whether an HTTP error answering a request that offered tools says it was the
    tools: a 400/404/422/501 whose message names tools (or functions, tool_choice)
    beside a refusal ("does not support", "requires", "unrecognized"...). Auth (401,
    403), quota (429) and other errors never are."""
    if status not in _TOOLS_STATUSES or not message:
        return False
    return bool(_TOOLS_WORD.search(message) and _TOOLS_REFUSAL.search(message))


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
    message: str | None = None,
    tools_offered: bool = False,
) -> GroundwireError:
    """The error for an HTTP answer ``status`` (or, for an error reported inside a
    200 stream, ``status`` 200 and the body's ``error_type``).

    A request that offered tools and was refused for them (:func:`rejects_tools`,
    read from the API's ``message``) → ToolsUnsupported; 429/529/overloaded →
    Overloaded (with retry-after); 408/timeout → DeadlineExceeded; 5xx/api_error →
    Unavailable; any other 4xx or unknown type → BackendFailure.
    """
    dep = dependency(provider)
    what = f"HTTP {status}" + (f", {error_type}" if error_type else "")
    if tools_offered and rejects_tools(status, message):
        return ToolsUnsupported(f"{provider} does not support tools ({what})", dependency=dep)
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
