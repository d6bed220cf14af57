"""Turn raw documents into a title, front matter and Markdown-like text.

Markdown passes through with its front matter split off; plain text is kept as
paragraphs. HTML and PDF parsing arrive with the retrieval work; until then they are
reported as unsupported, per document, and the rest of a batch goes in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import yaml

from groundwire_core.errors import InvalidInput

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


@dataclass(frozen=True)
class ParsedDocument:
    title: str
    body: str
    """Markdown (headings as ATX '#' lines) or plain paragraphs."""
    front_matter: dict[str, str] = field(default_factory=dict)
    summary: str = ""


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
    if fmt in ("html", "pdf"):
        raise InvalidInput(f"{fmt} documents are not supported yet")
    if fmt not in FORMATS:
        raise InvalidInput(f"unknown document type {fmt!r}")
    if b"\x00" in content:
        raise InvalidInput("the content looks binary (it contains NUL bytes)")
    try:
        text = content.decode("utf-8-sig")  # a byte-order mark would hide front matter
    except UnicodeDecodeError as error:
        raise InvalidInput(f"the content is not valid UTF-8 (byte {error.start})") from None
    text = text.replace("\r\n", "\n")
    meta: dict[str, str] = {}
    if fmt == "markdown":
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
    doc_title = title or meta.get("title") or _first_heading(text) or PurePosixPath(filename).stem
    return ParsedDocument(
        title=doc_title.strip(), body=text, front_matter=meta, summary=meta.get("summary", "")
    )


def _first_heading(text: str) -> str:
    match = re.search(r"^#\s+(.+)$", text, re.MULTILINE)
    return match.group(1) if match else ""
