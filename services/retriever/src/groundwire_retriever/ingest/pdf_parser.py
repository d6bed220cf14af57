"""PDF to plain paragraphs with pypdf: one paragraph per page (blank lines inside a
page's text split it further), title and summary from the document information."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

from pypdf import PageObject, PdfReader

from groundwire_core.errors import InvalidInput

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_BLANK_RUNS = re.compile(r"\n\s*\n\s*")
# What PDF writers put in the information fields when the author gave nothing.
_PLACEHOLDERS = frozenset({"untitled", "unspecified", "unknown", "none", "null", "anonymous"})


@dataclass(frozen=True)
class PdfText:
    title: str
    text: str
    summary: str


def _page_text(raw: str) -> str:
    lines = (" ".join(line.split()) for line in _CONTROL.sub("", raw).split("\n"))
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


def _readable_text(page: PageObject) -> str | None:
    """The page's text, or None when only this page is damaged (the rest still counts)."""
    try:
        return _page_text(page.extract_text())
    except Exception:
        return None


def _information(value: object) -> str:
    text = " ".join(str(value or "").split())
    return "" if text.lower() in _PLACEHOLDERS else text


def parse_pdf(content: bytes) -> PdfText:
    """Extracts the text layer. Raises InvalidInput for an unreadable, encrypted or empty PDF."""
    try:
        reader = PdfReader(io.BytesIO(content))
        if reader.is_encrypted and not reader.decrypt(""):
            raise InvalidInput("the PDF is encrypted")
        pages = [_readable_text(page) for page in reader.pages]
        info = reader.metadata
        meta_title = _information(info.title if info else None)
        meta_subject = _information(info.subject if info else None)
    except InvalidInput:
        raise
    except Exception as error:
        # A damaged file fails in many ways inside pypdf (its own errors, but also
        # KeyError, ValueError, zlib errors, ...); all of them mean "not readable".
        raise InvalidInput(f"the PDF could not be read ({type(error).__name__})") from None
    if not pages:
        raise InvalidInput("the PDF has no pages")
    text = "\n\n".join(p for p in pages if p)
    if not text and None in pages:
        raise InvalidInput("the PDF could not be read (no page has readable text)")
    if not text:
        raise InvalidInput("the PDF has no text layer (a scanned PDF needs OCR first)")
    first_line = text.split("\n", 1)[0][:200]
    return PdfText(title=meta_title or first_line, text=text + "\n", summary=meta_subject)
