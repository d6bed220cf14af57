"""A citation's ``chunk_span`` is its cited chunk's range in the document (the
retriever's ``doc_start``/``doc_end``), absent for a chunk stored without one."""

from __future__ import annotations

from dataclasses import replace

from groundwire_orchestrator.convert import citation_to_proto
from groundwire_orchestrator.domain import NumberedSource
from groundwire_orchestrator.stages.citations import CitationVerifier, VerificationInput
from tests.unit.orchestrator.doubles import FakeEmbedder, chunk

PLACED = replace(
    chunk(1, "Rate limits are enforced per API key. Each key may send 60 requests a minute."),
    doc_span=(120, 211),
)
UNPLACED = chunk(2, "Boil the spaghetti in salted water for nine minutes until al dente.")
SOURCES = {1: PLACED, 2: UNPLACED}


def _get(n: int) -> NumberedSource | None:
    return NumberedSource(n, SOURCES[n]) if n in SOURCES else None


async def test_each_citation_carries_its_chunks_range_or_none() -> None:
    text = "Each API key may send 60 requests a minute [1]. Boil spaghetti nine minutes [2]."
    citations, _ = await CitationVerifier(FakeEmbedder(), threshold=0.5).run(
        VerificationInput(text, _get)
    )
    by_number = {c.number: c for c in citations}
    assert by_number[1].chunk_span == (120, 211)
    assert by_number[2].chunk_span is None
    placed, unplaced = citation_to_proto(by_number[1]), citation_to_proto(by_number[2])
    assert placed.HasField("chunk_span")
    assert (placed.chunk_span.start, placed.chunk_span.end) == (120, 211)
    assert not unplaced.HasField("chunk_span")
