"""Issue #31, item 14: a document's embedding cost is capped (max_document_tokens),
refused with the reason before anything is embedded — a plain text too large for the
cap before it is even parsed or counted."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.pipeline import ChunkingPolicy, DocumentInput, prepare_chunks


def _table(rows: int) -> bytes:
    head = "# Inventory\n\n| id | name | value |\n|---|---|---|\n"
    return (head + "".join(f"| {i} | item-{i} | {i * 7} |\n" for i in range(rows))).encode()


async def test_a_plain_text_over_the_cap_is_refused_before_it_is_counted() -> None:
    calls: list[int] = []

    async def count(texts: Sequence[str]) -> list[int]:
        calls.append(len(texts))
        return [len(t.split()) + 2 for t in texts]

    table = _table(40_000)  # ~1 MB
    policy = ChunkingPolicy(min_tokens=50, max_tokens=256, overlap_tokens=0)
    with pytest.raises(InvalidInput, match="max_document_tokens"):
        await prepare_chunks(
            DocumentInput("t.md", table, filename="t.md"),
            ChunkingPolicy(
                min_tokens=50, max_tokens=256, overlap_tokens=0, max_document_tokens=10_000
            ),
            count_tokens=count,
        )
    assert calls == []  # never counted, never embedded
    # the same table under a cap it fits is chunked as before
    assert len(await prepare_chunks(DocumentInput("t.md", table, filename="t.md"), policy)) > 40


async def test_a_document_whose_chunks_exceed_the_cap_is_refused_with_the_reason() -> None:
    table = _table(2_000)  # ~50 kB: passes the size check, not the chunk count
    policy = ChunkingPolicy(
        min_tokens=50, max_tokens=256, overlap_tokens=0, max_document_tokens=8_000
    )
    with pytest.raises(InvalidInput, match=r"chunks of up to 256 tokens.*max_document_tokens"):
        await prepare_chunks(DocumentInput("t.md", table, filename="t.md"), policy)
    small = _table(20)
    assert await prepare_chunks(DocumentInput("s.md", small, filename="s.md"), policy)
