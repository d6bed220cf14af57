"""PDF to paragraphs with pypdf, and to sections where the fonts show headings.

The text layer is read page by page: one paragraph per page, blank lines inside a
page's text splitting it further; title and summary come from the document
information, and author, dates and keywords become properties.

Headings are found from the fonts pypdf reports while it extracts (its text
visitor: the font's name and size with the text matrix, per text run), so the text
is the same as without them. The body size is the size most of the characters are
set in; a short line (at most 120 characters, 16 words, not ending with a full
stop) set at least 15% larger is a heading, and so is such a line set entirely in
a bold face at the body size. Larger sizes are higher levels (up to five); a size
used once, by the first heading, is the document's title. When no heading is found
the text stays plain paragraphs, as before.

Why pypdf's visitor rather than pdfplumber (MIT) or PyMuPDF (AGPL-3.0, excluded):
pypdf already reads every PDF here, so headings cost no second parse and no new
dependency; pdfplumber's character boxes come from pdfminer.six, a second complete
PDF parser in pure Python. Tables are not detected: pypdf reports no positions of
cells, and a table's rows stay lines of text in their paragraph.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pypdf import PageObject, PdfReader

from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.markup import escape_text

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_BLANK_RUNS = re.compile(r"\n\s*\n\s*")
# What PDF writers put in the information fields when the author gave nothing.
_PLACEHOLDERS = frozenset({"untitled", "unspecified", "unknown", "none", "null", "anonymous"})
_HEADING_RATIO = 1.15
_MAX_HEADING_CHARS = 120
_MAX_HEADING_WORDS = 16
_MAX_LEVELS = 5
_BOLD_NAMES = ("bold", "black", "heavy", "semibold", "demi")


@dataclass(frozen=True)
class PdfText:
    title: str
    text: str
    summary: str
    markdown: bool = False
    """Whether ``text`` is Markdown with headings (fonts showed some), else plain."""
    properties: dict[str, str] = field(default_factory=dict)


@dataclass
class _Line:
    text: str = ""
    sizes: Counter[float] = field(default_factory=Counter)
    """Characters per font size (points, rounded to a half)."""
    bold: int = 0
    """Characters set in a bold face."""


def _clean(raw: str) -> str:
    return " ".join(_CONTROL.sub("", raw).split())


def _page_text(raw: str) -> str:
    lines = (_clean(line) for line in raw.split("\n"))
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


def _run_size(font_size: float, cm: Sequence[float], tm: Sequence[float]) -> float:
    """The size a run is seen at: its font size scaled by the text and page matrices."""
    scale_tm = (tm[2] ** 2 + tm[3] ** 2) ** 0.5
    scale_cm = (cm[2] ** 2 + cm[3] ** 2) ** 0.5
    return round(font_size * (scale_tm or 1.0) * (scale_cm or 1.0) * 2) / 2


def _is_bold(font: Any) -> bool:
    name = str(font.get("/BaseFont", "")).lower() if isinstance(font, dict) else ""
    return any(mark in name for mark in _BOLD_NAMES)


def _read_page(page: PageObject) -> tuple[str, list[_Line]] | None:
    """The page's text and its lines with their fonts; None when only this page is
    damaged (the rest still counts). The lines are empty when the runs pypdf reported
    do not add up to its text (then the page has no headings)."""
    lines = [_Line()]

    def visit(text: str, cm: Any, tm: Any, font: Any, font_size: Any) -> None:
        size = _run_size(float(font_size or 0), cm, tm)
        bold = _is_bold(font)
        for i, part in enumerate(text.split("\n")):
            if i:
                lines.append(_Line())
            line = lines[-1]
            line.text += part
            visible = len(part.strip())
            line.sizes[size] += visible
            line.bold += visible if bold else 0

    try:
        raw = page.extract_text(visitor_text=visit)
    except Exception:
        return None
    if "".join(line.text + "\n" for line in lines)[:-1] != raw:
        lines = []
    return _page_text(raw), lines


def _body_size(pages: Sequence[list[_Line]]) -> float:
    sizes: Counter[float] = Counter()
    for lines in pages:
        for line in lines:
            sizes.update(line.sizes)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _heading_size(line: _Line, body: float) -> float | None:
    """The size the line is a heading at (its own, or the body's for a bold line)."""
    text = _clean(line.text)
    chars = sum(line.sizes.values())
    if not text or not chars or body <= 0:
        return None
    if len(text) > _MAX_HEADING_CHARS or len(text.split()) > _MAX_HEADING_WORDS:
        return None
    if text.endswith((".", ",", ";")) or not any(c.isalpha() for c in text):
        return None
    size = line.sizes.most_common(1)[0][0]
    if size >= body * _HEADING_RATIO:
        return size
    if line.bold >= chars and size >= body * 0.95:
        return body
    return None


def _structured(pages: Sequence[tuple[str, list[_Line]] | None]) -> tuple[str, str] | None:
    """The pages as Markdown with headings, and the title heading's text (or ""); None
    when no line is a heading."""
    body = _body_size([p[1] for p in pages if p is not None])
    marks = [
        [(line, _heading_size(line, body)) for line in p[1]] if p is not None else [] for p in pages
    ]
    sizes = Counter(size for lines in marks for _, size in lines if size is not None)
    if not sizes:
        return None
    ranked = sorted(sizes, reverse=True)
    first = next(size for lines in marks for _, size in lines if size is not None)
    title_size = ranked[0] if sizes[ranked[0]] == 1 and first == ranked[0] else None
    levels = {
        size: min(2 + rank, 1 + _MAX_LEVELS)
        for rank, size in enumerate(s for s in ranked if s != title_size)
    }
    title = ""
    parts: list[str] = []
    for page, lines in zip(pages, marks, strict=True):
        if page is None or not page[0]:
            continue
        if not lines:  # no fonts for this page: its text as it is
            parts.append(escape_text(page[0]))
            continue
        block: list[str] = []
        for line, size in lines:
            text = _clean(line.text)
            if size is None:
                block.append(text)
                continue
            parts.append(escape_text(_page_text("\n".join(block))))
            block = []
            if size == title_size:
                title = text
            parts.append("#" * (1 if size == title_size else levels[size]) + " " + text)
        parts.append(escape_text(_page_text("\n".join(block))))
    return "\n\n".join(p for p in parts if p) + "\n", title


def _information(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    text = " ".join(str(value or "").split())
    return "" if text.lower() in _PLACEHOLDERS else text


def _properties(info: Any) -> dict[str, str]:
    """Author, dates and keywords; {} when the information is missing or malformed
    (the text is still worth reading)."""
    if info is None:
        return {}
    try:
        values = {
            "author": info.author,
            "created": _date(info, "creation_date"),
            "modified": _date(info, "modification_date"),
            "tags": info.get("/Keywords"),
        }
    except Exception:
        return {}
    kept = {key: _information(value) for key, value in values.items()}
    return {key: value for key, value in kept.items() if value}


def _date(info: Any, name: str) -> datetime | None:
    try:  # a malformed date string raises in pypdf's parser
        value = getattr(info, name)
    except Exception:
        return None
    return value if isinstance(value, datetime) else None


def parse_pdf(content: bytes) -> PdfText:
    """Extracts the text layer. Raises InvalidInput for an unreadable, encrypted or empty PDF."""
    try:
        reader = PdfReader(io.BytesIO(content))
        if reader.is_encrypted and not reader.decrypt(""):
            raise InvalidInput("the PDF is encrypted")
        pages = [_read_page(page) for page in reader.pages]
        info = reader.metadata
        meta_title = _information(info.title if info else None)
        meta_subject = _information(info.subject if info else None)
        properties = _properties(info)
    except InvalidInput:
        raise
    except Exception as error:
        # A damaged file fails in many ways inside pypdf (its own errors, but also
        # KeyError, ValueError, zlib errors, ...); all of them mean "not readable".
        raise InvalidInput(f"the PDF could not be read ({type(error).__name__})") from None
    if not pages:
        raise InvalidInput("the PDF has no pages")
    text = "\n\n".join(p[0] for p in pages if p is not None and p[0])
    if not text and None in pages:
        raise InvalidInput("the PDF could not be read (no page has readable text)")
    if not text:
        raise InvalidInput("the PDF has no text layer (a scanned PDF needs OCR first)")
    structured = _structured(pages)
    if structured is None:
        first_line = text.split("\n", 1)[0][:200]
        return PdfText(meta_title or first_line, text + "\n", meta_subject, False, properties)
    markdown, heading_title = structured
    title = meta_title or heading_title or text.split("\n", 1)[0][:200]
    return PdfText(title, markdown, meta_subject, True, properties)
