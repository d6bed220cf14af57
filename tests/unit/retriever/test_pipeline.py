"""prepare_chunks: limits, token counting through an injected batch counter, and the
metadata each chunk carries."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from groundwire_core.errors import InvalidInput, Unavailable
from groundwire_retriever.ingest.pipeline import ChunkingPolicy, DocumentInput, prepare_chunks

GUIDE = b"""---
title: Guide
url: https://example.com/guide
type: guide
description: What the guide covers.
---

# Guide

## Install

Run the installer.

## Use

Call the API.
"""


class RecordingCounter:
    """A batch token counter like EmbedderClient.count_tokens: one token a word, plus
    two special tokens per text; records every call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def __call__(self, texts: Sequence[str]) -> list[int]:
        self.calls.append(list(texts))
        return [len(t.split()) + 2 for t in texts]


async def test_chunks_carry_the_document_metadata() -> None:
    doc = DocumentInput("guide.md", GUIDE, filename="guide.md", metadata={"team": "docs"})
    chunks = await prepare_chunks(doc, ChunkingPolicy())
    # the default policy (300-800 tokens) merges the two small sections under the title
    assert [c.heading_path for c in chunks] == [("Guide",)]
    chunk = chunks[0]
    assert chunk.text == (
        "Guide\n\nWhat the guide covers.\n\n## Install\n\nRun the installer.\n\n"
        "## Use\n\nCall the API."
    )
    assert (chunk.title, chunk.url, chunk.doc_type) == (
        "Guide",
        "https://example.com/guide",
        "guide",
    )
    assert chunk.metadata == {"team": "docs"}
    assert chunk.source_id == "guide.md" and chunk.chunk_index == 0
    assert len(chunk.content_hash) == 64


async def test_what_the_caller_says_wins_over_what_the_document_says() -> None:
    doc = DocumentInput(
        "g", GUIDE, filename="g.md", title="Mine", url="https://mine", doc_type="faq"
    )
    chunk = (await prepare_chunks(doc, ChunkingPolicy()))[0]
    assert (chunk.title, chunk.url, chunk.doc_type) == ("Mine", "https://mine", "faq")


async def test_chunk_ids_are_stable_and_change_with_the_content() -> None:
    policy = ChunkingPolicy(min_tokens=0)
    first = await prepare_chunks(DocumentInput("g", GUIDE, filename="g.md"), policy)
    again = await prepare_chunks(DocumentInput("g", GUIDE, filename="g.md"), policy)
    edited = GUIDE.replace(b"Call the API.", b"Call the new API.")
    changed = await prepare_chunks(DocumentInput("g", edited, filename="g.md"), policy)
    assert [c.chunk_id for c in first] == [c.chunk_id for c in again]
    assert first[0].chunk_id == changed[0].chunk_id  # the unchanged section keeps its id
    assert first[-1].chunk_id != changed[-1].chunk_id


async def test_html_metadata_reaches_the_chunks() -> None:
    html = (
        b'<html><head><link rel="canonical" href="https://example.com/page">'
        b'<meta name="description" content="Summary."></head>'
        b"<body><h1>Page</h1><p>Body text.</p></body></html>"
    )
    chunk = (await prepare_chunks(DocumentInput("p", html, filename="p.html"), ChunkingPolicy()))[0]
    assert (chunk.title, chunk.url) == ("Page", "https://example.com/page")
    assert chunk.text == "Page\n\nSummary.\n\nBody text."


async def test_the_injected_counter_sizes_chunks_in_few_batched_calls() -> None:
    counter = RecordingCounter()
    body = "\n\n".join(" ".join(f"p{j}w{i}" for i in range(20)) for j in range(40))
    doc = DocumentInput("d", body.encode(), filename="d.txt")
    policy = ChunkingPolicy(min_tokens=50, max_tokens=100, overlap_tokens=0)
    chunks = await prepare_chunks(doc, policy, count_tokens=counter)
    assert len(chunks) >= 8
    assert all(len(c.text.split()) + 2 <= 100 for c in chunks)
    assert len(counter.calls) == 2  # the blocks and headings, then the chunks


async def test_counting_is_sliced_into_requests_the_embedder_accepts() -> None:
    counter = RecordingCounter()
    body = "\n\n".join(f"paragraph {j}" for j in range(1000))
    big = "x " * 400_000  # one 800 kB paragraph
    doc = DocumentInput("d", f"{body}\n\n{big}\n\n{big}".encode(), filename="d.txt")
    await prepare_chunks(
        doc,
        ChunkingPolicy(max_tokens=10_000_000, max_document_tokens=1 << 30),
        count_tokens=counter,
    )
    assert all(1 <= len(call) <= 128 for call in counter.calls)
    assert all(len(call) == 1 or sum(map(len, call)) <= 1 << 20 for call in counter.calls)
    counted = [t for call in counter.calls for t in call]
    assert sum(t.startswith("paragraph ") for t in counted) >= 1000


async def test_counter_failures_are_not_blamed_on_the_document() -> None:
    async def down(texts: Sequence[str]) -> list[int]:
        raise Unavailable("embedder is down", dependency="embedder")

    doc = DocumentInput("g", GUIDE, filename="g.md")
    with pytest.raises(Unavailable):
        await prepare_chunks(doc, ChunkingPolicy(), count_tokens=down)


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        (DocumentInput(" ", b"text", filename="a.txt"), "source_id must not be empty"),
        (DocumentInput("big", b"x" * 101, filename="a.txt"), "101 bytes; the limit is 100"),
        (DocumentInput("h", b"# Only\n\n## Headings\n", filename="h.md"), "no text outside"),
        (DocumentInput("u", b"text", filename="slides.odp"), "unknown document type"),
    ],
)
async def test_refusals_say_why(doc: DocumentInput, reason: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        await prepare_chunks(doc, ChunkingPolicy(max_document_bytes=100))
    assert reason in refused.value.message


async def test_a_huge_block_is_cut_before_it_is_counted() -> None:
    # Tokenizing one 20 MB string takes the embedder about a minute: never send one.
    counter = RecordingCounter()
    line = " ".join(f"w{i}" for i in range(200_000))  # 1.3 MB on a single line
    doc = DocumentInput("big", line.encode(), filename="big.txt")
    policy = ChunkingPolicy(min_tokens=0, max_tokens=800, overlap_tokens=0)
    chunks = await prepare_chunks(doc, policy, count_tokens=counter)
    assert max(len(t) for call in counter.calls for t in call) <= 32_000
    assert all(len(c.text.split()) + 2 <= 800 for c in chunks)
    assert [w for c in chunks for w in c.text.split()[1:]] == line.split()
    assert len(counter.calls) <= 20
