"""Acceptance (issue #21, spans): each citation carries its chunk's range in the
document, and every span points at text that exists.

Through the real gRPC OrchestratorService with no LLM (an extractive answer), the
real MiniLM embedder and the real retriever (embedded Qdrant), a multi-chunk document
ingested for real: the source read back (ReadSource) and joined as the document text
(``groundwire_core.document_text``) holds the cited chunk's text at ``chunk_span``;
``answer_span`` is the citing sentence in the answer, ``source_span`` a range of the
chunk's text, and that range shifted by ``chunk_span`` is the same text in the
document. The MCP ``read_document`` text is the same joined text (one helper).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from groundwire.orchestrator.v1 import orchestrator_pb2, orchestrator_pb2_grpc
from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.document_text import join_chunks
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.server import serving
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_orchestrator.server import OrchestratorService
from groundwire_orchestrator.settings import OrchestratorSettings
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings

pytestmark = pytest.mark.asyncio(loop_scope="module")

pb = orchestrator_pb2

# Four sections on unrelated subjects: with small chunks each is a chunk of its own,
# so the cited one (the glacier section, third) starts well inside the document.
HANDBOOK = """\
# Field station handbook

## Arrival

Visitors sign the logbook at the gate cabin and collect a radio before walking to the \
bunkhouse. The cook serves dinner at seven, and late arrivals find soup on the stove.

## Water

Drinking water comes from the spring above the camp; boil it for one minute before \
use. The rain barrels supply the washing station only and are drained in October.

## Glacier measurements

Glacier stakes are read every Tuesday at dawn, when the ice surface is still frozen \
hard. Each stake's exposed length is written in the orange notebook, and the readings \
are radioed to the valley office before noon.

## Departure

Return the radio to the gate cabin, sweep the bunkhouse floor, and close every \
shutter against the wind before you leave.
"""
QUESTION = "When are the glacier stakes read and where are the readings written?"


@dataclass
class Cluster:
    orchestrator: int
    retriever: int


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def cluster(
    minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Cluster]:
    async with AsyncExitStack() as stack:
        embedder_settings = EmbedderSettings(port=0, model_dir=minilm_dir)
        embedder = await stack.enter_async_context(
            serving(EmbedderService(embedder_settings), embedder_settings)
        )
        retriever_settings = RetrieverSettings(
            port=0,
            data_path=tmp_path_factory.mktemp("qdrant"),
            embedder_addr=f"127.0.0.1:{embedder}",
            chunk_min_tokens=16,
            chunk_max_tokens=64,
            chunk_overlap_tokens=8,
        )
        retriever = await stack.enter_async_context(
            serving(RetrieverService(retriever_settings), retriever_settings)
        )
        async with create_channel(f"127.0.0.1:{retriever}") as channel:
            stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
            request = retriever_pb2.IngestRequest(
                collection="station",
                documents=[
                    retriever_pb2.Document(
                        source_id="handbook.md", filename="handbook.md", content=HANDBOOK.encode()
                    )
                ],
                create_collection=True,
            )
            events = [e async for e in stub.Ingest(request, timeout=60)]
            assert events[-1].report.ingested == 1
        settings = OrchestratorSettings(
            port=0,
            embedder_addr=f"127.0.0.1:{embedder}",
            retriever_addr=f"127.0.0.1:{retriever}",
            reranker_addr=None,
            # which spans a quote carries, not whether to answer (the coverage stage's tests)
            decline_threshold=0.0,
            decline_unknown_names=False,
        )
        port = await stack.enter_async_context(serving(OrchestratorService(settings), settings))
        yield Cluster(port, retriever)


async def _read_source(cluster: Cluster, source_id: str) -> list[retriever_pb2.Chunk]:
    async with create_channel(f"127.0.0.1:{cluster.retriever}") as channel:
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        reply = await stub.ReadSource(
            retriever_pb2.ReadSourceRequest(collection="station", source_id=source_id),
            timeout=10,
        )
    assert reply.total == len(reply.chunks)
    return list(reply.chunks)


async def test_the_chunk_span_is_the_cited_chunk_in_the_document_read_back(
    cluster: Cluster,
) -> None:
    request = pb.AskRequest(
        collection="station", messages=[pb.Message(role=pb.ROLE_USER, content=QUESTION)]
    )
    async with create_channel(f"127.0.0.1:{cluster.orchestrator}") as channel:
        stub = orchestrator_pb2_grpc.OrchestratorServiceStub(channel)
        events = [e async for e in stub.Ask(request, timeout=30)]
    done = events[-1].done
    assert done.mode == pb.ANSWER_MODE_EXTRACTIVE, done
    [cited] = [e.citations for e in events if e.WhichOneof("event") == "citations"]
    assert cited.citations, "an extractive answer cites"
    sources = {s.number: s for s in cited.sources}

    chunks = await _read_source(cluster, "handbook.md")
    assert len(chunks) >= 3, [c.text[:40] for c in chunks]
    document = join_chunks(c.text for c in chunks)
    # the retriever's stored ranges are the same arithmetic as the joined text
    for chunk in chunks:
        assert document[chunk.doc_start : chunk.doc_end] == chunk.text

    glacier_cited = False
    for citation in cited.citations:
        source = sources[citation.number]
        assert citation.HasField("answer_span") and citation.HasField("chunk_span")
        answer = citation.answer_span
        assert done.answer[answer.start : answer.end] == citation.sentence
        span = citation.chunk_span
        assert document[span.start : span.end] == source.text
        stored = next(c for c in chunks if c.chunk_id == source.chunk_id)
        assert (span.start, span.end) == (stored.doc_start, stored.doc_end)
        if citation.HasField("source_span"):
            evidence = source.text[citation.source_span.start : citation.source_span.end]
            assert evidence.strip(), citation
            shifted = document[
                span.start + citation.source_span.start : span.start + citation.source_span.end
            ]
            assert shifted == evidence
        glacier_cited = glacier_cited or "Glacier stakes" in source.text
    # the cited chunk is not the first: its range starts inside the document
    assert glacier_cited, [sources[c.number].text[:60] for c in cited.citations]
    assert all(c.chunk_span.start > 0 for c in cited.citations if "Glacier" in c.sentence)
