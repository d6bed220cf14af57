"""Word (DOCX) and PowerPoint (PPTX) documents to Markdown, with their properties.

python-docx and python-pptx (both MIT; lxml underneath, and Pillow and XlsxWriter for
python-pptx, under the HPND-style MIT-CMU and BSD-2-Clause licences) read Office
Open XML: a zip of XML parts. They were chosen because they are the kept,
permissively licensed readers of these formats, and they give the structure we
need without rendering: paragraph styles, tables, slides, core properties.

- DOCX: a paragraph whose style is a heading (``Heading 1``-``9``, or a style based
  on one, by name or by the style id Word keeps in English when names are
  localised) becomes an ATX heading one level deeper (the document's title is the
  level above: the chunker would read a leading ``#`` heading as the title and drop
  it from the first section's heading path); the ``Title`` style gives the title
  when the properties have none; list styles become list items; tables become pipe
  tables, a row per row; other paragraphs stay paragraphs.
- PPTX: each slide is a section headed by its title (``Slide N`` without one); its
  text frames become paragraphs (indented by outline level), its tables pipe
  tables, its speaker notes a closing paragraph. Pictures and charts have no text.
- Core properties (author, created, modified, keywords, subject, category,
  language) are kept as properties under front-matter names: ``author``,
  ``created``/``modified`` (ISO 8601), ``tags`` (the keywords), ``subject``, ...

The zip container is checked before either library opens it (``archive``).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import docx
import pptx
from docx.document import Document as DocxDocument
from docx.table import Table as DocxTable
from docx.text.paragraph import Paragraph
from pptx.enum.shapes import MSO_SHAPE_TYPE
from pptx.presentation import Presentation

from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.archive import open_zip
from groundwire_retriever.ingest.markup import Extracted, MarkdownWriter

log = logging.getLogger("groundwire.retriever")

# A heading style is found within this many steps up its ``based on`` chain.
_MAX_STYLE_DEPTH = 8
# Groups nest groups; real decks nest a few levels.
_MAX_GROUP_DEPTH = 16


def _properties(core: Any) -> dict[str, str]:
    """Core properties under front-matter names; empty ones left out."""
    values = {
        "author": core.author,
        "created": core.created,
        "modified": core.modified,
        "tags": core.keywords,
        "subject": core.subject,
        "category": core.category,
        "language": core.language,
    }
    kept: dict[str, str] = {}
    for key, value in values.items():
        if isinstance(value, datetime):
            # OOXML dates are UTC (W3CDTF); python-pptx drops the zone it read
            value = value if value.tzinfo else value.replace(tzinfo=UTC)
            kept[key] = value.isoformat().replace("+00:00", "Z")
        elif value and str(value).strip():
            kept[key] = " ".join(str(value).split())
    return kept


def _read(content: bytes, kind: str, reader: Callable[[bytes], Extracted]) -> Extracted:
    """``reader(content)``, its failures as InvalidInput. Missing parts, broken XML,
    wrong content types and damaged zip members fail in many ways inside the
    libraries (KeyError, ValueError, BadZipFile, lxml's errors), when the file is
    opened or later when a part is read; all mean "not readable"."""
    open_zip(content, kind).close()
    try:
        return reader(content)
    except (InvalidInput, MemoryError, RecursionError):
        raise
    except Exception as error:
        log.info("the %s reader refused a document: %r", kind, error)
        raise InvalidInput(f"the {kind} file could not be read ({type(error).__name__})") from None


def _heading_level(paragraph: Paragraph) -> int:
    """The heading level of the paragraph's style: 0 when it is not a heading, -1
    for the ``Title`` style (the document's title, not a section)."""
    style: Any = paragraph.style
    for _ in range(_MAX_STYLE_DEPTH):
        if style is None:
            return 0
        for name in (str(style.style_id or ""), str(style.name or "")):
            compact = name.replace(" ", "").lower()
            if compact == "title":
                return -1
            if compact.startswith("heading") and compact[7:].isdigit():
                return int(compact[7:])
        style = style.base_style
    return 0


def _list_mark(paragraph: Paragraph) -> str:
    name = str(getattr(paragraph.style, "name", "") or "").lower()
    if name.startswith("list number"):
        return "1. "
    if name.startswith("list"):
        return "- "
    return ""


def _docx_table(table: DocxTable) -> list[list[str]]:
    rows = []
    for row in table.rows:
        cells = []
        seen: set[int] = set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # a merged cell is listed once per column it spans
                continue
            seen.add(id(cell._tc))
            cells.append(cell.text)
        rows.append(cells)
    return rows


def parse_docx(content: bytes) -> Extracted:
    """A DOCX document as Markdown. Raises InvalidInput for an unreadable file, one
    that would unpack too far, or one with no text."""
    return _read(content, "DOCX", _docx)


def _docx(content: bytes) -> Extracted:
    document: DocxDocument = docx.Document(io.BytesIO(content))
    out = MarkdownWriter()
    title = first_heading = ""
    for item in document.iter_inner_content():
        if isinstance(item, DocxTable):
            out.table(_docx_table(item))
            continue
        level = _heading_level(item)
        if level < 0:
            title = title or " ".join(item.text.split())
        elif level:
            out.heading(level + 1, item.text)
            first_heading = first_heading or " ".join(item.text.split())
        else:
            text = item.text
            out.paragraph(_list_mark(item) + text if text.strip() else "")
    if not out.has_text():
        raise InvalidInput("the DOCX document has no text")
    core = document.core_properties
    return Extracted(
        title=" ".join(str(core.title or "").split()) or title or first_heading,
        markdown=out.text(),
        properties=_properties(core),
        summary=" ".join(str(core.comments or "").split()),
    )


def _shape_text(shape: Any, out: MarkdownWriter, depth: int = 0) -> None:
    if depth > _MAX_GROUP_DEPTH:
        return
    if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
        for inner in shape.shapes:
            _shape_text(inner, out, depth + 1)
        return
    if getattr(shape, "has_table", False):
        out.table([[cell.text for cell in row.cells] for row in shape.table.rows])
        return
    if getattr(shape, "has_text_frame", False):
        lines = []
        for paragraph in shape.text_frame.paragraphs:
            text = " ".join(paragraph.text.split())
            if text:
                lines.append("  " * min(paragraph.level, 8) + text)
        out.paragraph("\n".join(lines))


def parse_pptx(content: bytes) -> Extracted:
    """A PPTX deck as Markdown, a section per slide. Raises InvalidInput for an
    unreadable file, one that would unpack too far, or one with no text."""
    return _read(content, "PPTX", _pptx)


def _pptx(content: bytes) -> Extracted:
    deck: Presentation = pptx.Presentation(io.BytesIO(content))
    out = MarkdownWriter()
    first_title = ""
    for number, slide in enumerate(deck.slides, start=1):
        title_shape = slide.shapes.title
        title = " ".join(title_shape.text.split()) if title_shape is not None else ""
        first_title = first_title or title
        out.heading(2, title or f"Slide {number}")
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            _shape_text(shape, out)
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            if notes is not None and notes.text.strip():
                out.paragraph("Notes: " + notes.text.strip())
    if not out.has_text():
        raise InvalidInput("the PPTX deck has no text")
    core = deck.core_properties
    return Extracted(
        title=" ".join(str(core.title or "").split()) or first_title,
        markdown=out.text(),
        properties=_properties(core),
        summary=" ".join(str(core.comments or "").split()),
    )
