"""The hostile documents of issue #19, parsed and chunked in this process: each one
that once took seconds to hours (or hundreds of MiB) now takes milliseconds and a few
MiB, and ends as a skip with its reason or as chunks, never as an exception."""

from __future__ import annotations

import asyncio
import tracemalloc

import pytest

from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.parsers import parse
from groundwire_retriever.ingest.pipeline import ChunkingPolicy, DocumentInput, prepare_chunks
from tests.fixtures.hostile import HOSTILE, MIB, Hostile

# A hang (some of these took hours before the fix) ends the test, whatever the machine's
# load; the work itself is bounded by the memory it may take. Speed: benchmarks.
TIMEOUT_S = 60.0
PEAK_BYTES = 64 * MIB  # the largest document is 1 MiB


@pytest.mark.parametrize("doc", HOSTILE, ids=[h.name for h in HOSTILE])
async def test_hostile_document_is_bounded(doc: Hostile) -> None:
    tracemalloc.start()
    try:
        try:
            chunks = await asyncio.wait_for(
                prepare_chunks(
                    DocumentInput(doc.name, doc.content, filename=doc.filename),
                    ChunkingPolicy(),
                ),
                TIMEOUT_S,
            )
            outcome, reason = "ingested", ""
        except InvalidInput as error:
            outcome, reason, chunks = "skipped", error.message, []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_BYTES, f"{doc.name} peaked at {peak / MIB:.0f} MiB"
    assert outcome in doc.outcomes, (outcome, reason)
    assert doc.reason in reason
    if outcome == "ingested":
        assert chunks and all(c.text.strip() for c in chunks)
    else:
        assert reason


def test_alias_bomb_reason_names_the_cause() -> None:
    bomb = next(h for h in HOSTILE if h.name == "yaml-alias-bomb")
    with pytest.raises(InvalidInput, match=r"anchors or aliases"):
        parse(bomb.content, "markdown")


def test_a_single_anchor_without_alias_is_refused_too() -> None:
    with pytest.raises(InvalidInput, match=r"anchors or aliases"):
        parse(b"---\ntitle: &t Guide\n---\ntext\n", "markdown")


def test_deep_front_matter_is_refused() -> None:
    deep = "---\nx: " + "[" * 40 + "]" * 40 + "\n---\ntext\n"
    with pytest.raises(InvalidInput, match=r"nests deeper than 16 levels"):
        parse(deep.encode(), "markdown")


def test_huge_integer_in_front_matter_is_a_reason_not_a_crash() -> None:
    with pytest.raises(InvalidInput, match=r"front matter is not valid YAML"):
        parse(b"---\nn: " + b"9" * 5000 + b"\n---\ntext\n", "markdown")
