"""What the HTTP providers share besides the failure table: calls and streams under
one deadline with their errors mapped, timeouts, and tool-call argument parsing."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, Protocol, TypeVar

import anyio
import httpx2

from groundwire_core.errors import GroundwireError
from groundwire_orchestrator.llm import failures
from groundwire_orchestrator.llm.base import ChatMessage, LLMProvider, LLMRequest

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

Failure = Callable[[BaseException], GroundwireError | None]
"""A provider's map from an SDK or transport exception to our error (None: not one)."""


class SdkStream(Protocol[T_co]):
    """What both SDKs' async streams offer."""

    def __anext__(self) -> Awaitable[T_co]: ...

    async def close(self) -> None: ...

CONNECT_TIMEOUT_S = 5.0
DEFAULT_CLIENT_TIMEOUT = httpx2.Timeout(60.0, connect=CONNECT_TIMEOUT_S)
"""The SDK clients' default; every call passes its own (see :func:`http_timeout`)."""


async def call(
    provider: str,
    failure: Failure,
    make: Callable[[], Awaitable[T]],
    *,
    deadline: float,
    timeout_s: float,
) -> T:
    """``await make()`` by ``deadline`` (event-loop time; the budget was ``timeout_s``),
    with SDK and transport exceptions raised as ``failure`` maps them."""
    try:
        async with asyncio.timeout_at(deadline):
            return await make()
    except TimeoutError:
        raise failures.timed_out(provider, timeout_s) from None
    except StopAsyncIteration:
        raise
    except Exception as exc:
        mapped = failure(exc)
        if mapped is None:
            raise
        raise mapped from exc


async def items(
    provider: str, failure: Failure, stream: SdkStream[T], *, deadline: float, timeout_s: float
) -> AsyncGenerator[T, None]:
    """The stream's items, each awaited as :func:`call` does. The stream is closed on
    every way out (completion, error, ``aclose()``, cancellation): dropping an
    unfinished response closes its connection, which tells the server to stop
    generating. Iterate it under ``contextlib.aclosing`` so that happens at once."""
    try:
        while True:
            try:
                item = await call(
                    provider, failure, stream.__anext__, deadline=deadline, timeout_s=timeout_s
                )
            except StopAsyncIteration:
                return
            yield item
    finally:
        with contextlib.suppress(Exception):
            await stream.close()


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


async def rehearse(
    make: Callable[[httpx2.AsyncClient], LLMProvider],
    reply: Callable[[httpx2.Request], httpx2.Response],
) -> None:
    """One streamed and one whole call through ``make(http)``, a provider whose HTTP
    client answers in memory with ``reply``: a provider's warm-up, opening no
    connection. Loads what the SDK and its transport load on first use."""
    warm_transport()
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(reply)) as http:
        rehearsal = make(http)
        request = LLMRequest(system="", messages=(ChatMessage("user", "warm up"),))
        async for _ in rehearsal.stream(request, timeout_s=60):
            pass
        await rehearsal.complete(request, timeout_s=60)
        await rehearsal.aclose()


def warm_transport() -> None:
    """Loads what the transport loads on its first real connection (the async
    backend of anyio, under httpx2's connection pool): an in-memory rehearsal does
    not reach it. Call inside a running event loop."""
    anyio.Event()
