"""Passage vectors: embedded in batches, kept in a bounded LRU, shared by the extractive
answer and the citation check."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import pytest

from groundwire_core.errors import Unavailable
from groundwire_orchestrator.clients.interfaces import TextEmbedding
from groundwire_orchestrator.domain import NumberedSource, Verification
from groundwire_orchestrator.stages.citations import CitationVerifier, VerificationInput
from groundwire_orchestrator.stages.extractive import ExtractiveAnswerStage, ExtractiveInput
from groundwire_orchestrator.text.passages import PassageVectors
from tests.unit.orchestrator.doubles import DIMS, FakeEmbedder, bag_vector, chunk


async def test_kept_texts_are_not_embedded_again() -> None:
    embedder = FakeEmbedder()
    passages = PassageVectors(embedder)
    texts, keep = ["a chunk sentence", "a claim"], ["a chunk sentence"]
    first = (await passages.get(texts, keep=keep)).vectors
    assert first == {t: bag_vector(t) for t in texts}
    embedder.calls.clear()
    second = (await passages.get(texts, keep=keep)).vectors
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
    vectors = (await passages.get(texts)).vectors
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
    assert (await passages.get(["anything"])).vectors == {}
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
    citations, _ = await verifier.run(
        VerificationInput(claim, lambda n: source if n == 1 else None)
    )
    assert citations[0].status is not Verification.UNCHECKED
    assert not chunk_sentences & set(embedder.embedded), "the chunk's sentences were cached"


class SwappableEmbedder(FakeEmbedder):
    """A redeployable embedder: ``model`` names the model it serves, whose vectors are the
    fake's widened to ``width`` (zeros appended) and, for ``"rotated"``, rotated by one
    dimension: a model of the same width whose vectors the old ones do not match."""

    def __init__(self) -> None:
        super().__init__()
        self.width = DIMS
        self.model = "fake/bag"
        self.models: list[str] = []  # per call, when set: replicas answering in turn

    async def embed(
        self, texts: Sequence[str], *, query: bool, outputs: Sequence[str] = ("dense",)
    ) -> list[TextEmbedding]:
        out = await super().embed(texts, query=query, outputs=outputs)
        model = self.models.pop(0) if self.models else self.model
        pad = (0.0,) * (self.width - DIMS)
        return [
            TextEmbedding(None, None, 1, False, model=model)
            if e.dense is None
            else TextEmbedding(_vector(e.dense + pad, model), None, 1, False, model=model)
            for e in out
        ]


def _vector(dense: tuple[float, ...], model: str) -> tuple[float, ...]:
    return dense[1:] + dense[:1] if model == "rotated" else dense


async def test_a_caller_with_vectors_of_another_width_drops_the_cache() -> None:
    embedder = SwappableEmbedder()
    passages = PassageVectors(embedder)
    await passages.get(["kept sentence one", "kept sentence two"])
    embedder.width = DIMS + 8
    embedder.calls.clear()
    texts = ["kept sentence one"]
    got = await passages.get(texts)
    assert embedder.embedded == [], "all cached: nothing told the cache of the new model"
    vectors = (await passages.of_model(got, texts, ("fake/bag", DIMS + 8))).vectors
    assert embedder.embedded == ["kept sentence one"], "re-embedded under the new model"
    assert len(vectors["kept sentence one"]) == DIMS + 8
    assert len(passages) == 1, "the other old vector is gone too"


async def test_a_new_model_of_the_same_width_is_told_by_its_id() -> None:
    embedder = SwappableEmbedder()
    passages = PassageVectors(embedder)
    await passages.get(["kept sentence one", "kept sentence two"])
    embedder.model = "rotated"
    embedder.calls.clear()
    got = await passages.get(["kept sentence one", "a new sentence"])
    assert got.model == ("rotated", DIMS)
    assert sorted(embedder.embedded) == ["a new sentence", "kept sentence one"]
    assert got.vectors["kept sentence one"] == _vector(bag_vector("kept sentence one"), "rotated")
    assert len(passages) == 2, "the old model's vectors are gone"


async def test_vectors_of_a_second_model_mid_rollout_are_left_out() -> None:
    embedder = SwappableEmbedder()
    passages = PassageVectors(embedder, batch=2)
    embedder.models = ["fake/bag", "rotated"]  # two replicas, each answering one batch
    got = await passages.get(["one", "two", "three"])
    assert got.model == ("fake/bag", DIMS)
    assert sorted(got.vectors) == ["one", "two"]
    assert len(passages) == 2, "the odd one is not kept either"


async def test_both_stages_survive_an_embedder_model_change() -> None:
    source = NumberedSource(
        1, chunk(1, "Each key may send sixty requests per minute to the API. Keys expire.")
    )
    question = ExtractiveInput("how many requests may a key send", [source], "no LLM")
    claim = "Every key can make sixty calls a minute [1]."

    async def run(embedder: SwappableEmbedder) -> tuple[str, float]:
        passages = PassageVectors(embedder)
        extractive = ExtractiveAnswerStage(embedder, passages=passages)
        verifier = CitationVerifier(embedder, threshold=0.3, passages=passages)
        text, report = await extractive.run(question)
        assert report.details["scoring"] == "embedder + word overlap"
        support = (await verifier.run(VerificationInput(claim, lambda n: source)))[0][0].support
        return text, support

    for width, model in ((DIMS + 8, "fake/bag"), (DIMS, "rotated")):
        embedder = SwappableEmbedder()
        passages = PassageVectors(embedder)
        extractive = ExtractiveAnswerStage(embedder, passages=passages)
        verifier = CitationVerifier(embedder, threshold=0.3, passages=passages)
        await extractive.run(question)  # the cache fills under the first model
        await verifier.run(VerificationInput(claim, lambda n: source))

        embedder.width, embedder.model = width, model  # redeployed: same texts, new vectors
        text, _ = await extractive.run(question)
        support = (await verifier.run(VerificationInput(claim, lambda n: source)))[0][0].support

        new = SwappableEmbedder()
        new.width, new.model = width, model
        fresh_text, fresh_support = await run(new)  # a cache that only saw the new model
        assert text == fresh_text, f"{model}/{width}"
        assert support == pytest.approx(fresh_support), f"{model}/{width}"
