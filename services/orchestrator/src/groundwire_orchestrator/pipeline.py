"""Composes the stages into the two operations the orchestrator serves."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from groundwire_core.errors import InvalidInput
from groundwire_orchestrator.domain import Candidate, FieldFilter, SearchOutcome, StageReport
from groundwire_orchestrator.stages.extractive import extractive_answer
from groundwire_orchestrator.stages.rerank import RerankStage
from groundwire_orchestrator.stages.retrieval import RetrievalInput, RetrievalStage

MAX_QUERY_CHARS = 4000


@dataclass(frozen=True)
class RetrievalDone:
    sources: tuple[Candidate, ...]


@dataclass(frozen=True)
class AnswerDelta:
    text: str


@dataclass(frozen=True)
class StagesDone:
    stages: tuple[StageReport, ...]


@dataclass(frozen=True)
class AnswerDone:
    mode: str  # "generated" | "extractive" | "declined"
    answer: str


AskEvent = RetrievalDone | AnswerDelta | StagesDone | AnswerDone


def validate_query(query: str) -> str:
    """The stripped query; raises InvalidInput when empty or too long."""
    stripped = query.strip()
    if not stripped:
        raise InvalidInput("the query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"the query has {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    return stripped


class Pipeline:
    def __init__(self, retrieval: RetrievalStage, rerank: RerankStage, *, candidates: int) -> None:
        self._retrieval = retrieval
        self._rerank = rerank
        self._candidates = candidates

    async def search(
        self,
        collection: str,
        query: str,
        *,
        limit: int,
        filters: Sequence[FieldFilter] = (),
        rerank: bool = True,
    ) -> SearchOutcome:
        """Ranked candidates for ``query``. Raises InvalidInput, NotFound, Unavailable."""
        query = validate_query(query)
        found, retrieval_report = await self._retrieval.run(
            RetrievalInput(collection, query, query, filters, limit=max(limit, self._candidates))
        )
        stages = [retrieval_report]
        if rerank:
            found, rerank_report = await self._rerank.run(query, found, keep=limit)
            stages.append(rerank_report)
        return SearchOutcome(tuple(found[:limit]), tuple(stages))

    async def ask(
        self, collection: str, question: str, *, filters: Sequence[FieldFilter] = ()
    ) -> AsyncIterator[AskEvent]:
        """Answers ``question``: sources first, then the answer text, stages, done."""
        outcome = await self.search(collection, question, limit=10, filters=filters)
        yield RetrievalDone(outcome.candidates)
        answer = extractive_answer(outcome.candidates)
        stages = (
            *outcome.stages,
            StageReport("answer", 0.0, True, "no LLM is configured: extractive answer", "llm"),
        )
        if answer:
            yield AnswerDelta(answer)
        yield StagesDone(stages)
        yield AnswerDone("extractive" if answer else "declined", answer)
