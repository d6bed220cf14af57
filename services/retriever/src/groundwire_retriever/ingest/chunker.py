"""Section-aware chunking of Markdown-like text.

Splits at headings, keeps a fenced code block or a table whole (a block is only cut
when it alone exceeds the budget), packs paragraphs into chunks of at most
``max_tokens`` with ``overlap_tokens`` carried into the next chunk of the same
section, and prefixes every chunk with its heading path ("Title > Section > Sub").
The document's summary leads its first chunk.

Hand-written rather than a Markdown library's splitter because the rules above
(fence/table integrity, heading paths, token packing with overlap) are exactly what
we need and no kept library does all of them; tokens are counted by an injected
function so the embedder's own tokenizer can be used.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```+|~~~+)")

TokenCounter = Callable[[str], int]


def approx_tokens(text: str) -> int:
    """A tokenizer-free estimate: about 4/3 tokens per whitespace-separated word."""
    return (len(text.split()) * 4 + 2) // 3


@dataclass(frozen=True)
class TextChunk:
    index: int
    heading_path: tuple[str, ...]
    text: str
    """The chunk as embedded and shown: heading path line, blank line, body."""


@dataclass
class _Section:
    path: tuple[str, ...]
    blocks: list[str]


def _sections(title: str, body: str) -> Iterator[_Section]:
    stack: list[tuple[int, str]] = []
    blocks: list[str] = []
    current: list[str] = []
    fence: str | None = None
    in_table = False

    headings_seen = 0
    leading_h1 = False  # a document's first heading, when level 1, is its title

    def path() -> tuple[str, ...]:
        entries = list(stack)
        if entries and ((leading_h1 and entries[0][0] == 1) or entries[0][1] == title):
            entries = entries[1:]
        names = [name for _, name in entries]
        return (title, *names) if title else tuple(names)

    def close_block() -> None:
        nonlocal current, in_table
        text = "\n".join(current).strip("\n")
        if text.strip():
            blocks.append(text)
        current = []
        in_table = False

    section_path = path()
    for line in body.split("\n"):
        if fence is not None:
            current.append(line)
            closing = line.strip()
            # CommonMark: only a run of the same character, at least as long, closes it
            if closing and set(closing) == {fence[0]} and len(closing) >= len(fence):
                fence = None
                close_block()
            continue
        fence_match = _FENCE.match(line)
        if fence_match:
            close_block()
            fence = fence_match.group(1)
            current.append(line)
            continue
        heading = _HEADING.match(line)
        if heading:
            close_block()
            if blocks:
                yield _Section(section_path, blocks)
            blocks = []
            level = len(heading.group(1))
            headings_seen += 1
            if headings_seen == 1 and level == 1 and not blocks:
                leading_h1 = True
            elif level == 1:
                leading_h1 = False
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading.group(2)))
            section_path = path()
            continue
        is_table_row = line.lstrip().startswith("|")
        if not line.strip():
            if not in_table:
                close_block()
            continue
        if in_table and not is_table_row:
            close_block()
        if is_table_row and not in_table:
            close_block()
            in_table = True
        current.append(line)
    close_block()  # an unclosed fence ends with the document
    if blocks:
        yield _Section(section_path, blocks)


def _split_oversized(block: str, max_tokens: int, count: TokenCounter) -> list[str]:
    """Cuts one block larger than the budget: by lines, then by words."""
    pieces: list[str] = []
    current: list[str] = []
    unit_sep = "\n" if "\n" in block else " "
    units = block.split(unit_sep)
    for unit in units:
        candidate = unit_sep.join([*current, unit])
        if current and count(candidate) > max_tokens:
            pieces.append(unit_sep.join(current))
            current = []
        if count(unit) > max_tokens and unit_sep == "\n":
            pieces.extend(_split_oversized(unit, max_tokens, count))
            continue
        current.append(unit)
    if current:
        pieces.append(unit_sep.join(current))
    return pieces


def chunk_document(
    title: str,
    body: str,
    *,
    summary: str = "",
    max_tokens: int = 800,
    overlap_tokens: int = 50,
    count: TokenCounter = approx_tokens,
) -> list[TextChunk]:
    """Chunks one document; chunk texts never exceed ``max_tokens`` (path line excluded)."""
    chunks: list[TextChunk] = []
    lead = summary.strip()
    for section in _sections(title, body):
        blocks: list[str] = []
        for block in section.blocks:
            blocks.extend(
                _split_oversized(block, max_tokens, count) if count(block) > max_tokens else [block]
            )
        if lead:
            blocks.insert(0, lead)
            lead = ""
        packed: list[str] = []
        size = 0
        for block in blocks:
            n = count(block)
            if packed and size + n > max_tokens:
                chunks.append(_make(len(chunks), section.path, packed))
                packed, size = _overlap(packed, overlap_tokens, count)
                if size + n > max_tokens:
                    packed, size = [], 0
            packed.append(block)
            size += n
        if packed:
            chunks.append(_make(len(chunks), section.path, packed))
    return chunks


def _overlap(blocks: list[str], overlap_tokens: int, count: TokenCounter) -> tuple[list[str], int]:
    if overlap_tokens <= 0:
        return [], 0
    last = blocks[-1]
    n = count(last)
    return ([last], n) if n <= overlap_tokens else ([], 0)


def _make(index: int, path: tuple[str, ...], blocks: list[str]) -> TextChunk:
    body = "\n\n".join(blocks)
    header = " > ".join(path)
    return TextChunk(index, path, f"{header}\n\n{body}" if header else body)
