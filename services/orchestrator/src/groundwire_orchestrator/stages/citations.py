"""The citation check stage: the answer's [n] markers parsed per sentence, and each
cited chunk checked for support of the sentence that cites it (the numbering of
sources and the stream's marker filter are text.ledger's).

Verification method (per (sentence, cited chunk) pair):

- semantic: the embedder's cosine between the sentence (markers stripped) and each
  sentence of the chunk, and the chunk body as a whole; the best one counts.
- lexical: the share of the sentence's content words (stop words removed, crudely
  stemmed) that occur in the chunk.
- support = 0.6 * max(semantic, 0) + 0.4 * lexical, in [0, 1]; a sentence with fewer
  than two content words ("Yes [1].") is judged on the semantic part alone.
- figures: when the sentence states a number (digits, or a number word from "three"
  up) that the chunk does not contain, the support is halved — invented figures are
  the commonest unsupported claim that still shares the chunk's topic and words.
- a sentence quoted verbatim from the chunk (four content words or more; with its
  citation markers removed and nothing else changed, its text occurs in the chunk's,
  whitespace runs read as one space) is supported (support 1) without the embedder.
  Every extractive quote is one. A quote that drops a backtick, an underscore or a
  space is not verbatim: it is judged on its support like any paraphrase.
- a fenced code block in the answer is one claim, cited by a line of markers right
  after its closing fence (as the extractive answer writes it); numbers inside a code
  block are code, not citations.
- SUPPORTED when the support reaches the threshold (settings, default 0.45),
  UNSUPPORTED otherwise.
- a sentence that repeats injected instructions (it matches the injection screen's
  patterns) and cites a passage the screen flagged is UNSUPPORTED (support 0): text
  written to steer a model is no evidence, however verbatim the quote.

Calibrated with MiniLM: paraphrases of a chunk's statements score 0.52-0.86, the same
sentences checked against an unrelated chunk 0.03-0.11. What it does not catch: a
sentence on the chunk's topic that swaps an entity or a negation ("per account, not
per key") scores like a paraphrase; that needs an entailment model.

Embedder down -> every citation UNCHECKED (support 0) and the stage reports it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from groundwire_core.errors import GroundwireError
from groundwire_orchestrator.clients.interfaces import Embedder
from groundwire_orchestrator.domain import (
    Candidate,
    Citation,
    NumberedSource,
    StageReport,
    Verification,
)
from groundwire_orchestrator.stages.screening import screen
from groundwire_orchestrator.text.passages import PassageVectors, Vector, cosine
from groundwire_orchestrator.text.quotes import closes, fence_of, is_marker_line, remove_markers
from groundwire_orchestrator.text.sentences import (
    LIST_MARK,
    chunk_body,
    content_words,
    marker_numbers,
    overlap,
    prose_sentences,
    split_sentences,
    strip_markers,
)

SEMANTIC_WEIGHT = 0.6
LEXICAL_WEIGHT = 0.4
_UNITS_PER_CHUNK = 6
_NUMBER_WORDS = frozenset(
    """three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty
    ninety hundred thousand million billion""".split()
)
_FIGURE = re.compile(r"\d+(?:[.,]\d+)*|[a-z]+")


def figures(text: str) -> set[str]:
    """Numbers stated in ``text``: digit groups (separators removed) and number words."""
    found = set()
    for token in _FIGURE.findall(text.lower()):
        if token[0].isdigit():
            found.add(token.replace(",", ""))
        elif token in _NUMBER_WORDS:
            found.add(token)
    return found


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


def _answer_units(text: str) -> list[tuple[str, str | None]]:
    """``text`` as (unit, claim) pairs: its sentences (claim None: derived), and each
    fenced code block with the marker line after it as one unit (claim: the block)."""
    units: list[tuple[str, str | None]] = []
    prose: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = fence_of(lines[i])
        end = None
        if fence is not None:
            end = next((j for j in range(i + 1, len(lines)) if closes(fence, lines[j])), None)
        if fence is None or end is None:
            prose.append(lines[i])
            i += 1
            continue
        units += [(s, None) for s in split_sentences("\n".join(prose))]
        prose = []
        block = "\n".join(lines[i : end + 1])
        if end + 1 < len(lines) and is_marker_line(lines[end + 1]):
            units.append((f"{block}\n{lines[end + 1]}", block))
            end += 1
        i = end + 1
    units += [(s, None) for s in split_sentences("\n".join(prose))]
    return units


def cited_sentences(text: str) -> list[CitedSentence]:
    """Sentences (and code blocks) of ``text`` that cite something, each with its
    distinct numbers."""
    out = []
    for sentence, block in _answer_units(text):
        marked = sentence if block is None else sentence[len(block) :]
        numbers = tuple(dict.fromkeys(marker_numbers(marked)))
        if not numbers:
            continue
        if block is not None:
            out.append(CitedSentence(sentence, block, numbers, block))
        else:
            out.append(
                CitedSentence(sentence, strip_markers(sentence), numbers, remove_markers(sentence))
            )
    return out


def _chunk_units(cand: Candidate) -> list[str]:
    body = chunk_body(cand)
    units = [u for u in prose_sentences(body) if len(u) >= 3]
    whole = " ".join(body.split())
    return [*units, whole] if whole else units


def is_quote(quote: str, cand: Candidate) -> bool:
    """Whether ``quote`` (four content words or more; citation markers already
    removed) occurs in the chunk's text as it is, whitespace runs aside: supported by
    definition, no embedding needed (every extractive quote is one). A list item's
    bullet and the final punctuation may differ (an answer's list is its own)."""
    if len(content_words(quote)) < 4:
        return False
    chunk = " ".join(cand.text.split())
    flat = " ".join(quote.split())
    if flat in chunk:
        return True
    bare = LIST_MARK.sub("", flat).rstrip(".!?;:")
    return bool(bare) and bare in chunk


def _closest_units(cand: Candidate, claims: Sequence[str], limit: int) -> list[str]:
    """The chunk's units worth embedding for ``claims``: the whole body, and the
    ``limit`` sentences sharing most words with them (bounds the embedder's work)."""
    units = _chunk_units(cand)
    if len(units) <= limit + 1:
        return units
    words = [w for c in claims for w in content_words(c)]
    sentences, whole = units[:-1], units[-1]
    ranked = sorted(sentences, key=lambda u: -overlap(words, content_words(u)))
    return [*ranked[:limit], whole]


@dataclass(frozen=True)
class VerificationInput:
    text: str
    """The answer ("" for a decline: it cites nothing)."""
    sources: Callable[[int], NumberedSource | None]
    """The source a citation number points at (the response's ledger)."""


class CitationVerifier:
    """Checks each citation of an answer against the chunk it cites."""

    def __init__(
        self,
        embedder: Embedder | None,
        *,
        threshold: float,
        passages: PassageVectors | None = None,
    ) -> None:
        """``passages``: the chunk-text vectors shared with the extractive answer (one
        of this verifier's own when None)."""
        self._threshold = threshold
        if passages is None and embedder is not None:
            passages = PassageVectors(embedder)
        self._passages = passages

    async def _unit_vectors(
        self, claims: list[str], units: list[str]
    ) -> dict[str, Vector]:
        """Vectors of the claims and the chunks' units, all of one model; only the units
        are kept (claims are new each time)."""
        assert self._passages is not None
        return (await self._passages.get([*claims, *units], keep=units)).vectors

    def support(
        self, claim: str, cand: Candidate, vectors: dict[str, Vector]
    ) -> float:
        """Support of ``claim`` by ``cand`` in [0, 1] (see the module docstring)."""
        units = _chunk_units(cand)
        claim_vec = vectors.get(claim)
        semantic = max(
            (cosine(claim_vec, vectors[u]) for u in units if u in vectors and claim_vec),
            default=0.0,
        )
        semantic = max(semantic, 0.0)
        words = content_words(claim)
        if len(set(words)) < 2:
            score = semantic
        else:
            lexical = overlap(words, content_words(cand.text))
            score = SEMANTIC_WEIGHT * semantic + LEXICAL_WEIGHT * lexical
        if figures(claim) - figures(cand.text):
            score *= 0.5
        return min(score, 1.0)

    async def run(self, inp: VerificationInput) -> tuple[tuple[Citation, ...], StageReport]:
        """One Citation per (sentence, number) in the answer; numbers with no source are
        skipped (the stream filter has removed them already). Never raises for the
        embedder (its citations are UNCHECKED)."""
        started = time.perf_counter()
        pairs = [
            (cs, src)
            for cs in cited_sentences(inp.text)
            for n in cs.numbers
            if (src := inp.sources(n)) is not None
        ]
        details = {"threshold": f"{self._threshold:g}", "checked": str(len(pairs))}
        injected = {
            i
            for i, (cs, src) in enumerate(pairs)
            if src.candidate.injection_flagged and screen(cs.quote)
        }
        quoted = {
            i
            for i, (cs, src) in enumerate(pairs)
            if i not in injected and is_quote(cs.quote, src.candidate)
        }
        to_embed = [p for i, p in enumerate(pairs) if i not in quoted | injected]
        fallback_reason = ""
        dependency = ""
        vectors: dict[str, Vector] | None = None
        if to_embed:
            if self._passages is None:
                fallback_reason = "no embedder is configured: citations are unchecked"
            else:
                texts = [cs.claim for cs, _ in to_embed]
                claims_of: dict[int, tuple[Candidate, list[str]]] = {}
                for cs, src in to_embed:
                    claims_of.setdefault(src.number, (src.candidate, []))[1].append(cs.claim)
                units: list[str] = []
                for cand, claims in claims_of.values():
                    units += _closest_units(cand, claims, _UNITS_PER_CHUNK)
                try:
                    vectors = await self._unit_vectors(texts, units)
                except GroundwireError as error:
                    fallback_reason = f"citations are unchecked: {error.message}"
                    dependency = error.dependency or "embedder"
        citations = []
        for i, (cs, src) in enumerate(pairs):
            if i in injected:
                citations.append(Citation(src.number, cs.sentence, Verification.UNSUPPORTED, 0.0))
                continue
            if i in quoted:
                citations.append(Citation(src.number, cs.sentence, Verification.SUPPORTED, 1.0))
                continue
            if vectors is None:
                citations.append(Citation(src.number, cs.sentence, Verification.UNCHECKED, 0.0))
                continue
            score = self.support(cs.claim, src.candidate, vectors)
            status = (
                Verification.SUPPORTED if score >= self._threshold else Verification.UNSUPPORTED
            )
            citations.append(Citation(src.number, cs.sentence, status, round(score, 4)))
        if quoted:
            details["verbatim"] = str(len(quoted))
        if injected:
            details["repeats_injection"] = str(len(injected))
        for status in Verification:
            details[status.value] = str(sum(c.status is status for c in citations))
        ms = (time.perf_counter() - started) * 1e3
        report = StageReport(
            "citations", ms, bool(fallback_reason), fallback_reason, dependency, details
        )
        return tuple(citations), report
