"""Tokens spent on LLM calls during one request, metered per request.

A request (e.g. one Search call) opens a meter with :func:`metered`; every LLM call
made under it (in the same task or in tasks it starts: they share the meter object)
adds its tokens through :func:`record`. Calls made outside a meter are not counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class LLMUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False
    """True when any call's counts were estimated rather than reported by the API."""


_meter: ContextVar[LLMUsage | None] = ContextVar("groundwire_llm_usage", default=None)


@contextmanager
def metered() -> Iterator[LLMUsage]:
    """A fresh meter for the LLM calls made inside the block."""
    usage = LLMUsage()
    token = _meter.set(usage)
    try:
        yield usage
    finally:
        _meter.reset(token)


def record(input_tokens: int, output_tokens: int, *, estimated: bool) -> None:
    """Adds one call's tokens to the current meter (nothing when there is none)."""
    usage = _meter.get()
    if usage is None:
        return
    usage.input_tokens += input_tokens
    usage.output_tokens += output_tokens
    usage.estimated = usage.estimated or estimated
