"""The chunk content hash covers everything stored with a chunk, so change detection
on re-ingest sees a change to any of it, and nothing else moves it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from groundwire_retriever.ingest.pipeline import ChunkingPolicy, DocumentInput, prepare_chunks

TEXT = b"# Pasta\n\n## Boil\n\nSalt the water well and boil it.\n\n## Drain\n\nKeep a cup.\n"
BASE = DocumentInput(
    source_id="pasta.md",
    content=TEXT,
    filename="pasta.md",
    title="Pasta",
    url="https://x.example/pasta",
    doc_type="recipe",
    metadata={"team": "kitchen", "lang": "en"},
)
POLICY = ChunkingPolicy(min_tokens=4, max_tokens=16, overlap_tokens=0)


async def _hashes(doc: DocumentInput, policy: ChunkingPolicy = POLICY) -> list[str]:
    return [c.content_hash for c in await prepare_chunks(doc, policy)]


async def test_the_same_document_hashes_the_same() -> None:
    first = await _hashes(BASE)
    assert len(first) >= 2 and len(set(first)) == len(first)
    reordered = replace(BASE, metadata={"lang": "en", "team": "kitchen"})
    assert await _hashes(reordered) == first, "metadata order does not matter"


@pytest.mark.parametrize(
    "changed",
    [
        replace(BASE, title="Pasta, revised"),
        replace(BASE, url="https://x.example/pasta-v2"),
        replace(BASE, doc_type="guide"),
        replace(BASE, metadata={"team": "kitchen", "lang": "fr"}),
        replace(BASE, metadata={"team": "kitchen"}),
        # "team=kitchen" split between key and value another way
        replace(BASE, metadata={"team=kitchen": "", "lang": "en"}),
    ],
    ids=["title", "url", "type", "metadata value", "metadata key removed", "key/value split"],
)
async def test_any_stored_field_changes_every_hash(changed: DocumentInput) -> None:
    before, after = await _hashes(BASE), await _hashes(changed)
    assert len(before) == len(after)
    assert not set(before) & set(after)


async def test_the_chunking_settings_change_the_hash() -> None:
    # a one-chunk document chunks to the same text under both settings
    small = replace(BASE, content=b"Salt the water well.\n")
    wider = ChunkingPolicy(min_tokens=4, max_tokens=32, overlap_tokens=0)
    before, after = await prepare_chunks(small, POLICY), await prepare_chunks(small, wider)
    assert [c.text for c in before] == [c.text for c in after]
    assert before[0].content_hash != after[0].content_hash
