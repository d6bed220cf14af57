"""Quotable units of a chunk, taken verbatim, and the citation markers around them.

The extractive answer quotes a chunk's own text: a prose sentence, a list item (its
bullet kept), a table row (its pipes kept; the table's header row is its context) or
a fenced code block (its fences kept). A unit's ``text`` holds every
character of the chunk's text from its start to its end; only whitespace runs are
made single spaces in sentences and list items (a line wrapped inside a paragraph is a
space in Markdown too). A code block is copied exactly, line breaks and indentation
included.

What is not a unit: headings (and a line in bold alone, which reads as one: it becomes
the heading of what follows), a table's header and delimiter rows, block quotes,
indented code, and a fenced block the chunk cuts before its closing fence (half a block
would read as a whole one).

Citation markers: a sentence or a list item gets ``[n]`` before its final punctuation
("Keys are limited [2]."), a table row after its last pipe; a code block gets a line
of its own right after its closing fence (a marker on a fence line would change the
fence). :func:`remove_markers` takes
markers out again without touching any other character, so a quote with its markers
removed is the chunk's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from groundwire_orchestrator.text.sentences import MARKER, split_sentences

UnitKind = Literal["sentence", "item", "code", "row"]

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ITEM = re.compile(r"^\s{0,12}(?:[-*+\u2022]|\d{1,3}[.)])\s+\S")
_SPACED_MARKER = re.compile(r"[ \t]*" + MARKER.pattern)
_MARKER_LINE = re.compile(r"^\s*(?:" + MARKER.pattern + r"\s*)+$")
_FINAL = ".!?:;"
"""Punctuation the marker goes before. Not closing quotes or brackets: a marker before
them would sit inside the quotation or the parenthesis ('(see "Limits [2]").')."""
_BOLD_LINE = re.compile(r"^\*\*([^*]+)\*\*:?$")
_TABLE_DELIMITER = re.compile(r"^\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?$")


@dataclass(frozen=True)
class Unit:
    kind: UnitKind
    text: str
    """As it reads in the chunk (whitespace runs as one space, except in code)."""
    position: int
    """Order in the chunk."""
    context: str = ""
    """A code block's introducing line ("Install it with pip:"), or a table row's
    header row, for scoring only."""
    block: int = 0
    """Which block of the chunk it belongs to: the sentences of one paragraph, the items
    of one list, the rows of one table share it; a code block has its own."""
    heading: str = ""
    """The heading line above it inside the chunk ("" when none: the chunk's heading
    path says where it is)."""


def _closing(fence: str, line: str) -> bool:
    stripped = line.strip()
    return (
        len(line) - len(line.lstrip(" ")) <= 3
        and stripped.startswith(fence[0] * len(fence))
        and not stripped.strip(fence[0])
    )


def quotable_units(text: str) -> list[Unit]:
    """The chunk body's sentences, list items and complete fenced code blocks, in order
    (see the module docstring for what is left out)."""
    units: list[Unit] = []
    lines = text.splitlines()
    paragraph: list[str] = []
    item: list[str] = []
    block = 0
    heading = ""
    in_list = False  # items stay one block across the blank lines of a loose list
    recent = ""  # the last prose line: a code block's introduction ("Run:")

    def add(kind: UnitKind, unit_text: str, context: str = "") -> None:
        units.append(Unit(kind, unit_text, len(units), context, block, heading))

    def new_block() -> None:
        nonlocal block, in_list
        block, in_list = block + 1, False

    def flush() -> None:
        """Ends the open paragraph or list item."""
        nonlocal heading, recent
        bold = _BOLD_LINE.match(paragraph[0]) if len(paragraph) == 1 else None
        if bold:  # a line in bold alone is a heading ("**Example 1: To create a bucket**")
            heading, recent = bold.group(1).strip(), ""
            paragraph.clear()
        if paragraph:
            new_block()
            for sentence in split_sentences(" ".join(" ".join(paragraph).split())):
                add("sentence", sentence)
            paragraph.clear()
        if item:
            add("item", " ".join(" ".join(item).split()))
            item.clear()

    i = 0
    previous_blank = True
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        fence = _FENCE.match(line)
        if fence:
            flush()
            end = next(
                (j for j in range(i + 1, len(lines)) if _closing(fence.group(1), lines[j])), None
            )
            if end is None:  # cut by the chunk boundary: not quotable
                break
            if end > i + 1:
                new_block()
                add("code", "\n".join(lines[i : end + 1]), recent)
            i, previous_blank, recent = end + 1, False, ""
            continue
        if not stripped or stripped.startswith("#"):
            flush()  # a blank line or a heading ends a paragraph
            recent = recent if not stripped else ""
            if stripped:
                heading = stripped.lstrip("#").strip()
                in_list = False
        elif (
            stripped.startswith("|")
            and i + 1 < len(lines)
            and _TABLE_DELIMITER.match(lines[i + 1].strip())
        ):
            flush()
            recent = ""
            new_block()
            # a table: each body row is a unit, the header row its context
            header, i = stripped, i + 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                add("row", lines[i].strip(), header)
                i += 1
            previous_blank = False
            continue
        elif stripped.startswith(("|", ">", "<")) or (
            previous_blank and line.startswith("    ") and not item
        ):
            flush()
            recent = ""
            in_list = False
            # a table, block quote, HTML or indented code: skipped up to a blank line
            while i + 1 < len(lines) and lines[i + 1].strip() and not _FENCE.match(lines[i + 1]):
                i += 1
        elif _ITEM.match(line):
            flush()
            if not in_list:
                new_block()
                in_list = True
            item.append(stripped)
            recent = stripped
        elif item:
            item.append(stripped)  # a wrapped item line
            recent = stripped
        else:
            in_list = False
            paragraph.append(stripped)
            recent = stripped
        previous_blank = not stripped
        i += 1
    flush()
    return units


def cite(sentence: str, number: int) -> str:
    """``sentence`` with `` [number]`` before its final full stop, question or
    exclamation mark, after any closing quote or bracket (at its end when it has none:
    nothing is added to the quote but the marker)."""
    body = sentence.rstrip()
    end = len(body)
    while end and body[end - 1] in _FINAL:
        end -= 1
    head = body[:end].rstrip()
    # a space before the punctuation ("says .") stays after the marker, so removing
    # " [n]" gives the sentence back
    return f"{head} [{number}]{body[len(head) :]}"


def cite_unit(unit: Unit, number: int) -> str:
    """The unit as the answer quotes it, cited: each sentence of a prose unit or list
    item carries the marker (a reader, and the citation check, take a sentence without
    one for an uncited claim); a code block is followed by a line with the marker."""
    if unit.kind == "code":
        return f"{unit.text}\n[{number}]"
    if unit.kind == "row":
        return f"{unit.text} [{number}]"
    return " ".join(cite(s, number) for s in split_sentences(unit.text))


def remove_markers(text: str) -> str:
    """``text`` without its citation markers and the spaces right before them; every
    other character is kept."""
    return _SPACED_MARKER.sub("", text)


def is_marker_line(line: str) -> bool:
    """Whether ``line`` holds citation markers only (a code block's citation)."""
    return bool(_MARKER_LINE.match(line))


def fence_of(line: str) -> str | None:
    """The fence a line opens ("```", "~~~~"), or None."""
    match = _FENCE.match(line)
    return match.group(1) if match else None


def closes(fence: str, line: str) -> bool:
    """Whether ``line`` closes a block opened with ``fence``."""
    return _closing(fence, line)
