"""The citation check stage: the answer's [n] markers parsed per sentence, and each
cited chunk checked for support of the sentence that cites it by the configured
verifiers (verification.chain: nli -> llm -> similarity, falling back per claim).

- a claim is the sentence with its markers and markup stripped; a fenced code block in
  the answer is one claim, cited by a line of markers right after its closing fence
  (as the extractive answer writes it); numbers inside a code block are code, not
  citations. Sentences split at full stops, but not at abbreviations or initials
  ("E. coli", "e.g.", "Fig. 2", "et al."), so a claim is whole.
- a verbatim quote is checked like any claim: it proves the words exist in the chunk,
  not that they support or answer anything (the report counts them as ``verbatim``); a
  verifier that reads no meaning (similarity) labels it QUOTED, never SUPPORTED.
- a sentence that repeats injected instructions (it matches the injection screen's
  patterns) and cites a passage the screen flagged is UNSUPPORTED (support 0) before
  any verifier sees it: text written to steer a model is no evidence.
- each citation carries the method that judged it, the contradiction score, the
  sentence's [start, end) in the answer and the supporting sentence's [start, end) in
  the chunk's text (heading line included, as sent to clients).

Every verifier failing -> citations UNCHECKED (support 0) and the stage reports it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from groundwire_orchestrator.clients.interfaces import Embedder
from groundwire_orchestrator.domain import (
    Candidate,
    Citation,
    NumberedSource,
    StageReport,
    Verification,
)
from groundwire_orchestrator.stages.screening import screen
from groundwire_orchestrator.text.passages import PassageVectors
from groundwire_orchestrator.text.quotes import closes, fence_of, is_marker_line, remove_markers
from groundwire_orchestrator.text.sentences import (
    LIST_MARK,
    chunk_body,
    content_words,
    marker_numbers,
    sentence_spans,
    strip_markers,
)
from groundwire_orchestrator.verification.base import Claim, Judgement
from groundwire_orchestrator.verification.chain import VerifierChain
from groundwire_orchestrator.verification.similarity import SimilarityVerifier

_DEPENDENCY = {"nli": "reranker", "llm": "llm", "similarity": "embedder", "none": ""}

# -------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class CitedSentence:
    sentence: str
    """As written (markers included)."""
    claim: str
    """Markers and markup stripped: what the cited chunks must support."""
    numbers: tuple[int, ...]
    quote: str = ""
    """Only the markers removed: what a verbatim quote has in common with the chunk."""
    span: tuple[int, int] = (0, 0)
    """[start, end) of ``sentence`` in the answer text."""


def answer_units(text: str) -> list[tuple[tuple[int, int], str | None]]:
    """``text`` as (span, block) pairs: each sentence (block None) and each fenced code
    block with the marker line after it as one unit (block: the code block), with its
    [start, end) in ``text``."""
    units: list[tuple[tuple[int, int], str | None]] = []
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    prose_from = 0

    def add_prose(end: int) -> None:
        segment = text[prose_from:end]
        units.extend(((prose_from + s, prose_from + e), None) for s, e in sentence_spans(segment))

    i = 0
    while i < len(lines):
        fence = fence_of(lines[i].rstrip("\r\n"))
        end = None
        if fence is not None:
            end = next(
                (j for j in range(i + 1, len(lines)) if closes(fence, lines[j].rstrip("\r\n"))),
                None,
            )
        if fence is None or end is None:
            i += 1
            continue
        add_prose(starts[i])
        block = text[starts[i] : starts[end] + len(lines[end].rstrip("\r\n"))]
        unit_end = starts[i] + len(block)
        if end + 1 < len(lines) and is_marker_line(lines[end + 1].rstrip("\r\n")):
            end += 1
            unit_end = starts[end] + len(lines[end].rstrip("\r\n"))
        units.append(((starts[i], unit_end), block))
        i = end + 1
        prose_from = starts[i]
    add_prose(len(text))
    return units


def parse_unit(text: str, span: tuple[int, int], block: str | None) -> CitedSentence:
    """One unit of ``text`` (see :func:`answer_units`) with its distinct numbers (none
    when it cites nothing)."""
    sentence = text[span[0] : span[1]]
    marked = sentence if block is None else sentence[len(block) :]
    numbers = tuple(dict.fromkeys(marker_numbers(marked)))
    if block is not None:
        return CitedSentence(sentence, block, numbers, block, span)
    return CitedSentence(sentence, strip_markers(sentence), numbers, remove_markers(sentence), span)


def cited_sentences(text: str) -> list[CitedSentence]:
    """Sentences (and code blocks) of ``text`` that cite something, each with its
    distinct numbers and its span in ``text``."""
    parsed = (parse_unit(text, span, block) for span, block in answer_units(text))
    return [c for c in parsed if c.numbers]


def is_quote(quote: str, cand: Candidate) -> bool:
    """Whether ``quote`` (four content words or more; citation markers already
    removed) occurs in the chunk's text as it is, whitespace runs aside. Counted in the
    report, never taken as support: a quote proves the words exist, not that they
    support or answer anything. A list item's bullet and the final punctuation may
    differ (an answer's list is its own)."""
    if len(content_words(quote)) < 4:
        return False
    chunk = " ".join(cand.text.split())
    flat = " ".join(quote.split())
    if flat in chunk:
        return True
    bare = LIST_MARK.sub("", flat).rstrip(".!?;:")
    return bool(bare) and bare in chunk


def tally(citations: Sequence[Citation], methods: Sequence[str]) -> dict[str, str]:
    """The report's counts: each status that occurs over ``citations`` (a status no
    citation has is left out: a "supported: 0" beside similarity verdicts reads as if
    support had been checked), then each of ``methods`` (as ``method_<name>``, in order
    of first appearance)."""
    found = Counter(c.status for c in citations)
    counts = {s.value: str(found[s]) for s in Verification if found[s]}
    counts.update((f"method_{m}", str(n)) for m, n in Counter(methods).items())
    return counts


@dataclass(frozen=True)
class VerificationInput:
    text: str
    """The answer ("" for a decline: it cites nothing)."""
    sources: Callable[[int], NumberedSource | None]
    """The source a citation number points at (the response's ledger)."""


def _citation(
    cs: CitedSentence, src: NumberedSource, judgement: Judgement
) -> Citation:
    cand = src.candidate
    evidence = None
    if judgement.evidence is not None:
        # the verifiers see the chunk's body; clients get the whole text
        offset = len(cand.text) - len(chunk_body(cand))
        evidence = (judgement.evidence[0] + offset, judgement.evidence[1] + offset)
    return Citation(
        src.number,
        cs.sentence,
        judgement.status,
        judgement.support,
        method=judgement.method,
        contradiction=judgement.contradiction,
        answer_span=cs.span,
        source_span=evidence,
        reason=judgement.reason,
        chunk_span=cand.doc_span,
    )


class CitationVerifier:
    """Checks each citation of an answer against the chunk it cites."""

    def __init__(
        self,
        embedder: Embedder | None,
        *,
        threshold: float,
        passages: PassageVectors | None = None,
        chain: VerifierChain | None = None,
    ) -> None:
        """``passages``: the chunk-text vectors shared with the extractive answer (one
        of this verifier's own when None). ``chain``: the verifiers in order (the
        similarity score alone when None)."""
        self._threshold = threshold
        if passages is None and embedder is not None:
            passages = PassageVectors(embedder)
        self._chain = chain or VerifierChain(
            [SimilarityVerifier(passages, threshold=threshold)]
        )

    @property
    def threshold(self) -> float:
        return self._threshold

    async def proves_now(self) -> bool:
        """Whether the first verifier ready now tells support from topic (nli or llm)."""
        return await self._chain.proves_now()

    async def run(self, inp: VerificationInput) -> tuple[tuple[Citation, ...], StageReport]:
        """One Citation per (sentence, number) in the answer; numbers with no source are
        skipped (the stream filter has removed them already). Never raises for a
        verifier (its citations are UNCHECKED)."""
        started = time.perf_counter()
        pairs = [
            (cs, src)
            for cs in cited_sentences(inp.text)
            for n in cs.numbers
            if (src := inp.sources(n)) is not None
        ]
        citations, details, judgements = await self.check(pairs)
        details["threshold"] = f"{self._threshold:g}"
        ms = (time.perf_counter() - started) * 1e3
        reason, dependency = self.failure(judgements)
        return tuple(citations), StageReport(
            "citations", ms, bool(reason), reason, dependency, details
        )

    async def check(
        self, pairs: Sequence[tuple[CitedSentence, NumberedSource]]
    ) -> tuple[list[Citation], dict[str, str], list[Judgement]]:
        """The citations of ``pairs`` in order, the report's details, and the verifiers'
        judgements (for :meth:`failure`; a citation repeating a flagged passage's
        instructions is not judged, so has none)."""
        injected = {
            i
            for i, (cs, src) in enumerate(pairs)
            if src.candidate.injection_flagged and screen(cs.quote)
        }
        to_judge = [i for i in range(len(pairs)) if i not in injected]
        quoted = [is_quote(cs.quote, src.candidate) for cs, src in pairs]
        claims = [
            Claim(pairs[i][0].claim, chunk_body(pairs[i][1].candidate), verbatim=quoted[i])
            for i in to_judge
        ]
        judged = dict(zip(to_judge, await self._chain.judge(claims), strict=True))
        citations = []
        for i, (cs, src) in enumerate(pairs):
            judgement = judged.get(i) or Judgement(
                Verification.UNSUPPORTED, 0.0, "none",
                reason="repeats the instructions of a flagged passage",
            )
            citations.append(_citation(cs, src, judgement))
        details = {"checked": str(len(pairs))}
        verbatim = sum(quoted)
        if verbatim:
            details["verbatim"] = str(verbatim)
        if injected:
            details["repeats_injection"] = str(len(injected))
        details.update(tally(citations, [j.method for j in judged.values()]))
        return citations, details, list(judged.values())

    def failure(self, judgements: Sequence[Judgement]) -> tuple[str, str]:
        """(reason, dependency) of the stage's fallback over ``judgements`` (all of one
        answer's): ("", "") when the first verifier judged every one."""
        first = self._chain.method
        fell = [j for j in judgements if j.method != first or j.status is Verification.UNCHECKED]
        if not fell:
            return "", ""
        unchecked = [j for j in fell if j.status is Verification.UNCHECKED]
        if unchecked:
            why = unchecked[0].reason or "the check could not run"
            return f"citations are unchecked: {why}", _DEPENDENCY.get(unchecked[0].method, "")
        used = ", ".join(dict.fromkeys(j.method for j in fell))
        why = fell[0].fell_back
        reason = f"{first} could not judge {len(fell)} citation(s) ({why}): {used} used"
        return reason, _DEPENDENCY[first]
