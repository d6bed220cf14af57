"""Late interaction on both engines with the tiny real-architecture BGE-M3 model.

The tiny checkpoint (XLM-R, 2 layers, hidden 32, BGE-M3's ColBERT head, random
weights) is exported by the project's own build command and run by the embedder's
ONNX encoder; its dense and ColBERT vectors are stored through the real ingest path
(stage + publish) in ``EdgeStore`` and ``QdrantServerStore`` (local mode). The MaxSim
order is computed here, independently, with numpy on the encoder's own vectors. A
random model proves mechanics only: nothing here says the rescoring helps quality.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import numpy as np
import pytest

from groundwire.common.v1 import common_pb2
from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.clients.embedder import EmbedderClient
from groundwire_core.errors import InvalidInput
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.server import serving
from groundwire_embedder.export import build_profile
from groundwire_embedder.export.tiny import build_tiny_bge_m3
from groundwire_embedder.models import OnnxEncoder
from groundwire_embedder.models.onnx_backend import EncoderOutput
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_retriever.domain import (
    Chunk,
    ChunkVectors,
    CollectionSpec,
    SearchPath,
    SearchQuery,
    SearchResult,
)
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings
from groundwire_retriever.store import EdgeStore, QdrantServerStore, VectorStore

NS = uuid.UUID("0b7d5c1e-2f3a-4e5b-9c8d-7a6f5e4d3c2b")
TEXTS = [
    f"{topic} notes, part {n}: how the {topic} behaves under load and how to tune it"
    for n, topic in enumerate(
        (
            "river gauge",
            "packet router",
            "thread pool",
            "kernel driver",
            "garden hose",
            "castle tower",
            "ocean buoy",
            "bridge cable",
            "cache eviction",
            "window frame",
            "signal filter",
            "forest trail",
        )
    )
]
QUERY = "tuning a router cache under load"
DEPTH = 8


def _dense(angle: float) -> tuple[float, ...]:
    """A unit vector at ``angle`` radians from the first axis, in the model's 32 dims."""
    return (float(np.cos(angle)), float(np.sin(angle))) + (0.0,) * 30


# The random model's dense vectors of these templated texts are all within float32
# noise of each other (cosines ~1 - 3e-6), so an engine's dense order of them changes
# from one search to the next. The store tests use these instead: the dense order is
# the text order, a clear 0.1 rad apart; the ColBERT vectors still come from the model.
QUERY_DENSE = _dense(0.0)
DOC_DENSE = [_dense(0.1 * i) for i in range(len(TEXTS))]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BGE-M3 exported by the project's own build command."""
    source = build_tiny_bge_m3(tmp_path_factory.mktemp("checkpoints") / "tiny-bge-m3")
    report = build_profile("bge-m3", tmp_path_factory.mktemp("models") / "bge-m3", source=source)
    return Path(report.out_dir)


@pytest.fixture(scope="module")
def encoded(model_dir: Path) -> tuple[int, EncoderOutput, EncoderOutput]:
    """(ColBERT width, the documents' outputs, the query's) from the tiny model."""
    encoder = OnnxEncoder(model_dir, intra_op_threads=1)
    encoder.load()
    dims = encoder.manifest.multi_vector_dims
    assert dims > 0 and "multi_vector" in encoder.manifest.outputs
    return dims, encoder.encode(TEXTS), encoder.encode([QUERY])


@pytest.fixture(params=["edge", "qdrant"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    made: VectorStore = (
        EdgeStore(tmp_path / "edge") if request.param == "edge" else QdrantServerStore(":memory:")
    )
    made.open()
    yield made
    made.close()


def _spec(dims: int, name: str = "docs") -> CollectionSpec:
    return CollectionSpec(name=name, dense_dims=32, multi_vector_dims=dims)


def _ingest(store: VectorStore, spec: CollectionSpec, docs: EncoderOutput, multi: bool) -> None:
    store.create_collection(spec)
    for i, text in enumerate(TEXTS):
        assert docs.multi_vector is not None
        chunk = Chunk(chunk_id=str(uuid.uuid5(NS, str(i))), source_id=f"s{i}", text=text)
        vectors = ChunkVectors(
            dense=DOC_DENSE[i],
            multi=tuple(tuple(float(x) for x in row) for row in docs.multi_vector[i])
            if multi
            else None,
        )
        staged = store.stage_source(spec.name, chunk.source_id, [(chunk, vectors)])
        store.publish_source(staged)


def _search(
    store: VectorStore, name: str, query: EncoderOutput, depth: int, *, with_multi: bool = True
) -> SearchResult:
    assert query.multi_vector is not None
    return store.search(
        name,
        SearchQuery(
            text=QUERY,
            dense=QUERY_DENSE,
            multi=tuple(tuple(float(x) for x in r) for r in query.multi_vector[0])
            if with_multi
            else None,
            # dense alone: the texts share a template, so BM25 scores tie, and engines
            # may return tied hits in either order from one search to the next
            paths=frozenset({SearchPath.DENSE}),
            dense_floor=-1.0,  # every document is a candidate: the order is what is tested
            limit=len(TEXTS),
            late_interaction_depth=depth,
        ),
    )


def _numpy_max_sim(query: np.ndarray, doc: np.ndarray) -> float:
    q = query / np.linalg.norm(query, axis=1, keepdims=True)
    d = doc / np.linalg.norm(doc, axis=1, keepdims=True)
    return float(np.einsum("id,jd->ij", q, d).max(axis=1).sum())


def test_maxsim_reorders_the_fused_head(
    store: VectorStore, encoded: tuple[int, EncoderOutput, EncoderOutput]
) -> None:
    dims, docs, query = encoded
    assert docs.multi_vector is not None and query.multi_vector is not None
    _ingest(store, _spec(dims), docs, multi=True)

    fused = [h.chunk.text for h in _search(store, "docs", query, 0).hits]
    result = _search(store, "docs", query, DEPTH)
    assert result.late_interaction is not None and not result.late_interaction.skipped
    assert result.late_interaction.rescored == DEPTH

    by_text = {
        t: _numpy_max_sim(query.multi_vector[0], docs.multi_vector[i]) for i, t in enumerate(TEXTS)
    }
    expected_head = sorted(fused[:DEPTH], key=lambda t: by_text[t], reverse=True)
    got = [h.chunk.text for h in result.hits]
    assert got[:DEPTH] == expected_head
    assert got[DEPTH:] == fused[DEPTH:]  # past the depth the fused order stands
    assert expected_head != fused[:DEPTH]  # the rescoring did move something


def test_skipped_without_multi_vectors(
    store: VectorStore, encoded: tuple[int, EncoderOutput, EncoderOutput]
) -> None:
    dims, docs, query = encoded
    _ingest(store, CollectionSpec(name="plain", dense_dims=32), docs, multi=False)
    fused = [h.chunk.text for h in _search(store, "plain", query, 0).hits]
    result = _search(store, "plain", query, DEPTH)
    assert result.late_interaction is not None and result.late_interaction.skipped
    assert "keeps no multi-vectors" in result.late_interaction.reason
    assert [h.chunk.text for h in result.hits] == fused

    # a collection that keeps them, searched without the query's: skipped, fused order
    _ingest(store, _spec(dims), docs, multi=True)
    result = _search(store, "docs", query, DEPTH, with_multi=False)
    assert result.late_interaction is not None and result.late_interaction.skipped
    assert result.late_interaction.reason == "the query has no multi-vector"


def test_multi_vector_refused_where_not_kept(
    store: VectorStore, encoded: tuple[int, EncoderOutput, EncoderOutput]
) -> None:
    _, docs, _ = encoded
    with pytest.raises(InvalidInput, match="keeps no multi-vectors"):
        _ingest(store, CollectionSpec(name="plain", dense_dims=32), docs, multi=True)


@pytest.mark.parametrize(("engine", "keep"), [("edge", True), ("qdrant", True), ("edge", False)])
async def test_ingest_keeps_colbert_vectors_and_search_rescores_over_grpc(
    model_dir: Path, tmp_path: Path, engine: str, keep: bool
) -> None:
    """The whole path: the real embedder serving the tiny BGE-M3, the real retriever
    (Ingest embeds the chunks with their ColBERT vectors, Search rescores), both over
    gRPC; the expected order is MaxSim of the query's and each hit's own vectors,
    asked of the embedder separately and computed here. Without KEEP_MULTI_VECTORS (the
    default) nothing more is stored and the rescoring reports itself skipped."""
    docs = [
        retriever_pb2.Document(
            source_id=f"s{i}", filename=f"s{i}.md", content=f"# Note {i}\n\n{text}\n".encode()
        )
        for i, text in enumerate(TEXTS)
    ]
    async with AsyncExitStack() as stack:
        emb_settings = EmbedderSettings(port=0, model_dir=model_dir)
        emb_port = await stack.enter_async_context(
            serving(EmbedderService(emb_settings), emb_settings)
        )
        settings = RetrieverSettings(
            port=0,
            data_path=tmp_path / "data",
            qdrant_url=":memory:" if engine == "qdrant" else None,
            embedder_addr=f"127.0.0.1:{emb_port}",
            keep_multi_vectors=keep,
        )
        port = await stack.enter_async_context(serving(RetrieverService(settings), settings))
        channel = await stack.enter_async_context(create_channel(f"127.0.0.1:{port}"))
        emb_channel = await stack.enter_async_context(create_channel(f"127.0.0.1:{emb_port}"))
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        embedder = EmbedderClient(emb_channel)

        request = retriever_pb2.IngestRequest(
            collection="notes", documents=docs, create_collection=True
        )
        events = [e async for e in stub.Ingest(request)]
        assert events[-1].report.ingested == len(TEXTS)
        [q] = await embedder.embed([QUERY], query=True, outputs=("dense", "multi_vector"))
        assert q.dense is not None and q.multi_vector

        async def search(depth: int) -> retriever_pb2.SearchResponse:
            req = retriever_pb2.SearchRequest(
                collection="notes",
                text=QUERY,
                dense=common_pb2.DenseVector(values=q.dense or ()),
                dense_floor=-1.0,
                limit=len(TEXTS),
                late_interaction_depth=depth,
                # dense alone: BM25 scores tie on these templated texts, and tied
                # hits may come back in either order from one search to the next
                paths=[retriever_pb2.SEARCH_PATH_DENSE],
            )
            req.multi_vector.extend(common_pb2.DenseVector(values=v) for v in q.multi_vector)
            return await stub.Search(req)

        # The random model's dense vectors of these texts are within float32 noise of
        # each other, so the fused order changes between searches: every hit is rescored
        # here, and the MaxSim order alone is checked (the store tests above pin the
        # fused tail past the depth with separated vectors).
        depth = len(TEXTS)
        fused = [h.chunk.text for h in (await search(0)).hits]
        reply = await search(depth)
        if not keep:
            assert reply.late_interaction.skipped
            assert "keeps no multi-vectors" in reply.late_interaction.reason
            assert sorted(h.chunk.text for h in reply.hits) == sorted(fused)
            return
        assert reply.HasField("late_interaction") and not reply.late_interaction.skipped
        assert reply.late_interaction.rescored == depth
        got = [h.chunk.text for h in reply.hits]
        assert sorted(got) == sorted(fused)
        stored = await embedder.embed(got, query=False, outputs=("multi_vector",))
        query_matrix = np.array(q.multi_vector)
        scores = [_numpy_max_sim(query_matrix, np.array(e.multi_vector)) for e in stored]
        # in MaxSim order; the test's vectors come from another batch (other padding),
        # so two near-equal scores may swap: 1e-4 is a tie
        assert all(a >= b - 1e-4 for a, b in itertools.pairwise(scores)), scores
        # and that order is not the one the scores would give reversed: it did sort
        assert scores[0] > scores[-1] + 1e-3, scores


def test_out_of_range_values_are_refused(
    store: VectorStore, encoded: tuple[int, EncoderOutput, EncoderOutput]
) -> None:
    dims, docs, query = encoded
    with pytest.raises(InvalidInput, match="multi_vector_dims"):
        store.create_collection(CollectionSpec(name="bad", dense_dims=32, multi_vector_dims=-1))
    _ingest(store, _spec(dims), docs, multi=True)
    with pytest.raises(InvalidInput, match="late_interaction_depth"):
        _search(store, "docs", query, 1001)
    assert query.multi_vector is not None
    narrow = SearchQuery(text=QUERY, multi=((1.0, 0.0),), late_interaction_depth=4)
    with pytest.raises(InvalidInput, match="dimensions"):
        store.search("docs", narrow)
