"""A collection indexed with one embedder model, and an embedder redeployed with
another: ingest and search refuse to mix the two models' vectors (INVALID_ARGUMENT with
what to do) until a full re-index moves the collection to the new model. A real
EdgeStore; the embedder is a small fake whose model can change."""

from __future__ import annotations

import hashlib
import math
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from groundwire_core.clients.embedder import EmbedderInfo, TextEmbedding
from groundwire_core.errors import InvalidInput
from groundwire_retriever.domain import Chunk, ChunkVectors, SearchQuery
from groundwire_retriever.ingest.pipeline import DocumentInput
from groundwire_retriever.service import IngestSummary, RetrieverCore
from groundwire_retriever.store.edge import EdgeStore

DIMS = 8


class SwappableEmbedder:
    """Hashed bag-of-words vectors; ``model`` names the model it serves."""

    def __init__(self) -> None:
        self.model = "model-a"

    async def info(self) -> EmbedderInfo:
        return EmbedderInfo(self.model, "fake", DIMS, 512, frozenset({"dense"}))

    async def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) + 2 for t in texts]

    async def embed(
        self,
        texts: Sequence[str],
        *,
        query: bool,
        outputs: Sequence[str] = ("dense",),
        bulk: bool = False,
    ) -> list[TextEmbedding]:
        return [
            TextEmbedding(_vector(t), None, len(t.split()), False, model=self.model) for t in texts
        ]


def _vector(text: str) -> tuple[float, ...]:
    vec = [0.0] * DIMS
    for word in text.lower().split():
        vec[hashlib.blake2b(word.encode(), digest_size=2).digest()[0] % DIMS] += 1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return tuple(v / norm for v in vec)


@pytest.fixture
async def core(tmp_path: Path) -> AsyncIterator[tuple[RetrieverCore, SwappableEmbedder]]:
    embedder = SwappableEmbedder()
    core = RetrieverCore(EdgeStore(tmp_path / "data"), embedder)  # type: ignore[arg-type]
    await core.start()
    yield core, embedder
    await core.stop()


async def _ingest(core: RetrieverCore, *docs: DocumentInput, full: bool = False) -> IngestSummary:
    events = [e async for e in core.ingest("docs", docs, create=True, full_reindex=full)]
    summary = events[-1]
    assert isinstance(summary, IngestSummary)
    return summary


def _doc(source: str, text: str) -> DocumentInput:
    return DocumentInput(source, f"# {source}\n\n{text}\n".encode(), filename=f"{source}.md")


async def test_the_new_model_is_refused_until_a_full_reindex(
    core: tuple[RetrieverCore, SwappableEmbedder],
) -> None:
    retriever, embedder = core
    first = _doc("keys", "API keys are rotated every ninety days by the gateway.")
    await _ingest(retriever, first)
    assert (await retriever.spec("docs")).embedder_model == "model-a"

    embedder.model = "model-b"  # redeployed: same width, other vectors
    with pytest.raises(InvalidInput, match="indexed with model-a, but the embedder's vectors"):
        await _ingest(retriever, _doc("limits", "Each key may send sixty requests a minute."))
    with pytest.raises(InvalidInput, match="full_reindex"):
        await retriever.upsert(
            "docs", [(Chunk(chunk_id="", source_id="x", text="t"), ChunkVectors())]
        )
    query = SearchQuery(text="keys", dense=_vector("api keys"), embedder_model="model-b")
    with pytest.raises(InvalidInput, match="the query's vectors came from model-b"):
        await retriever.search("docs", query)
    assert (await retriever.describe("docs")).chunks == 1, "nothing of model-b was stored"

    summary = await _ingest(retriever, first, full=True)  # moves the collection over
    assert summary.chunks_written == 1
    assert (await retriever.spec("docs")).embedder_model == "model-b"
    assert (await retriever.search("docs", query)).hits
