"""Issue #22, acceptance 4: a document of every new format, written by the fixtures,
goes through the retriever's real gRPC Ingest (parsed in its sandbox worker, embedded
by the real MiniLM embedder) with its title, heading paths and properties; the
properties the collection declares filter searches; the PDF's chunks carry the
heading paths its fonts show; the hostile variants are skipped with their reasons
and the rest of the batch goes in."""

from __future__ import annotations

import time

import pytest

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.errors import InvalidInput
from groundwire_core.grpc.client import create_channel
from groundwire_retriever.ingest.sandbox import ParseSandbox
from tests.fixtures import documents
from tests.fixtures.documents import AUTHOR
from tests.fixtures.hostile import HOSTILE

INGESTED = retriever_pb2.DOCUMENT_STATUS_INGESTED
SKIPPED = retriever_pb2.DOCUMENT_STATUS_SKIPPED
GOOD = {
    "manual.docx": (documents.docx_document(), "Tidewater Pump Manual"),
    "deck.pptx": (documents.pptx_deck(), "Tidewater Pump Training"),
    "flow.ipynb": (documents.notebook(), "Pump flow analysis"),
    "guide.rst": (documents.RST, "Tidewater Pump Guide"),
    "book.epub": (documents.epub_book(), "The Tidewater Book"),
    # sections long enough to be chunks of their own (the chunker merges small ones)
    "field.pdf": (documents.headed_pdf(filler_lines=10), "Tidewater Field Manual"),
}
HOSTILE_HERE = [h for h in HOSTILE if h.filename.endswith((".docx", ".ipynb"))]


async def test_every_new_format_is_ingested_with_titles_paths_and_filterable_properties(
    retriever_addr: str,
) -> None:
    docs = [
        retriever_pb2.Document(source_id=name, filename=name, content=content)
        for name, (content, _) in GOOD.items()
    ]
    docs.insert(
        3,
        retriever_pb2.Document(
            source_id="unrelated.md",
            filename="unrelated.md",
            content=b"# Roses\n\nPrune the canes in late winter.",
        ),
    )
    # a format declared in the request, not guessed from a file name
    docs.append(
        retriever_pb2.Document(
            source_id="declared",
            content=documents.RST.replace(b"Tidewater Pump Guide", b"Declared Guide Pumps"),
            format=retriever_pb2.DOCUMENT_FORMAT_RST,
        )
    )
    docs += [
        retriever_pb2.Document(source_id=h.filename, filename=h.filename, content=h.content)
        for h in HOSTILE_HERE
    ]
    async with create_channel(retriever_addr) as channel:
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        await stub.CreateCollection(
            retriever_pb2.CreateCollectionRequest(name="formats", filterable=["author", "tags"]),
            timeout=30,
        )
        request = retriever_pb2.IngestRequest(collection="formats", documents=docs)
        events = [event async for event in stub.Ingest(request, timeout=120)]
        results = {d.source_id: d for d in events[-1].report.documents}
        for name in [*GOOD, "unrelated.md", "declared"]:
            assert results[name].status == INGESTED, (name, results[name].reason)
        for hostile in HOSTILE_HERE:
            result = results[hostile.filename]
            assert result.status == SKIPPED and hostile.reason in result.reason, result.reason

        async def search(
            text: str, *filters: retriever_pb2.FieldFilter
        ) -> list[retriever_pb2.Chunk]:
            reply = await stub.Search(
                retriever_pb2.SearchRequest(
                    collection="formats",
                    text=text,
                    paths=[retriever_pb2.SEARCH_PATH_BM25],
                    filters=list(filters),
                    limit=50,
                ),
                timeout=10,
            )
            return [hit.chunk for hit in reply.hits]

        by_author = await search(
            "pump impeller installation wiring flow",
            retriever_pb2.FieldFilter(field="author", any_of=[AUTHOR]),
        )
        found = {c.source_id for c in by_author}
        assert found == {*GOOD, "declared"}  # the Markdown page has no author
        for chunk in by_author:
            if chunk.source_id in GOOD:
                assert chunk.title == GOOD[chunk.source_id][1]
            assert chunk.metadata["author"] == AUTHOR
            assert chunk.metadata["tags"] == documents.TAGS
            assert "created" not in chunk.metadata  # not declared filterable: not kept
        assert (
            await search("pump", retriever_pb2.FieldFilter(field="author", any_of=["Nobody"])) == []
        )

        pdf_paths = {
            tuple(c.heading_path)
            for c in await search("pump impeller anchors wire case")
            if c.source_id == "field.pdf"
        }
        title = "Tidewater Field Manual"
        assert pdf_paths == {
            (title,),  # the lines under the title heading
            (title, "Installation"),
            (title, "Installation", "Wiring"),
            (title, "Maintenance"),
            (title, "Maintenance", "Safety"),
        }


async def test_slow_rst_markup_is_bounded_by_the_sandbox_time_budget() -> None:
    """docutils' inline markup parser is super-linear on unbalanced markup (10,000
    characters of ``*a `` in one paragraph took 13 s): the worker is stopped at the
    budget, the document skipped with that reason, and the next document parsed."""
    slow = b"T\n=\n\n" + (b"*a " * 33 + b"\n") * 300
    box = ParseSandbox(time_budget_s=1.5)
    limits = {"min_tokens": 0, "max_tokens": 200, "overlap_tokens": 0}
    try:
        await box.start()
        started = time.perf_counter()
        with pytest.raises(InvalidInput, match=r"longer than the 1\.5 s budget"):
            await box.prepare(slow, "rst", title="", filename="slow.rst", **limits)
        assert time.perf_counter() - started < 5
        parsed, chunks = await box.prepare(
            documents.RST, "rst", title="", filename="guide.rst", **limits
        )
        assert parsed.title == "Tidewater Pump Guide" and chunks
    finally:
        await box.close()
