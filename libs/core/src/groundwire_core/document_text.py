"""What "a document's text" is, for every place that shows or points into one.

A stored source is its chunks; its text is their texts joined by a blank line in chunk
order. The retriever records each chunk's ``[start, end)`` range in that text at
ingest (a citation's ``chunk_span``), and the MCP ``read_document`` tool and document
resources present exactly that text, so one definition keeps the ranges and the text
they point into in agreement. Chunks overlap (the chunker repeats a few sentences at
each boundary), so the text repeats them too: it is the chunks as stored, not the
original file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

CHUNK_SEPARATOR = "\n\n"


def join_chunks(texts: Iterable[str]) -> str:
    """The document text of chunk texts given in chunk order."""
    return CHUNK_SEPARATOR.join(texts)


def chunk_ranges(texts: Sequence[str]) -> list[tuple[int, int]]:
    """Each chunk's ``[start, end)`` in :func:`join_chunks` of ``texts``, in the same
    order: ``join_chunks(texts)[start:end] == texts[i]``. Offsets are Python string
    indices (code points), like every span Groundwire reports."""
    ranges: list[tuple[int, int]] = []
    start = 0
    for text in texts:
        ranges.append((start, start + len(text)))
        start += len(text) + len(CHUNK_SEPARATOR)
    return ranges
