"""Passage vectors: embedded in batches, kept in a bounded LRU, shared by the extractive
answer and the citation check."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import pytest

from groundwire_core.errors import Unavailable
from groundwire_orchestrator.clients.interfaces import TextEmbedding
from groundwire_orchestrator.domain import NumberedSource, Verification
from groundwire_orchestrator.stages.citations import CitationVerifier
from groundwire_orchestrator.stages.extractive import ExtractiveAnswerStage, ExtractiveInput
from groundwire_orchestrator.stages.passages import PassageVectors
from tests.unit.orchestrator.doubles import DIMS, FakeEmbedder, bag_vector, chunk


async def test_kept_texts_are_not_embedded_again() -> None:
    embedder = FakeEmbedder()
    passages = PassageVectors(embedder)
    first = await passages.get(["a chunk sentence", "a claim"], keep=["a chunk sentence"])
    assert first == {t: bag_vector(t) for t in ("a chunk sentence", "a claim")}
    embedder.calls.clear()
    second = await passages.get(["a chunk sentence", "a claim"], keep=["a chunk sentence"])
    assert second.keys() == first.keys()
    for text, vector in second.items():  # the cache keeps float32
        assert list(vector) == pytest.approx(list(first[text]), abs=1e-7)
    cached = second["a chunk sentence"]
    assert isinstance(cached, array) and cached.itemsize == 4, "4 bytes a dimension, not 32"
    assert embedder.embedded == ["a claim"], "the kept sentence came from the cache"
    assert all(query is False for _, query in embedder.calls), "passage vectors, not query ones"


async def test_every_text_is_kept_by_default_and_duplicates_are_embedded_once() -> None:
    embedder = FakeEmbedder()
    passages = PassageVectors(embedder)
    await passages.get(["one two", "three four", "one two"])
    assert embedder.embedded == ["one two", "three four"]
    assert len(passages) == 2


async def test_misses_go_out_in_batches() -> None:
    embedder = FakeEmbedder()
    passages = PassageVectors(embedder, batch=64)
    texts = [f"sentence number {i}" for i in range(130)]
    vectors = await passages.get(texts)
    assert [len(texts) for texts, _ in embedder.calls] == [64, 64, 2]
    assert list(vectors) == texts


async def test_the_least_recently_used_entries_go_first() -> None:
    embedder = FakeEmbedder()
    passages = PassageVectors(embedder, entries=2)
    await passages.get(["old one"])
    await passages.get(["middle one"])
    await passages.get(["old one"])  # used again: now the newest
    await passages.get(["new one"])  # evicts "middle one"
    assert len(passages) == 2
    embedder.calls.clear()
    await passages.get(["old one", "middle one", "new one"])
    assert embedder.embedded == ["middle one"]


async def test_texts_without_a_dense_vector_are_left_out_and_not_kept() -> None:
    class NoDense(FakeEmbedder):
        async def embed(
            self, texts: Sequence[str], *, query: bool, outputs: Sequence[str] = ("dense",)
        ) -> list[TextEmbedding]:
            self.calls.append((tuple(texts), query))
            return [TextEmbedding(None, None, 1, False) for _ in texts]

    passages = PassageVectors(NoDense())
    assert await passages.get(["anything"]) == {}
    assert len(passages) == 0


async def test_embedder_errors_reach_the_caller_and_nothing_is_kept() -> None:
    passages = PassageVectors(FakeEmbedder(down=True))
    with pytest.raises(Unavailable):
        await passages.get(["a sentence"])
    assert len(passages) == 0


async def test_the_citation_check_reuses_what_the_extractive_answer_embedded() -> None:
    embedder = FakeEmbedder()
    passages = PassageVectors(embedder)
    source = NumberedSource(
        1,
        chunk(
            1,
            "Rate limits are enforced per API key by the gateway. "
            "Each key may send sixty requests per minute to the API.",
        ),
    )
    extractive = ExtractiveAnswerStage(embedder, passages=passages)
    await extractive.run(ExtractiveInput("how many requests may a key send", [source], "no LLM"))
    chunk_sentences = set(embedder.embedded) - {"how many requests may a key send"}
    assert "Each key may send sixty requests per minute to the API." in chunk_sentences

    embedder.calls.clear()
    verifier = CitationVerifier(embedder, threshold=0.3, passages=passages)
    claim = "Every key can make sixty calls a minute [1]."
    result = await verifier.run(claim, lambda n: source if n == 1 else None)
    assert result.citations[0].status is not Verification.UNCHECKED
    assert not chunk_sentences & set(embedder.embedded), "the chunk's sentences were cached"


class SwappableEmbedder(FakeEmbedder):
    """The fake's vectors, widened to ``width`` (zeros appended): a redeployed embedder
    serving a model of another width."""

    def __init__(self) -> None:
        super().__init__()
        self.width = DIMS

    async def embed(
        self, texts: Sequence[str], *, query: bool, outputs: Sequence[str] = ("dense",)
    ) -> list[TextEmbedding]:
        out = await super().embed(texts, query=query, outputs=outputs)
        pad = (0.0,) * (self.width - DIMS)
        return [TextEmbedding(e.dense + pad if e.dense else None, None, 1, False) for e in out]


async def test_a_caller_with_vectors_of_another_width_drops_the_cache() -> None:
    embedder = SwappableEmbedder()
    passages = PassageVectors(embedder)
    await passages.get(["kept sentence one", "kept sentence two"])
    embedder.width = DIMS + 8
    embedder.calls.clear()
    texts = ["kept sentence one"]
    vectors = await passages.of_width(await passages.get(texts), texts, DIMS + 8)
    assert embedder.embedded == ["kept sentence one"], "re-embedded under the new model"
    assert len(vectors["kept sentence one"]) == DIMS + 8
    assert len(passages) == 1, "the other old vector is gone too"


async def test_both_stages_survive_an_embedder_model_change() -> None:
    embedder = SwappableEmbedder()
    passages = PassageVectors(embedder)
    source = NumberedSource(
        1, chunk(1, "Each key may send sixty requests per minute to the API. Keys expire.")
    )
    extractive = ExtractiveAnswerStage(embedder, passages=passages)
    verifier = CitationVerifier(embedder, threshold=0.3, passages=passages)
    question = ExtractiveInput("how many requests may a key send", [source], "no LLM")
    claim = "Every key can make sixty calls a minute [1]."
    await extractive.run(question)
    before = await verifier.run(claim, lambda n: source)

    embedder.width = DIMS + 8  # redeployed with a wider model; same texts, new vectors
    text, report = await extractive.run(question)
    assert "sixty requests per minute" in text
    assert report.details["scoring"] == "embedder + word overlap"
    after = await verifier.run(claim, lambda n: source)
    assert after.citations[0].status is before.citations[0].status
    assert after.citations[0].support == pytest.approx(before.citations[0].support)
