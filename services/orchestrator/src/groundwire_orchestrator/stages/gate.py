"""Verify before show: the answer's text is held sentence by sentence until its
citations are checked, and a sentence whose check fails is never sent.

The LLM's deltas are buffered; a sentence (or a fenced code block with its marker
line) is complete once the next one has begun (a citation marker after a full stop
still belongs to the sentence before it, so a next unit starting with "[" waits; an
open code fence holds everything from the fence on). Complete units are checked
together (one verifier call per batch, not per sentence), then sent or withheld:

- withheld: a cited sentence with a CONTRADICTED citation, or whose citations are all
  UNSUPPORTED (or UNRELATED, when verify-before-show is forced on with similarity
  alone; a sentence with one supported and one unsupported citation is shown, the
  failing citation labelled as before);
- shown: sentences whose citations are SUPPORTED, QUOTED, SIMILAR or UNCHECKED (every
  verifier failed:
  the stage reports the fallback; withholding on no evidence would blank answers
  whenever a backend is down);
- uncited sentences: shown when they state nothing to check — a decline, a lead-in
  ending in ":", a heading, or fewer than five content words ("Here is how:", "In
  short, yes."); an uncited sentence making a longer statement is withheld (status
  UNSUPPORTED, "cites no source"), since nothing grounds it.

What the client receives is exactly the shown units joined by the whitespace the
model wrote before each; the final answer text and every ``answer_span`` refer to
it. An answer whose every cited sentence was withheld becomes a decline (after a
reset when uncited text had been sent). The ``citations`` stage report covers all
batches (``ms`` is the time spent checking).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from groundwire_orchestrator.domain import (
    AnswerDelta,
    AnswerReset,
    Citation,
    NumberedSource,
    RetrievalDone,
    StageReport,
    Verification,
    Withheld,
)
from groundwire_orchestrator.stages.citations import (
    CitationVerifier,
    CitedSentence,
    answer_units,
    parse_unit,
    tally,
)
from groundwire_orchestrator.text.prompting import DECLINE_PREFIX, is_decline
from groundwire_orchestrator.text.quotes import closes, fence_of
from groundwire_orchestrator.text.sentences import content_words
from groundwire_orchestrator.verification.base import Judgement

ALL_WITHHELD = f"{DECLINE_PREFIX}: the sources do not support what the answer would have said."
UNCITED_CONTENT_WORDS = 5
"""An uncited sentence with this many content words or more states something to check."""

GateEvent = AnswerDelta | AnswerReset | RetrievalDone


def _open_fence_start(text: str) -> int | None:
    """Offset of the line opening a fenced block that is not closed yet (None: none)."""
    fence: str | None = None
    start = 0
    offset = 0
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if fence is None:
            fence = fence_of(bare)
            start = offset
        elif closes(fence, bare):
            fence = None
        offset += len(line)
    return start if fence is not None else None


def _states_something(sentence: str) -> bool:
    stripped = sentence.strip()
    if is_decline(stripped) or stripped.endswith(":") or stripped.startswith("#"):
        return False
    return len(content_words(stripped)) >= UNCITED_CONTENT_WORDS


@dataclass
class _Totals:
    ms: float = 0.0
    batches: int = 0
    judgements: list[Judgement] = field(default_factory=list)
    """Every verdict of the answer's batches: the fallback is reported over all."""
    verbatim: int = 0


class VerifyBeforeShow:
    """One answer's gate; feed it the answer's events, then :meth:`finish`."""

    def __init__(
        self,
        verifier: CitationVerifier,
        sources: Callable[[int], NumberedSource | None],
        *,
        uncited_withheld: bool = True,
    ) -> None:
        self._verifier = verifier
        self._sources = sources
        self._uncited_withheld = uncited_withheld
        self._pending = ""
        self._shown: list[str] = []
        self._shown_len = 0
        self._citations: list[Citation] = []
        self._withheld: list[Withheld] = []
        self._totals = _Totals()
        self.declined = False
        self._fed = False

    @property
    def text(self) -> str:
        """What the client has received (the final answer once finished)."""
        return "".join(self._shown)

    @property
    def citations(self) -> tuple[Citation, ...]:
        return tuple(self._citations)

    @property
    def withheld(self) -> tuple[Withheld, ...]:
        return tuple(self._withheld)

    async def pass_event(self, event: GateEvent) -> list[GateEvent]:
        """The events to send for one of the answer's: deltas are held until their
        sentences are checked; a reset discards what was held and shown."""
        if isinstance(event, AnswerDelta):
            self._fed = True
            self._pending += event.text
            return list(await self._decide(final=False))
        if isinstance(event, AnswerReset):
            self._pending = ""
            self._shown, self._shown_len = [], 0
            self._citations, self._withheld = [], []
        return [event]

    @property
    def holds(self) -> bool:
        """Whether any answer text went through the gate (it must be closed)."""
        return self._fed

    async def close(self) -> tuple[list[GateEvent], StageReport]:
        """:meth:`finish`, and the ``citations`` stage report (for run_stage)."""
        return await self.finish(), self.report()

    async def finish(self) -> list[GateEvent]:
        """Decides the units still held; when every cited sentence was withheld the
        answer becomes a decline (a reset first if text was sent)."""
        events: list[GateEvent] = list(await self._decide(final=True))
        if self._withheld and not self._citations:
            if self._shown:
                events.append(AnswerReset("every cited sentence failed the citation check"))
            self._shown, self._shown_len = [ALL_WITHHELD], len(ALL_WITHHELD)
            events.append(AnswerDelta(ALL_WITHHELD))
            self.declined = True
        return events

    def report(self) -> StageReport:
        """The ``citations`` stage report over every batch checked."""
        t = self._totals
        details = {
            "verify_before_show": "on",
            "checked": str(len(self._citations) + sum(len(w.numbers) for w in self._withheld)),
            "batches": str(t.batches),
            "withheld": str(len(self._withheld)),
            "threshold": f"{self._verifier.threshold:g}",
        }
        if t.verbatim:
            details["verbatim"] = str(t.verbatim)
        details.update(tally(self._citations, [c.method for c in self._citations]))
        reason, dependency = self._verifier.failure(t.judgements)
        return StageReport("citations", t.ms, bool(reason), reason, dependency, details)

    def _complete(self, final: bool) -> list[tuple[tuple[int, int], str | None]]:
        text = self._pending
        if final:
            return answer_units(text)
        open_at = _open_fence_start(text)
        units = answer_units(text if open_at is None else text[:open_at])
        done = []
        for k, (span, block) in enumerate(units):
            if k + 1 >= len(units):
                if open_at is not None:  # an opened code block follows: a new unit
                    done.append((span, block))
                break
            nxt = units[k + 1][0]
            if text[nxt[0] : nxt[1]].startswith("["):
                break  # maybe markers of this unit, split over deltas
            done.append((span, block))
        return done

    async def _decide(self, *, final: bool) -> list[AnswerDelta]:
        units = self._complete(final)
        if not units:
            return []
        text = self._pending
        parsed = [parse_unit(text, span, block) for span, block in units]
        pairs = [
            (k, cs, src)
            for k, cs in enumerate(parsed)
            for n in cs.numbers
            if (src := self._sources(n)) is not None
        ]
        started = time.perf_counter()
        checked, details, judged = await self._verifier.check([(cs, s) for _, cs, s in pairs])
        self._totals.ms += (time.perf_counter() - started) * 1e3
        self._totals.batches += 1 if pairs else 0
        self._totals.verbatim += int(details.get("verbatim", "0"))
        self._totals.judgements.extend(judged)
        per_unit: dict[int, list[Citation]] = {}
        for (k, _, _), citation in zip(pairs, checked, strict=True):
            per_unit.setdefault(k, []).append(citation)
        deltas = []
        end = 0
        for k, cs in enumerate(parsed):
            separator = text[end : cs.span[0]] if self._shown else ""
            end = cs.span[1]
            held = self._withhold(cs, per_unit.get(k, []))
            if held is not None:
                self._withheld.append(held)
                continue
            start = self._shown_len + len(separator)
            for c in per_unit.get(k, []):
                assert c.answer_span is not None
                shift = start - cs.span[0]
                span = (c.answer_span[0] + shift, c.answer_span[1] + shift)
                self._citations.append(replace(c, answer_span=span))
            piece = separator + cs.sentence
            self._shown.append(piece)
            self._shown_len += len(piece)
            deltas.append(AnswerDelta(piece))
        self._pending = text[end:]
        return [AnswerDelta("".join(d.text for d in deltas))] if deltas else []

    def _withhold(self, cs: CitedSentence, citations: Sequence[Citation]) -> Withheld | None:
        """Why ``cs`` is withheld, or None when it is shown."""
        numbers = tuple(c.number for c in citations)
        if not citations:
            if self._uncited_withheld and _states_something(cs.claim):
                return Withheld(cs.sentence, (), Verification.UNSUPPORTED, "cites no source")
            return None
        contradicted = [c for c in citations if c.status is Verification.CONTRADICTED]
        if contradicted:
            c = contradicted[0]
            return Withheld(cs.sentence, numbers, c.status, _why(c, "contradicts it"))
        if all(c.status in (Verification.UNSUPPORTED, Verification.UNRELATED) for c in citations):
            c = citations[0]
            return Withheld(cs.sentence, numbers, c.status, _why(c, "does not support it"))
        return None


def _why(citation: Citation, what: str) -> str:
    note = f" ({citation.reason})" if citation.reason else ""
    return f"source [{citation.number}] {what}, judged by {citation.method}{note}"
