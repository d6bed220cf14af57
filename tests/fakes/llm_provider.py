"""An in-memory LLMProvider with scripted replies, for unit tests of code that uses
an LLM (the failover chain, the chain's stages): no network, no SDK.

    llm = ScriptedLLM("anthropic", [ScriptedReply(text="Hello [1]")])
    llm = ScriptedLLM("anthropic", [Overloaded("busy", dependency="llm:anthropic")])

Each call takes the next reply. A reply may stream text and tool calls, raise an
error before or after some events, wait before its first event, or hang. Every
request is recorded; ``open_streams`` says how many streams are still open (a
closed or cancelled stream is not), so tests can assert cancellation reached the
provider.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field

from groundwire_core.errors import GroundwireError
from groundwire_orchestrator.llm.base import LLMRequest, StreamEvent, TextDelta, ToolCall


@dataclass(frozen=True)
class ScriptedReply:
    """``text`` streams word by word, then ``tool_calls``; ``error_after`` events in,
    ``error`` is raised (``error`` with ``error_after`` None: raised before any
    event). ``delay_s`` waits before the first event; ``hang`` never answers."""

    text: str = ""
    tool_calls: Sequence[ToolCall] = ()
    error: GroundwireError | None = None
    error_after: int | None = None
    delay_s: float = 0.0
    event_delay_s: float = 0.0
    hang: bool = False

    def events(self) -> list[StreamEvent]:
        words = [w + " " for w in self.text.split(" ")] if self.text else []
        if words:
            words[-1] = words[-1][:-1]
        return [*(TextDelta(w) for w in words if w), *self.tool_calls]


@dataclass
class ScriptedLLM:
    """Satisfies :class:`~groundwire_orchestrator.llm.base.LLMProvider`."""

    provider_name: str
    script: Iterable[ScriptedReply | GroundwireError | str] = ()
    default: ScriptedReply | None = None
    requests: list[LLMRequest] = field(default_factory=list)
    timeouts: list[float] = field(default_factory=list)
    open_streams: int = 0
    warmed: bool = False
    closed: bool = False

    def __post_init__(self) -> None:
        self._replies: deque[ScriptedReply | GroundwireError | str] = deque(self.script)

    @property
    def name(self) -> str:
        return self.provider_name

    def push(self, *replies: ScriptedReply | GroundwireError | str) -> None:
        self._replies.extend(replies)

    def _next(self, request: LLMRequest, timeout_s: float) -> ScriptedReply:
        self.requests.append(request)
        self.timeouts.append(timeout_s)
        if self._replies:
            item = self._replies.popleft()
        elif self.default is not None:
            item = self.default
        else:
            raise AssertionError(f"ScriptedLLM {self.name!r}: script exhausted")
        if isinstance(item, GroundwireError):
            return ScriptedReply(error=item)
        if isinstance(item, str):
            return ScriptedReply(text=item)
        return item

    async def stream(self, request: LLMRequest, *, timeout_s: float) -> AsyncIterator[StreamEvent]:
        reply = self._next(request, timeout_s)
        self.open_streams += 1
        try:
            if reply.hang:
                await asyncio.Event().wait()
            await asyncio.sleep(reply.delay_s)
            if reply.error is not None and reply.error_after is None:
                raise reply.error
            for n, event in enumerate(reply.events()):
                if reply.error is not None and n == reply.error_after:
                    raise reply.error
                if n:
                    await asyncio.sleep(reply.event_delay_s)
                yield event
            if reply.error is not None:
                raise reply.error
        finally:
            self.open_streams -= 1

    async def complete(self, request: LLMRequest, *, timeout_s: float) -> str:
        reply = self._next(request, timeout_s)
        if reply.hang:
            await asyncio.Event().wait()
        await asyncio.sleep(reply.delay_s)
        if reply.error is not None:
            raise reply.error
        return reply.text

    async def warm_up(self) -> None:
        self.warmed = True

    async def aclose(self) -> None:
        self.closed = True
