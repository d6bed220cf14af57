"""The extractive answer, used when no LLM is configured (or the LLM failed): the
sentences of the top excerpts that best match the question, quoted verbatim, each
with its [n] citation, and labelled extractive (mode and stage report).

Sentences are scored against the query with the embedder (cosine, query vs passage
sentences) blended with the share of the query's content words they contain; with
the embedder down, the word share alone. Because every sentence is quoted from the
chunk it cites, each citation verifies.

A sentence scoring under ``min_score`` (embedder scoring only) is never quoted; when
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
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from groundwire_core.errors import GroundwireError
from groundwire_orchestrator.clients.interfaces import Embedder
from groundwire_orchestrator.domain import NumberedSource, StageReport
from groundwire_orchestrator.stages.passages import PassageVectors, model_of
from groundwire_orchestrator.stages.text import chunk_body, content_words, overlap, prose_sentences

SEMANTIC_WEIGHT = 0.7
LEXICAL_WEIGHT = 0.3


@dataclass(frozen=True)
class ExtractiveInput:
    query: str
    sources: Sequence[NumberedSource]
    reason: str
    """Why the answer is extractive, for the stage report."""
    dependency: str = "llm"


@dataclass(frozen=True)
class _Sentence:
    number: int
    position: int
    text: str


def _candidate_sentences(src: NumberedSource) -> list[_Sentence]:
    out = []
    for i, sentence in enumerate(prose_sentences(chunk_body(src.candidate))):
        if len(sentence.split()) >= 5 and len(sentence) <= 400 and sentence[-1] not in ":;,":
            out.append(_Sentence(src.number, i, sentence))
    return out


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def cite(sentence: str, number: int) -> str:
    """``sentence`` with ``[number]`` before its final punctuation."""
    body = sentence.rstrip()
    end = len(body)
    while end and body[end - 1] in ".!?\"')\u201d\u2019":
        end -= 1
    tail = body[end:] or "."
    return f"{body[:end]} [{number}]{tail}"


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
        self, query: str, sentences: Sequence[_Sentence]
    ) -> list[float] | None:
        if self._embedder is None or self._passages is None:
            return None
        texts = [x.text for x in sentences]
        q, got = await asyncio.gather(
            self._embedder.embed([query], query=True),
            self._passages.get(texts),  # chunk sentences: kept
        )
        qv = q[0].dense
        if qv is None:
            return None
        vectors = (await self._passages.of_model(got, texts, model_of(q[0]))).vectors
        return [_cosine(qv, vectors[x.text]) if x.text in vectors else 0.0 for x in sentences]

    async def run(self, inp: ExtractiveInput) -> tuple[str, StageReport]:
        """The cited extractive answer ("" when no excerpt has a usable sentence)."""
        started = time.perf_counter()
        sentences = [
            s for src in inp.sources[: self._from_sources] for s in _candidate_sentences(src)
        ]
        details = {"mode": "extractive", "sentences_considered": str(len(sentences))}
        if not sentences:
            details["sentences"] = "0"
            ms = (time.perf_counter() - started) * 1e3
            return "", StageReport("answer", ms, True, inp.reason, inp.dependency, details)
        query_words = content_words(inp.query)
        lexical = [overlap(query_words, content_words(s.text)) for s in sentences]
        if len(sentences) > self._max_embedded:
            # only the sentences sharing most words with the query are embedded (cost)
            keep = sorted(range(len(sentences)), key=lambda i: (-lexical[i], i))
            keep = sorted(keep[: self._max_embedded])
            sentences = [sentences[i] for i in keep]
            lexical = [lexical[i] for i in keep]
        try:
            semantic = await self._semantic(inp.query, sentences)
            details["scoring"] = "embedder + word overlap" if semantic else "word overlap"
        except GroundwireError as error:
            semantic = None
            details["scoring"] = f"word overlap (embedder unavailable: {error.message})"
        scores = [
            SEMANTIC_WEIGHT * semantic[i] + LEXICAL_WEIGHT * lexical[i]
            if semantic
            else lexical[i]
            for i in range(len(sentences))
        ]
        best = max(scores)
        details["best_score"] = f"{best:.3f}"
        ranked = sorted(range(len(sentences)), key=lambda i: (-scores[i], i))
        if semantic:  # a weak sentence is never quoted; with none left, nothing is
            ranked = [i for i in ranked if scores[i] >= self._min_score]
            if not ranked:
                details["declined"] = f"best sentence score {best:.3f} < {self._min_score}"
        chosen: list[int] = []
        per: dict[int, int] = {}
        for i in ranked:
            n = sentences[i].number
            if per.get(n, 0) >= self._per_source:
                continue
            chosen.append(i)
            per[n] = per.get(n, 0) + 1
            if len(chosen) == self._max_sentences:
                break
        # read in the excerpts' order: by source number, then position in the chunk
        chosen.sort(key=lambda i: (sentences[i].number, sentences[i].position))
        answer = " ".join(cite(sentences[i].text, sentences[i].number) for i in chosen)
        details["sentences"] = str(len(chosen))
        details["scores"] = ", ".join(f"{scores[i]:.3f}" for i in chosen)
        ms = (time.perf_counter() - started) * 1e3
        return answer, StageReport("answer", ms, True, inp.reason, inp.dependency, details)
