"""The extractive answer, used when no LLM is configured (or the LLM failed): the
units of the top excerpts that best match the question (prose sentences, list items,
fenced code blocks; see text.quotes), quoted verbatim, each with its [n] citation,
and labelled extractive (mode and stage report).

Units are scored against the query with the embedder (cosine, query vs the unit's
plain text) blended with the share of the query's content words they contain; with
the embedder down, the word share alone. Each unit is quoted as the chunk it cites
has it: with the markers removed, the answer is the chunk's own text (whitespace runs
aside), so each citation verifies as a quote.

A passage flagged by the injection screen is never quoted: its text was written to
be read as instructions, and an answer that quotes it repeats them to the user as
the answer. When only flagged passages had something to quote, the answer declines
and says so. A unit holding text that reads as a citation marker ("x[1]") is never
quoted either: its brackets would be taken for citations.

A unit scoring under ``min_score`` (embedder scoring only) is never quoted; when
even the best one does, the stage answers nothing and the chain declines: retrieval
always returns *something* through BM25 for a question the collection has nothing on,
and quoting its best sentences reads as an answer. With MiniLM on samples/corpus
(2026-11-24, through the gateway), 20 questions about the documents had best scores
0.26-0.80, and 14 they have nothing on 0.10-0.47 (7 of them under 0.2): the default
0.2 declines half the off-topic questions and none of the others. The scale depends on
the embedding model, like the citation threshold's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from groundwire_core.errors import GroundwireError
from groundwire_orchestrator.clients.interfaces import Embedder
from groundwire_orchestrator.domain import NumberedSource, StageReport
from groundwire_orchestrator.text.passages import PassageVectors, cosine, model_of
from groundwire_orchestrator.text.prompting import DECLINE_PREFIX
from groundwire_orchestrator.text.quotes import Unit, cite, cite_unit, quotable_units
from groundwire_orchestrator.text.sentences import (
    MARKER,
    chunk_body,
    content_words,
    overlap,
    strip_markers,
)

__all__ = ["FLAGGED_ONLY", "ExtractiveAnswerStage", "ExtractiveInput", "cite"]

SEMANTIC_WEIGHT = 0.7
LEXICAL_WEIGHT = 0.3
MAX_UNIT_CHARS = 400
MAX_CODE_CHARS = 800
MAX_CODE_LINES = 16

FLAGGED_ONLY = (
    f"{DECLINE_PREFIX}: the only passages that matched were flagged as possible prompt "
    "injection (text addressed to an AI model), and flagged passages are never quoted."
)
"""The answer when every passage with something to quote was flagged."""


@dataclass(frozen=True)
class ExtractiveInput:
    query: str
    sources: Sequence[NumberedSource]
    reason: str
    """Why the answer is extractive, for the stage report."""
    dependency: str = "llm"


@dataclass(frozen=True)
class _Candidate:
    number: int
    unit: Unit
    scored: str
    flagged: bool
    """The text scored against the query: the unit without Markdown markup (a code
    block: its introducing line and its code)."""


def _quotable(unit: Unit) -> bool:
    if MARKER.search(unit.text):  # "x[1]" would be read as a citation
        return False
    if unit.kind == "code":
        lines = unit.text.count("\n") + 1
        return (
            len(unit.text) <= MAX_CODE_CHARS
            and lines <= MAX_CODE_LINES
            and len(content_words(unit.text)) >= 3
        )
    plain = strip_markers(unit.text)
    return (
        len(plain.split()) >= 5
        and len(unit.text) <= MAX_UNIT_CHARS
        and unit.text.rstrip()[-1] not in ":;,"
    )


def _candidates(src: NumberedSource) -> list[_Candidate]:
    out = []
    for unit in quotable_units(chunk_body(src.candidate)):
        if not _quotable(unit):
            continue
        if unit.kind == "code":
            code = "\n".join(unit.text.splitlines()[1:-1])
            scored = f"{strip_markers(unit.context)}\n{code}".strip()
        else:
            scored = strip_markers(unit.text)
        out.append(_Candidate(src.number, unit, scored, src.candidate.injection_flagged))
    return out



def compose(quoted: Sequence[tuple[Unit, int]]) -> str:
    """The answer text of cited units, in the given order: consecutive sentences, and
    consecutive list items, one per line (a paragraph, a list); a code block, and a
    change between prose and list, starts a new block (blank line)."""
    blocks: list[list[str]] = []
    last_kind = ""
    for unit, number in quoted:
        line = cite_unit(unit, number)
        if unit.kind == last_kind and unit.kind != "code" and blocks:
            blocks[-1].append(line)
        else:
            blocks.append([line])
        last_kind = unit.kind
    return "\n\n".join("\n".join(b) for b in blocks)


class ExtractiveAnswerStage:
    def __init__(
        self,
        embedder: Embedder | None,
        *,
        max_sentences: int = 3,
        per_source: int = 2,
        from_sources: int = 8,
        max_embedded: int = 32,
        min_score: float = 0.0,
        passages: PassageVectors | None = None,
    ) -> None:
        """``passages``: the chunk-text vectors shared with the citation check (one of
        this stage's own when None). ``min_score``: the score a sentence needs to be
        quoted; nothing is answered when no sentence has it (0 = always answer)."""
        self._embedder = embedder
        if passages is None and embedder is not None:
            passages = PassageVectors(embedder)
        self._passages = passages
        self._max_sentences = max_sentences
        self._per_source = per_source
        self._from_sources = from_sources
        self._max_embedded = max_embedded
        self._min_score = min_score

    async def _semantic(
        self, query: str, candidates: Sequence[_Candidate]
    ) -> list[float] | None:
        if self._embedder is None or self._passages is None:
            return None
        texts = [x.scored for x in candidates]
        q, got = await asyncio.gather(
            self._embedder.embed([query], query=True),
            self._passages.get(texts),  # chunk text: kept
        )
        qv = q[0].dense
        if qv is None:
            return None
        vectors = (await self._passages.of_model(got, texts, model_of(q[0]))).vectors
        return [cosine(qv, vectors[t]) if t in vectors else 0.0 for t in texts]

    async def run(self, inp: ExtractiveInput) -> tuple[str, StageReport]:
        """The cited extractive answer: "" when no excerpt has a usable unit, or
        FLAGGED_ONLY when only passages flagged by the injection screen had one."""
        started = time.perf_counter()
        top = inp.sources[: self._from_sources]
        # flagged passages are scored like the rest (to tell the reader when only they
        # matched) but never quoted
        candidates = [c for src in top for c in _candidates(src)]
        details = {"mode": "extractive", "sentences_considered": str(len(candidates))}
        flagged = [str(s.number) for s in top if s.candidate.injection_flagged]
        if flagged:
            details["flagged_not_quoted"] = ", ".join(flagged)

        def finish(answer: str) -> tuple[str, StageReport]:
            ms = (time.perf_counter() - started) * 1e3
            return answer, StageReport("answer", ms, True, inp.reason, inp.dependency, details)

        if not candidates:
            details["sentences"] = "0"
            return finish("")
        query_words = content_words(inp.query)
        lexical = [overlap(query_words, content_words(c.scored)) for c in candidates]
        if len(candidates) > self._max_embedded:
            # only the units sharing most words with the query are embedded (cost);
            # flagged ones last, since they are never quoted
            keep = sorted(
                range(len(candidates)), key=lambda i: (candidates[i].flagged, -lexical[i], i)
            )
            keep = sorted(keep[: self._max_embedded])
            candidates = [candidates[i] for i in keep]
            lexical = [lexical[i] for i in keep]
        try:
            semantic = await self._semantic(inp.query, candidates)
            details["scoring"] = "embedder + word overlap" if semantic else "word overlap"
        except GroundwireError as error:
            semantic = None
            details["scoring"] = f"word overlap (embedder unavailable: {error.message})"
        scores = [
            SEMANTIC_WEIGHT * semantic[i] + LEXICAL_WEIGHT * lexical[i]
            if semantic
            else lexical[i]
            for i in range(len(candidates))
        ]
        best = max(scores)
        details["best_score"] = f"{best:.3f}"
        ranked = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))
        if semantic:  # a weak unit is never quoted; with none left, nothing is
            ranked = [i for i in ranked if scores[i] >= self._min_score]
            if not ranked:
                details["declined"] = f"best sentence score {best:.3f} < {self._min_score}"
        matched_flagged = any(candidates[i].flagged for i in ranked)
        ranked = [i for i in ranked if not candidates[i].flagged]
        chosen: list[int] = []
        per: dict[int, int] = {}
        for i in ranked:
            n = candidates[i].number
            if per.get(n, 0) >= self._per_source:
                continue
            chosen.append(i)
            per[n] = per.get(n, 0) + 1
            if len(chosen) == self._max_sentences:
                break
        # read in the excerpts' order: by source number, then position in the chunk
        chosen.sort(key=lambda i: (candidates[i].number, candidates[i].unit.position))
        answer = compose([(candidates[i].unit, candidates[i].number) for i in chosen])
        details["sentences"] = str(len(chosen))
        details["scores"] = ", ".join(f"{scores[i]:.3f}" for i in chosen)
        if not chosen and matched_flagged:
            details["declined"] = "only passages flagged as possible injection matched"
            return finish(FLAGGED_ONLY)
        return finish(answer)
