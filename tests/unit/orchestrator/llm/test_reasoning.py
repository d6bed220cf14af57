"""The reasoning filter: ``<think>`` blocks leave the answer whatever the deltas'
boundaries (every split point of the tags), unterminated blocks at the end of a
stream, text before and after, and the whole-reply form the non-streamed calls use."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import pytest

from groundwire_orchestrator import usage
from groundwire_orchestrator.llm.base import (
    ChatMessage,
    LLMRequest,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
)
from groundwire_orchestrator.llm.observed import ObservedLLM
from groundwire_orchestrator.llm.reasoning import (
    ReasoningFilter,
    Split,
    events,
    split_reasoning,
)

REPLY = "Intro. <think>The user wants [2]; maybe <b> tags.</think>\n\nThe limit is 60 [1]."
ANSWER = "Intro. The limit is 60 [1]."
THOUGHT = "The user wants [2]; maybe <b> tags."


def run(pieces: list[str]) -> Split:
    flt = ReasoningFilter()
    outs = [flt.feed(p) for p in pieces] + [flt.flush()]
    return Split("".join(o.answer for o in outs), "".join(o.reasoning for o in outs))


def cut(text: str, points: tuple[int, ...]) -> list[str]:
    bounds = (0, *points, len(text))
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def test_every_single_split_point() -> None:
    for at in range(len(REPLY) + 1):
        assert run(cut(REPLY, (at,))) == Split(ANSWER, THOUGHT), at


def test_every_pair_of_split_points_around_the_tags() -> None:
    start = REPLY.index("<think>")
    end = REPLY.index("</think>") + len("</think>") + 2
    region = range(start - 1, end + 1)
    for a, b in itertools.combinations(region, 2):
        assert run(cut(REPLY, (a, b))) == Split(ANSWER, THOUGHT), (a, b)


def test_one_character_per_delta() -> None:
    assert run(list(REPLY)) == Split(ANSWER, THOUGHT)


def test_the_split_the_issue_names() -> None:
    flt = ReasoningFilter()
    assert flt.feed("<thi") == Split()
    assert flt.feed("nk>secret") == Split(reasoning="secret")
    assert flt.inside
    assert flt.feed("</th") == Split()
    assert flt.feed("ink>Answer") == Split("Answer")
    assert flt.flush() == Split()


@pytest.mark.parametrize("at", range(len("<think>ab")))
def test_an_unterminated_block_is_dropped_at_the_end(at: int) -> None:
    text = "Hello <think>ab"
    assert run(cut(text, (at + 6,))) == Split("Hello ", "ab")


def test_a_half_closing_tag_at_the_end_stays_thinking() -> None:
    assert run(["<think>musing </thi"]) == Split("", "musing </thi")


def test_a_held_tail_that_never_becomes_a_tag_is_answer() -> None:
    flt = ReasoningFilter()
    assert flt.feed("a < b and x <thi") == Split("a < b and x ")
    assert flt.feed("s is fine") == Split("<this is fine")
    assert run(["ends with <th"]) == Split("ends with <th")


def test_several_blocks_case_and_the_long_form() -> None:
    text = "<THINK>one</THINK>A <thinking>two</thinking> B<think>three"
    assert run([text]) == Split("A B", "onetwothree")
    for at in range(len(text) + 1):
        assert run(cut(text, (at,))) == Split("A B", "onetwothree"), at


def test_text_without_tags_passes_unchanged_and_unheld() -> None:
    flt = ReasoningFilter()
    assert flt.feed("Plain answer [1].") == Split("Plain answer [1].")
    assert flt.feed(" More <b>bold</b>.") == Split(" More <b>bold</b>.")
    assert flt.flush() == Split()


def test_whitespace_after_a_block_is_dropped_across_deltas() -> None:
    assert run(["<think>x</think>", "\n", "\n ", "Answer"]) == Split("Answer", "x")


def test_whole_reply() -> None:
    assert split_reasoning(REPLY) == Split(ANSWER, THOUGHT)
    assert split_reasoning('<think>{"a": 1}</think>{"b": 2}').answer == '{"b": 2}'
    assert split_reasoning("no thinking") == Split("no thinking")


def test_events_put_the_thinking_apart() -> None:
    assert list(events(Split("a", "b"))) == [ReasoningDelta("b"), TextDelta("a")]
    assert list(events(Split())) == []


class ThinkingLLM:
    """A provider whose stream thinks 40 characters, then answers 8."""

    name = "thinker"

    async def stream(self, request: LLMRequest, *, timeout_s: float) -> AsyncIterator[StreamEvent]:
        yield ReasoningDelta("r" * 40)
        yield TextDelta("a" * 8)

    async def complete(self, request: LLMRequest, *, timeout_s: float) -> str:
        return "a" * 8

    async def aclose(self) -> None:
        pass


async def test_thinking_passes_the_observer_and_counts_as_output() -> None:
    """Never shown, but written (and billed): the token estimate counts it."""
    llm = ObservedLLM(ThinkingLLM(), ("thinker",))
    request = LLMRequest("", (ChatMessage("user", "q" * 4),))
    with usage.metered() as spent:
        seen = [e async for e in llm.stream(request, timeout_s=1)]
    assert seen == [ReasoningDelta("r" * 40), TextDelta("a" * 8)]
    assert spent.output_tokens == 12
