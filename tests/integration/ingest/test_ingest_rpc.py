"""A batch mixing good and malformed documents through the retriever's real gRPC
Ingest, embedded by the real MiniLM embedder: the good ones go in and are found, each
bad one is skipped with its reason, and progress is reported per document."""

from __future__ import annotations

from collections.abc import Callable

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.grpc.client import create_channel

PdfMaker = Callable[..., bytes]
SKIPPED = retriever_pb2.DOCUMENT_STATUS_SKIPPED
INGESTED = retriever_pb2.DOCUMENT_STATUS_INGESTED


def _doc(name: str, content: bytes) -> retriever_pb2.Document:
    return retriever_pb2.Document(source_id=name, filename=name, content=content)


async def test_good_documents_go_in_and_bad_ones_are_skipped_with_reasons(
    retriever_addr: str, make_pdf: PdfMaker
) -> None:
    good = [
        _doc("pasta.md", b"# Cooking pasta\n\nBoil salted water and cook the spaghetti al dente."),
        _doc("roses.txt", b"Prune rose canes just above an outward-facing bud in late winter."),
        _doc(
            "taxes.html",
            b"<html><head><title>Paying taxes</title><script>track()</script></head><body>"
            b"<h1>Paying taxes</h1><p>File your return before the deadline.<p>Keep receipts",
        ),
        _doc(
            "tides.pdf",
            make_pdf(
                [["The moon's gravity pulls the oceans into two tidal bulges."]], title="Tides"
            ),
        ),
    ]
    bad = {
        "noise.md": (bytes(range(256)) * 64, "looks binary"),
        "huge.txt": (b"word " * (10 * 1024 * 1024), "bytes; the limit is"),
        "broken.html": (b"<html><head><script>var x = '</div>'", "the HTML has no text"),
        "blank.pdf": (make_pdf([[]]), "the PDF has no text layer"),
        "corrupt.pdf": (make_pdf([["cut short"]])[:400], "the PDF could not be read"),
        "deck.odp": (b"slides", "unknown document type"),
    }
    docs = [*good[:2], *(_doc(n, c) for n, (c, _) in bad.items()), *good[2:]]
    async with create_channel(retriever_addr) as channel:
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        request = retriever_pb2.IngestRequest(
            collection="mixed", documents=docs, create_collection=True
        )
        events = [event async for event in stub.Ingest(request, timeout=120)]

        ticks = [e.progress for e in events if e.HasField("progress")]
        assert [t.done for t in ticks] == list(range(1, len(docs) + 1))
        assert all(t.total == len(docs) for t in ticks)
        report = events[-1].report
        assert (report.ingested, report.skipped) == (len(good), len(bad))
        results = {d.source_id: d for d in report.documents}
        for doc in good:
            assert results[doc.source_id].status == INGESTED, results[doc.source_id].reason
            assert results[doc.source_id].chunks >= 1
        for name, (_, reason) in bad.items():
            assert results[name].status == SKIPPED
            assert reason in results[name].reason, results[name].reason
            assert results[name].chunks == 0

        stats = await stub.DescribeCollection(
            retriever_pb2.DescribeCollectionRequest(name="mixed"), timeout=10
        )
        assert stats.sources == len(good)
        assert stats.chunks == report.chunks_written
        for query, source in [
            ("moon gravity tidal bulges", "tides.pdf"),
            ("deadline receipts", "taxes.html"),
            ("outward-facing bud", "roses.txt"),
        ]:
            found = await stub.Search(
                retriever_pb2.SearchRequest(
                    collection="mixed", text=query, paths=[retriever_pb2.SEARCH_PATH_BM25]
                ),
                timeout=10,
            )
            assert found.hits[0].chunk.source_id == source
        assert "track()" not in " ".join(h.chunk.text for h in found.hits)


async def test_a_batch_whose_every_document_is_skipped_creates_no_collection(
    retriever_addr: str,
) -> None:
    async with create_channel(retriever_addr) as channel:
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        request = retriever_pb2.IngestRequest(
            collection="never-made",
            documents=[_doc("deck.odp", b"slides"), _doc("empty.md", b"   \n")],
            create_collection=True,
        )
        events = [event async for event in stub.Ingest(request, timeout=60)]
        assert events[-1].report.skipped == 2
        listed = await stub.ListCollections(retriever_pb2.ListCollectionsRequest(), timeout=10)
        assert "never-made" not in {c.name for c in listed.collections}
        # the first document that is written creates it, as before
        request = retriever_pb2.IngestRequest(
            collection="never-made",
            documents=[_doc("deck.odp", b"slides"), _doc("ok.md", b"# Ok\n\nBoil the water.")],
            create_collection=True,
        )
        events = [event async for event in stub.Ingest(request, timeout=60)]
        assert (events[-1].report.ingested, events[-1].report.skipped) == (1, 1)
        listed = await stub.ListCollections(retriever_pb2.ListCollectionsRequest(), timeout=10)
        assert "never-made" in {c.name for c in listed.collections}
