"""Document-level search through the real OrchestratorService and the real retriever
(test_chain's stack: MiniLM embedder, retriever on the embedded engine): one result per
source with its best chunk, how many of its chunks matched and their headings; the
chunk-level search stays the default. Both engines group alike: see the retriever's
congruence test."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
import pytest_asyncio

from groundwire.orchestrator.v1 import orchestrator_pb2, orchestrator_pb2_grpc
from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.grpc.client import create_channel
from tests.integration.orchestrator import test_chain

pytestmark = pytest.mark.asyncio(loop_scope="module")
pb = orchestrator_pb2
chain = test_chain.chain  # the module-scoped stack, built once for this module
Stack = test_chain.Stack


COLLECTION = "handbook"
SECTIONS = {
    "Rate limits per key": "Every API key may send sixty requests per minute to the gateway.",
    "Daily quotas per key": "Every API key has a daily quota of requests that resets at midnight.",
    "Errors when over the limit": "Over a rate limit or quota the API key gets a 429 answer.",
}


def handbook() -> str:
    """Three sections each longer than CHUNK_MIN_TOKENS: three chunks of one source."""
    parts = ["# API handbook"]
    for heading, sentence in SECTIONS.items():
        filler = " ".join(f"{sentence} Note {n} repeats it for clarity." for n in range(30))
        parts.append(f"## {heading}\n\n{filler}")
    return "\n\n".join(parts)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def ingested(chain: Stack) -> Stack:
    docs = [
        retriever_pb2.Document(
            source_id="handbook.md", filename="handbook.md", content=handbook().encode()
        ),
        *[
            retriever_pb2.Document(source_id=name, filename=name, content=text.encode())
            for name, text in test_chain.DOCS.items()
        ],
    ]
    async with create_channel(f"127.0.0.1:{chain.ports['retriever']}") as ch:
        stub = retriever_pb2_grpc.RetrieverServiceStub(ch)
        request = retriever_pb2.IngestRequest(
            collection=COLLECTION, documents=docs, create_collection=True
        )
        events = [e async for e in stub.Ingest(request)]
    assert events[-1].report.ingested == len(docs)
    return chain


async def search(stack: Stack, **kw: Any) -> orchestrator_pb2.SearchResponse:
    request = orchestrator_pb2.SearchRequest(
        collection=COLLECTION, query="rate limits per API key", limit=6, rerank=False, **kw
    )
    async with create_channel(f"127.0.0.1:{stack.ports['plain']}") as channel:
        stub = orchestrator_pb2_grpc.OrchestratorServiceStub(channel)
        reply: orchestrator_pb2.SearchResponse = await stub.Search(request)
    return reply


async def test_one_result_per_document_with_its_other_matches(ingested: Stack) -> None:
    chunks = await search(ingested)
    by_source = [r.source_id for r in chunks.results]
    assert by_source.count("handbook.md") >= 2, by_source  # the chunk level repeats it
    assert all(r.matching_chunks == 0 and not r.other_headings for r in chunks.results)

    documents = await search(ingested, group_by=pb.GROUP_BY_DOCUMENT)
    sources = [r.source_id for r in documents.results]
    assert len(sources) == len(set(sources)) == 6, sources
    assert sources[: len(set(by_source))] == list(dict.fromkeys(by_source)), "the fused order"
    [book] = [r for r in documents.results if r.source_id == "handbook.md"]
    best, *others = [r for r in chunks.results if r.source_id == "handbook.md"]
    assert (book.chunk_id, book.score) == (best.chunk_id, pytest.approx(best.score))
    assert book.matching_chunks >= 1 + len(others)
    own = " > ".join(best.heading_path)
    sections = {f"API handbook > {h}" for h in SECTIONS}
    seen = {" > ".join(r.heading_path) for r in others} - {own}
    assert seen <= set(book.other_headings) <= sections - {own}, book.other_headings
    assert book.other_headings, "the handbook's other matching sections are named"
    assert all(r.matching_chunks >= 1 for r in documents.results)
    stage = {s.name: s for s in documents.stages}["retrieval"]
    assert dict(stage.details)["group_by"] == "document"


async def test_an_unknown_grouping_is_invalid_argument(ingested: Stack) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await search(ingested, group_by=7)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown group_by 7" in (caught.value.details() or "")
