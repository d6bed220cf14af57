"""The retrieval stage follows an embedder redeployed with another model: the learned
sparse output it asks for is re-read from the embedder's Info, not fixed at start; and
without the embedder it searches BM25 alone and reports the fallback."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from groundwire_core.clients.embedder import TextEmbedding
from groundwire_core.errors import DeadlineExceeded, InvalidInput, Overloaded, Unavailable
from groundwire_orchestrator.stages.retrieval import (
    RetrievalInput,
    RetrievalParams,
    RetrievalStage,
)
from tests.unit.orchestrator.doubles import FakeEmbedder, FakeRetriever, chunk

QUERY = RetrievalInput("docs", "rate limits per key", "rate limits per key")


def stage(embedder: FakeEmbedder) -> tuple[RetrievalStage, FakeRetriever]:
    retriever = FakeRetriever(chunks=[chunk(1, "Rate limits apply per API key.")])
    return RetrievalStage(embedder, retriever, RetrievalParams(dense_floor=0.05)), retriever


async def test_info_is_read_once_while_the_model_stays() -> None:
    embedder = FakeEmbedder(sparse=True)
    retrieval, retriever = stage(embedder)
    for _ in range(3):
        await retrieval.run(QUERY)
    assert embedder.info_calls == 1
    assert all(q.sparse is not None for q in retriever.queries)


async def test_a_model_without_sparse_replacing_one_with_it() -> None:
    embedder = FakeEmbedder(sparse=True)
    retrieval, retriever = stage(embedder)
    await retrieval.run(QUERY)
    embedder.sparse, embedder.model_id = False, "fake/dense-only"  # redeployed
    candidates, _ = await retrieval.run(QUERY)
    assert candidates, "answered, not INVALID_ARGUMENT for the sparse output"
    assert retriever.queries[-1].sparse is None and retriever.queries[-1].dense is not None
    await retrieval.run(QUERY)
    assert embedder.info_calls == 2, "asked again once, then kept"


async def test_a_model_with_sparse_replacing_one_without() -> None:
    embedder = FakeEmbedder(sparse=False)
    retrieval, retriever = stage(embedder)
    await retrieval.run(QUERY)
    assert retriever.queries[-1].sparse is None
    embedder.sparse, embedder.model_id = True, "fake/with-sparse"
    await retrieval.run(QUERY)
    assert retriever.queries[-1].sparse is not None, "the new model's sparse path is used"
    await retrieval.run(QUERY)
    assert embedder.info_calls == 2


async def test_invalid_input_that_no_redeploy_explains_reaches_the_caller() -> None:
    class Refusing(FakeEmbedder):
        async def embed(
            self, texts: Sequence[str], *, query: bool, outputs: Sequence[str] = ("dense",)
        ) -> list[TextEmbedding]:
            raise InvalidInput("texts: the query is empty")

    retrieval, _ = stage(Refusing())
    with pytest.raises(InvalidInput, match="the query is empty"):
        await retrieval.run(QUERY)


async def test_the_search_names_the_model_that_made_the_query_vectors() -> None:
    embedder = FakeEmbedder()
    retrieval, retriever = stage(embedder)
    await retrieval.run(QUERY)
    assert retriever.queries[-1].embedder_model == "fake/bag"


@pytest.mark.parametrize(
    "error",
    [
        Unavailable("connection refused", dependency="embedder"),
        DeadlineExceeded("Deadline Exceeded", dependency="embedder"),
        Overloaded("queue full", retry_after_s=1.0, dependency="embedder"),
    ],
)
async def test_without_the_embedder_bm25_alone_answers_and_says_so(error: Exception) -> None:
    class Failing(FakeEmbedder):
        async def embed(
            self, texts: Sequence[str], *, query: bool, outputs: Sequence[str] = ("dense",)
        ) -> list[TextEmbedding]:
            raise error

    retrieval, retriever = stage(Failing())
    candidates, report = await retrieval.run(QUERY)
    assert [c.chunk_id for c in candidates] == ["c1"], "the lexical match, not a 503"
    sent = retriever.queries[-1]
    assert sent.paths == ("bm25",) and sent.dense is None and sent.sparse is None
    assert sent.embedder_model == ""
    assert report.fallback and report.dependency == "embedder"
    assert report.reason.endswith(": BM25 only") and str(error) in report.reason
    assert report.details["dense_input"] == "none"


async def test_with_the_embedder_every_path_runs_and_nothing_falls_back() -> None:
    retrieval, retriever = stage(FakeEmbedder())
    _, report = await retrieval.run(QUERY)
    assert retriever.queries[-1].paths == () and retriever.queries[-1].dense is not None
    assert not report.fallback and report.reason == "" and report.dependency == ""


async def test_the_retrievers_own_failure_still_reaches_the_caller() -> None:
    retrieval, retriever = stage(FakeEmbedder(down=True))
    retriever.down = True
    with pytest.raises(Unavailable) as caught:
        await retrieval.run(QUERY)
    assert caught.value.dependency == "retriever"
