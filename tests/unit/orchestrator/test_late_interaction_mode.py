"""LATE_INTERACTION decides, per search, whether the retrieval stage asks the embedder
for the query's ColBERT vectors and the retriever for MaxSim rescoring (with
``when_no_rerank``: also when the rerank stage would shed the cross-encoder under
load); the retriever's late-interaction report shows in the retrieval stage's report."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Literal

import pytest

from groundwire_core.clients.embedder import EmbedderInfo, TextEmbedding
from groundwire_orchestrator.clients.reranker import RerankerLoad
from groundwire_orchestrator.clients.retriever import HybridQuery, PathSummary
from groundwire_orchestrator.domain import Candidate
from groundwire_orchestrator.stages.rerank import RerankStage
from groundwire_orchestrator.stages.retrieval import (
    RetrievalInput,
    RetrievalParams,
    RetrievalStage,
)
from tests.unit.orchestrator.doubles import FakeEmbedder, FakeReranker, FakeRetriever, chunk

QUERY = RetrievalInput("docs", "rate limits per key", "rate limits per key")
Mode = Literal["off", "when_no_rerank", "always"]


class ColbertEmbedder(FakeEmbedder):
    """A model with the multi_vector output (BGE-M3's shape: one vector per token)."""

    def __init__(self, *, multi: bool = True) -> None:
        super().__init__()
        self.multi = multi
        self.outputs_asked: list[tuple[str, ...]] = []

    async def info(self) -> EmbedderInfo:
        info = await super().info()
        if not self.multi:
            return info
        return replace(info, outputs=info.outputs | {"multi_vector"}, multi_vector_dims=2)

    async def embed(
        self, texts: Sequence[str], *, query: bool, outputs: Sequence[str] = ("dense",)
    ) -> list[TextEmbedding]:
        self.outputs_asked.append(tuple(outputs))
        out = await super().embed(texts, query=query, outputs=outputs)
        if "multi_vector" not in outputs:
            return out
        return [
            replace(e, multi_vector=tuple((float(i), 1.0) for i in range(len(t.split()))))
            for e, t in zip(out, texts, strict=True)
        ]


class ReportingRetriever(FakeRetriever):
    """Answers like the retriever does when asked for late interaction."""

    async def search(self, query: HybridQuery) -> tuple[list[Candidate], list[PathSummary]]:
        found, paths = await super().search(query)
        if query.late_interaction_depth:
            paths = [*paths, PathSummary("late_interaction", 0.4, len(found), False, "")]
        return found, paths


def _stage(
    mode: Mode,
    *,
    reranker: bool = True,
    multi: bool = True,
    will_skip: Callable[[], Awaitable[bool]] | None = None,
) -> tuple[RetrievalStage, ColbertEmbedder, ReportingRetriever]:
    embedder = ColbertEmbedder(multi=multi)
    retriever = ReportingRetriever(chunks=[chunk(1, "Rate limits apply per API key.")])
    params = RetrievalParams(
        dense_floor=0.05,
        late_interaction=mode,
        late_interaction_depth=30,
        reranker_configured=reranker,
        rerank_will_skip=will_skip,
    )
    return RetrievalStage(embedder, retriever, params), embedder, retriever


@pytest.mark.parametrize(
    ("mode", "rerank", "reranker", "expected"),
    [
        ("off", False, False, False),
        ("always", True, True, True),
        ("when_no_rerank", True, True, False),
        ("when_no_rerank", False, True, True),  # the request turns rerank off
        ("when_no_rerank", True, False, True),  # no reranker configured
    ],
)
async def test_the_mode_decides_per_search(
    mode: Mode, rerank: bool, reranker: bool, expected: bool
) -> None:
    retrieval, embedder, retriever = _stage(mode, reranker=reranker)
    _, report = await retrieval.run(replace(QUERY, rerank=rerank))
    query = retriever.queries[-1]
    assert ("multi_vector" in embedder.outputs_asked[-1]) is expected
    if expected:
        assert query.late_interaction_depth == 30
        assert len(query.multi) == len(QUERY.dense_query.split())  # one vector per token
        assert report.details["late_interaction_hits"] == "1"
        assert "late_interaction_ms" in report.details
    else:
        assert query.late_interaction_depth == 0
        assert "late_interaction_ms" not in report.details


async def test_a_model_without_multi_vectors_is_not_asked_for_them() -> None:
    retrieval, embedder, retriever = _stage("always", multi=False)
    await retrieval.run(QUERY)
    assert "multi_vector" not in embedder.outputs_asked[-1]
    # the retriever is still asked and reports it skipped (no query multi-vector)
    assert retriever.queries[-1].late_interaction_depth == 30
    assert retriever.queries[-1].multi == ()


@pytest.mark.parametrize(
    ("load", "expected"),
    [
        (RerankerLoad(True, 0, 2.0, 256), ""),  # idle: the cross-encoder runs
        (
            RerankerLoad(True, 40, 2.0, 256),  # 40 queued x 50 x 2 ms >> 500 ms budget
            "the reranker would be skipped (down or overloaded)",
        ),
        (RerankerLoad(False, 0, 0.0, 256), "the reranker would be skipped (down or overloaded)"),
    ],
)
async def test_when_no_rerank_follows_the_rerank_stage_under_load(
    load: RerankerLoad, expected: str
) -> None:
    reranker = FakeReranker(load_value=load)
    rerank = RerankStage(
        reranker, candidates=50, keep=20, threshold=0.5, timeout_s=1.0, budget_ms=500.0
    )
    retrieval, _, retriever = _stage("when_no_rerank", will_skip=rerank.will_skip)
    _, report = await retrieval.run(QUERY)
    assert report.details.get("late_interaction_why", "") == expected
    assert (retriever.queries[-1].late_interaction_depth == 30) is bool(expected)
