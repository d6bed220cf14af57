"""Turn raw documents into a title, metadata and Markdown-like text.

Markdown passes through with its front matter (PyYAML) split off; plain text is
kept as paragraphs; HTML becomes Markdown (``html_parser``: BeautifulSoup and
markdownify); PDF becomes one paragraph per page (``pdf_parser``: pypdf). A
document that cannot be read raises InvalidInput with the reason the ingest report
shows; the rest of a batch goes in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import yaml

from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.html_parser import decode_html, parse_html
from groundwire_retriever.ingest.pdf_parser import parse_pdf

FORMATS = ("markdown", "text", "html", "pdf")
_SUFFIXES = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*(?:\n|\Z)", re.DOTALL)
# C0 controls other than tab, newline, vertical tab, form feed, carriage return, escape.
_CONTROL_BYTES = bytes(sorted(set(range(0x20)) - {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1B}))
_SNIFF_BYTES = 64 * 1024
_MAX_CONTROL_SHARE = 0.05


@dataclass(frozen=True)
class ParsedDocument:
    title: str
    body: str
    """Markdown (headings as ATX '#' lines) or plain paragraphs (see ``markdown``)."""
    front_matter: dict[str, str] = field(default_factory=dict)
    """Markdown front matter as written; empty for other formats."""
    summary: str = ""
    """Front matter ``summary``/``description``, HTML meta description, PDF subject."""
    url: str = ""
    """The URL the document declares: front matter ``url``, HTML canonical link."""
    doc_type: str = ""
    """Front matter ``type``."""
    markdown: bool = True
    """Whether ``body`` has Markdown structure (headings, fences, tables) to honour."""


def guess_format(declared: str, filename: str) -> str:
    """The document format: declared, else from the file name's suffix."""
    if declared:
        return declared
    fmt = _SUFFIXES.get(PurePosixPath(filename).suffix.lower())
    if fmt is None:
        raise InvalidInput(
            f"unknown document type for {filename or 'an unnamed document'!r}; "
            f"use one of {', '.join(FORMATS)}"
        )
    return fmt


def parse(content: bytes, fmt: str, *, title: str = "", filename: str = "") -> ParsedDocument:
    """Parses one document. Raises InvalidInput with a reason for the ingest report."""
    if fmt not in FORMATS:
        raise InvalidInput(f"unknown document type {fmt!r}; use one of {', '.join(FORMATS)}")
    stem = PurePosixPath(filename).stem
    if fmt == "pdf":
        pdf = parse_pdf(content)
        return ParsedDocument(
            title=(title or pdf.title or stem).strip(),
            body=pdf.text,
            summary=pdf.summary,
            markdown=False,
        )
    _refuse_binary(content)
    if fmt == "html":
        page = parse_html(decode_html(content))
        return ParsedDocument(
            title=(title or page.title or stem).strip(),
            body=page.markdown,
            summary=page.summary,
            url=page.url,
        )
    try:
        text = content.decode("utf-8-sig")  # a byte-order mark would hide front matter
    except UnicodeDecodeError as error:
        raise InvalidInput(f"the content is not valid UTF-8 (byte {error.start})") from None
    text = text.replace("\r\n", "\n")
    if fmt == "text":
        if not text.strip():
            raise InvalidInput("the document has no text")
        return ParsedDocument(title=(title or stem).strip(), body=text, markdown=False)
    meta: dict[str, str] = {}
    match = _FRONT_MATTER.match(text)
    if match:
        try:
            loaded = yaml.safe_load(match.group(1))
        except yaml.YAMLError:
            raise InvalidInput("the front matter is not valid YAML") from None
        if isinstance(loaded, dict):
            meta = {str(k): str(v) for k, v in loaded.items() if v is not None}
        text = text[match.end() :]
    if not text.strip():
        raise InvalidInput("the document has no text")
    doc_title = title or meta.get("title") or _first_heading(text) or stem
    return ParsedDocument(
        title=doc_title.strip(),
        body=text,
        front_matter=meta,
        summary=meta.get("summary") or meta.get("description", ""),
        url=meta.get("url", ""),
        doc_type=meta.get("type", ""),
    )


def _refuse_binary(content: bytes) -> None:
    """Raises InvalidInput for content that is not text (NUL bytes, many control bytes)."""
    if b"\x00" in content:
        raise InvalidInput("the content looks binary (it contains NUL bytes)")
    head = content[:_SNIFF_BYTES]
    controls = len(head) - len(head.translate(None, _CONTROL_BYTES))
    if head and controls / len(head) > _MAX_CONTROL_SHARE:
        raise InvalidInput(
            f"the content looks binary ({controls * 100 // len(head)}% control characters)"
        )


def _first_heading(text: str) -> str:
    match = re.search(r"^#\s+(.+)$", text, re.MULTILINE)
    return match.group(1) if match else ""
