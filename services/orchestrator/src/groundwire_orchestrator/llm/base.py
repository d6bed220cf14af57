"""The one interface every LLM provider implements, and its types.

A provider turns an :class:`LLMRequest` into text deltas and tool calls, streamed.
Failures are GroundwireErrors naming ``llm:<provider>`` as the dependency:
Unavailable (connection, 5xx), Overloaded (429/529, with retry-after),
DeadlineExceeded (timeout), BackendFailure (malformed reply). Never transport types.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

ModelRole = Literal["fast", "strong"]
"""fast: analysis and listwise rerank (e.g. Claude Haiku); strong: the answer."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: Mapping[str, Any]
    """JSON schema of the arguments object."""


@dataclass(frozen=True)
class ToolCall:
    """The model asks for a tool; streamed once its arguments are complete."""

    id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A reasoning model's thinking (``<think>`` blocks, ``reasoning_content``,
    Anthropic ``thinking``): never part of the answer (see llm/reasoning.py)."""

    text: str


@dataclass(frozen=True)
class ChatMessage:
    role: Literal["user", "assistant"]
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    """On an assistant message: the tools it called (their results follow)."""


@dataclass(frozen=True)
class ToolResult:
    """The answer to one tool call, sent back to the model as the next turn."""

    call_id: str
    name: str
    content: str


Turn = ChatMessage | ToolResult


@dataclass(frozen=True)
class WebSearch:
    """A provider's own web search, offered with the request where the provider has
    one (Anthropic's ``web_search``; others ignore it): live documentation lookups,
    see stages/live_docs.py."""

    allowed_domains: tuple[str, ...]
    max_uses: int


@dataclass(frozen=True)
class LLMRequest:
    system: str
    messages: tuple[Turn, ...]
    role: ModelRole = "strong"
    max_tokens: int = 1024
    temperature: float = 0.0
    tools: tuple[ToolSpec, ...] = ()
    stop: tuple[str, ...] = field(default=())
    web_search: WebSearch | None = None


StreamEvent = TextDelta | ReasoningDelta | ToolCall


class LLMProvider(Protocol):
    """An LLM behind one API. Constructing one opens nothing; calls do."""

    @property
    def name(self) -> str:
        """Short name used in stage reports and errors, e.g. "anthropic"."""
        ...

    def stream(self, request: LLMRequest, *, timeout_s: float) -> AsyncIterator[StreamEvent]:
        """Streams text deltas (the answer only), the model's thinking apart, and tool
        calls. Cancelling the iteration cancels the
        HTTP request (the remote side sees the connection close)."""
        ...

    async def complete(self, request: LLMRequest, *, timeout_s: float) -> str:
        """The whole text of a reply (no tools), its thinking left out."""
        ...

    async def aclose(self) -> None:
        """Releases connections."""
        ...


async def close_stream(stream: AsyncIterator[StreamEvent]) -> None:
    """Stops a stream from :meth:`LLMProvider.stream` before its end; its HTTP stream
    is closed (the remote side sees the connection go) before this returns.

    Leaving an ``async for`` early does not close an async generator at once (only
    when it is garbage-collected): call this, e.g. in a ``finally``. Closing a stream
    that already ended does nothing.
    """
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


def served_by(stream: AsyncIterator[StreamEvent], provider: LLMProvider) -> str:
    """Which provider produced ``stream``'s events: a failover chain's stream knows
    (once it has started); any other stream is ``provider``'s own."""
    name = getattr(stream, "served_by", None)
    return name if isinstance(name, str) else provider.name


async def warm_up(provider: LLMProvider) -> None:
    """Pays a provider's one-time costs (SDK imports and setup) before the first
    request, if it has any to pay (a ``warm_up()`` method); opens no connection.
    Call it at startup: on a busy CPU those costs reach seconds, which would
    otherwise come out of the first request's deadline."""
    method = getattr(provider, "warm_up", None)
    if method is not None:
        await method()
