"""Each chunk's [start, end) in its document's text (issue #21, spans): computed at
ingest over the source's chunk texts joined by ``groundwire_core.document_text``,
stored in the payload, sent on the wire, and absent (None / doc_end 0) for chunks
stored before it was recorded. It stays out of the content hash, which already
covers what it follows from."""

from __future__ import annotations

from dataclasses import replace

from groundwire_core.document_text import chunk_ranges, join_chunks
from groundwire_retriever.convert import chunk_to_proto
from groundwire_retriever.domain import Chunk
from groundwire_retriever.ingest.pipeline import ChunkingPolicy, DocumentInput, prepare_chunks
from groundwire_retriever.store.payload import chunk_from_payload, chunk_payload

POLICY = ChunkingPolicy(min_tokens=16, max_tokens=40, overlap_tokens=4)
SECTIONS = [
    "## Arrival\n\nVisitors sign the logbook at the gate cabin and collect a radio "
    "before walking up the hill to the bunkhouse for the night.",
    "## Water\n\nDrinking water comes from the spring above the camp; boil it for one "
    "minute before use, and keep the rain barrels for washing only.",
    "## Glaciers\n\nGlacier stakes are read every Tuesday at dawn, when the ice is "
    "still frozen hard, and the readings go in the orange notebook — ☃ included.",
]


def _doc(sections: list[str]) -> DocumentInput:
    body = "# Handbook\n\n" + "\n\n".join(sections)
    return DocumentInput(source_id="handbook.md", content=body.encode(), format="markdown")


def test_each_range_is_its_text_in_the_joined_document() -> None:
    texts = ["first", "", "snow ☃ and ice", "last\n\nlines"]
    document = join_chunks(texts)
    ranges = chunk_ranges(texts)
    assert [document[s:e] for s, e in ranges] == texts
    assert ranges[0] == (0, 5) and ranges[1] == (7, 7)


async def test_ingest_gives_every_chunk_its_range_in_the_document() -> None:
    chunks = await prepare_chunks(_doc(SECTIONS), POLICY)
    assert len(chunks) >= 3
    document = join_chunks(c.text for c in sorted(chunks, key=lambda c: c.chunk_index))
    for chunk in chunks:
        assert chunk.doc_span is not None
        start, end = chunk.doc_span
        assert document[start:end] == chunk.text
    assert chunks[-1].doc_span is not None and chunks[-1].doc_span[1] == len(document)


async def test_the_span_is_not_hashed_but_a_change_before_it_still_rewrites_the_source() -> None:
    before = await prepare_chunks(_doc(SECTIONS), POLICY)
    longer = [SECTIONS[0].replace("the night", "the whole night"), *SECTIONS[1:]]
    after = await prepare_chunks(_doc(longer), POLICY)
    # the last chunk's own text is the same: same hash and id, yet it moved
    assert before[-1].text == after[-1].text
    assert before[-1].content_hash == after[-1].content_hash
    assert before[-1].doc_span != after[-1].doc_span
    # the source's id -> hash map (what re-ingest compares) differs, so every chunk,
    # spans included, is written again; an unchanged source keeps the same map
    assert {c.chunk_id: c.content_hash for c in before} != {
        c.chunk_id: c.content_hash for c in after
    }
    again = await prepare_chunks(_doc(SECTIONS), POLICY)
    assert [(c.chunk_id, c.content_hash, c.doc_span) for c in again] == [
        (c.chunk_id, c.content_hash, c.doc_span) for c in before
    ]


def test_the_payload_keeps_the_span_and_an_old_payload_reads_as_none() -> None:
    chunk = Chunk(chunk_id="c1", source_id="s", text="snow", doc_span=(12, 16))
    payload = chunk_payload(chunk, "c1")
    assert (payload["doc_start"], payload["doc_end"]) == (12, 16)
    assert chunk_from_payload(payload).doc_span == (12, 16)
    old = {k: v for k, v in payload.items() if k not in ("doc_start", "doc_end")}
    assert chunk_from_payload(old).doc_span is None
    assert "doc_start" not in chunk_payload(replace(chunk, doc_span=None), "c1")


def test_the_wire_carries_the_span_and_doc_end_zero_when_unknown() -> None:
    chunk = Chunk(chunk_id="c1", source_id="s", text="snow", doc_span=(12, 16))
    msg = chunk_to_proto(chunk)
    assert (msg.doc_start, msg.doc_end) == (12, 16)
    unknown = chunk_to_proto(replace(chunk, doc_span=None))
    assert (unknown.doc_start, unknown.doc_end) == (0, 0)
