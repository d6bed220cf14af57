"""Reasoning models' thinking, kept out of the answer.

Models such as DeepSeek-R1, Qwen3 or MiniMax-M2 write a ``<think>…</think>`` block
before their answer, in the same text stream. Left in, it would stream to the reader,
reach the citation check as if it were the answer (with the ``[n]`` markers it muses
about) and be stored as the conversation's answer. Both providers pass every text
delta through one :class:`ReasoningFilter`: the answer goes on as text, the thinking
comes out separately (as ``ReasoningDelta`` events, which the answer stage counts and
never shows). OpenAI-compatible servers that split the thinking out themselves send it
as ``reasoning_content`` (or ``reasoning``) deltas, and Anthropic as ``thinking``
blocks: the providers route those the same way.

The filter is a streaming state machine: a tag may arrive split across deltas
(``"<thi"`` + ``"nk>"``), so a delta's tail that could still become a tag is held back
until the next delta decides it (at most a tag's length). A block still open when the
stream ends is thinking that never finished: it is dropped, not shown.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from groundwire_orchestrator.llm.base import ReasoningDelta, StreamEvent, TextDelta

TAGS: tuple[tuple[str, str], ...] = (("<think>", "</think>"), ("<thinking>", "</thinking>"))
"""(opening, closing) pairs the models in use write; matched case-insensitively."""


@dataclass(frozen=True)
class Split:
    """What one piece of model output holds: answer text and thinking."""

    answer: str = ""
    reasoning: str = ""


def _held_prefix(text: str, tags: tuple[str, ...]) -> int:
    """The length of ``text``'s longest tail that is a proper prefix of one of ``tags``
    (it may still become that tag)."""
    lowered = text.lower()
    longest = max(len(tag) for tag in tags) - 1
    for size in range(min(longest, len(text)), 0, -1):
        tail = lowered[-size:]
        if any(tag.startswith(tail) and tag != tail for tag in tags):
            return size
    return 0


class ReasoningFilter:
    """Splits streamed model text into answer and thinking; one per reply.

    ``feed`` takes each delta in order and returns what can be decided so far;
    ``flush`` at the end of the stream returns the rest (an unfinished tag is answer
    text; an unterminated block is thinking)."""

    def __init__(self, tags: tuple[tuple[str, str], ...] = TAGS) -> None:
        self._tags = tags
        self._opens = tuple(open_ for open_, _ in tags)
        self._close: str | None = None
        """The closing tag awaited while inside a block; None outside."""
        self._pending = ""
        self._trim = False
        """Drop the whitespace that follows a block (the answer starts after it)."""

    @property
    def inside(self) -> bool:
        return self._close is not None

    def feed(self, text: str) -> Split:
        """The answer and thinking ``text`` settles (with what was held back before)."""
        buffer = self._pending + text
        self._pending = ""
        answer: list[str] = []
        reasoning: list[str] = []
        while buffer:
            lowered = buffer.lower()
            if self._close is None:
                found = [
                    (at, open_, close)
                    for open_, close in self._tags
                    if (at := lowered.find(open_)) >= 0
                ]
                if not found:
                    held = _held_prefix(buffer, self._opens)
                    self._emit(answer, buffer[: len(buffer) - held])
                    self._pending = buffer[len(buffer) - held :]
                    break
                # the earliest tag; at one position the longer tag (<thinking> over <think>)
                at, open_, close = min(found, key=lambda f: (f[0], -len(f[1])))
                self._emit(answer, buffer[:at])
                buffer = buffer[at + len(open_) :]
                self._close = close
            else:
                at = lowered.find(self._close)
                if at < 0:
                    held = _held_prefix(buffer, (self._close,))
                    reasoning.append(buffer[: len(buffer) - held])
                    self._pending = buffer[len(buffer) - held :]
                    break
                reasoning.append(buffer[:at])
                buffer = buffer[at + len(self._close) :]
                self._close = None
                self._trim = True
        return Split("".join(answer), "".join(reasoning))

    def _emit(self, answer: list[str], text: str) -> None:
        if self._trim:
            text = text.lstrip()
            if not text:
                return
            self._trim = False
        answer.append(text)

    def flush(self) -> Split:
        """The rest, at the end of the stream: a held tail that never became a tag is
        answer text; inside a block, everything left is thinking."""
        rest, self._pending = self._pending, ""
        if self._close is not None:
            return Split(reasoning=rest)
        out: list[str] = []
        self._emit(out, rest)
        return Split("".join(out))


def split_reasoning(text: str) -> Split:
    """A whole reply's answer and thinking (non-streamed calls)."""
    flt = ReasoningFilter()
    head = flt.feed(text)
    tail = flt.flush()
    return Split(head.answer + tail.answer, head.reasoning + tail.reasoning)


def events(split: Split) -> Iterator[StreamEvent]:
    """``split`` as stream events: the thinking (if any), then the answer text."""
    if split.reasoning:
        yield ReasoningDelta(split.reasoning)
    if split.answer:
        yield TextDelta(split.answer)
