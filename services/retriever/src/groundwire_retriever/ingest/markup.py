"""Markdown written by the structured-format parsers (DOCX, PPTX, notebooks, PDF).

Each of those parsers walks its format's own structure (paragraph styles, slides,
cells, font sizes) and writes Markdown: ATX headings the chunker turns into heading
paths, fenced code blocks and pipe tables it keeps whole. What a document says is
text, never structure: a paragraph that starts with ``#`` or ``|``, or a cell that
holds ``|``, is escaped so it cannot become a heading or a table by accident, and a
code block is fenced with more backticks than any run inside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from groundwire_retriever.ingest.chunker import parse_heading

# A table wider than this is cut to its first columns: one row must fit in a chunk.
MAX_TABLE_COLUMNS = 32


@dataclass(frozen=True)
class Extracted:
    """What a structured-format parser read from one document."""

    title: str
    markdown: str
    properties: dict[str, str] = field(default_factory=dict)
    """Document properties (author, dates, tags, ...) under their front-matter names."""
    summary: str = ""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def escape_text(text: str) -> str:
    """A paragraph's text that the chunker reads as a paragraph: a leading ``#``,
    ``|``, fence or front-matter rule is escaped with a backslash."""
    lines = []
    for line in text.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(("#", "|", "```", "~~~", "---")):
            line = "\\" + stripped
        lines.append(line)
    return "\n".join(lines)


def demoted(markdown: str) -> str:
    """``markdown`` with every ATX heading one level deeper (``#`` to ``##``; ``######``
    stays), outside fenced code. A document made of parts (an e-book's chapters) is
    then sections under its title: the chunker reads a leading level-1 heading as the
    title itself, which would drop the first part's name from its heading paths."""
    lines = markdown.split("\n")
    fence = ""
    for i, line in enumerate(lines):
        stripped = line.strip()
        if fence:
            if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
                fence = ""
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[: len(stripped) - len(stripped.lstrip(stripped[0]))]
        elif parse_heading(line) is not None and not line.startswith("######"):
            lines[i] = "#" + line
    return "\n".join(lines)


def _cell(text: str) -> str:
    return _one_line(text).replace("\\", "\\\\").replace("|", "\\|")


class MarkdownWriter:
    """Collects Markdown blocks separated by blank lines."""

    def __init__(self) -> None:
        self._blocks: list[str] = []

    def heading(self, level: int, text: str) -> None:
        """An ATX heading; levels past 6 are 6, an empty heading is left out."""
        text = _one_line(text)
        if text:
            self._blocks.append("#" * min(max(level, 1), 6) + " " + text)

    def paragraph(self, text: str) -> None:
        """A paragraph; blank text is left out."""
        text = text.strip("\n")
        if text.strip():
            self._blocks.append(escape_text(text))

    def markdown(self, text: str) -> None:
        """Markdown written by the document's author, kept as it is."""
        text = text.strip("\n")
        if text.strip():
            self._blocks.append(text)

    def code(self, text: str, language: str = "") -> None:
        """A fenced code block, its fence longer than any backtick run in ``text``."""
        if not text.strip():
            return
        longest = run = 0
        for char in text:
            run = run + 1 if char == "`" else 0
            longest = max(longest, run)
        fence = "`" * max(3, longest + 1)
        self._blocks.append(f"{fence}{_one_line(language)}\n{text.strip(chr(10))}\n{fence}")

    def table(self, rows: Iterable[Sequence[str]]) -> None:
        """A pipe table; the first row is its header. Rows are padded to one width."""
        kept = [[_cell(c) for c in row[:MAX_TABLE_COLUMNS]] for row in rows]
        kept = [row for row in kept if any(row)]
        if not kept:
            return
        width = max(len(row) for row in kept)
        lines = ["| " + " | ".join(row + [""] * (width - len(row))) + " |" for row in kept]
        lines.insert(1, "|" + " --- |" * width)
        self._blocks.append("\n".join(lines))

    def text(self) -> str:
        """The Markdown so far, ending with a newline ("" when nothing was written)."""
        return "\n\n".join(self._blocks) + "\n" if self._blocks else ""

    def has_text(self) -> bool:
        """Whether anything other than headings was written."""
        return any(
            line.strip() and not line.startswith("#")
            for block in self._blocks
            for line in block.split("\n")
        )
