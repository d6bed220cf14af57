"""Turn raw documents into a title, metadata and Markdown-like text.

Markdown passes through with its front matter (PyYAML) split off; plain text is
kept as paragraphs; HTML becomes Markdown (``html_parser``: lxml picks the
page's main content, html-to-markdown converts it); PDF becomes paragraphs, with
headings where its fonts show them (``pdf_parser``: pypdf). reStructuredText
(``rst_parser``: docutils), DOCX and PPTX (``office_parser``: python-docx,
python-pptx), Jupyter notebooks (``notebook_parser``) and EPUB (``epub_parser``)
become Markdown with their headings, code and tables, and their document
properties (author, dates, tags) in place of front matter. A document that cannot
be read raises InvalidInput with the reason the ingest report shows; the rest of a
batch goes in.

Everything here reads untrusted bytes: no pattern that backtracks, front matter
bounded in size and depth with YAML anchors refused, zip containers checked before
they are unpacked (``archive``), and titles capped. The service also runs all of it
in a worker process under a time and memory budget (``sandbox``), for what a
third-party parser may still do.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import yaml

from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.charset import decode, wide_bom
from groundwire_retriever.ingest.chunker import parse_heading
from groundwire_retriever.ingest.epub_parser import parse_epub
from groundwire_retriever.ingest.html_parser import decode_html, parse_html
from groundwire_retriever.ingest.markup import Extracted
from groundwire_retriever.ingest.notebook_parser import parse_notebook
from groundwire_retriever.ingest.office_parser import parse_docx, parse_pptx
from groundwire_retriever.ingest.pdf_parser import parse_pdf
from groundwire_retriever.ingest.rst_parser import parse_rst

log = logging.getLogger("groundwire.retriever")

FORMATS = ("markdown", "text", "html", "pdf", "rst", "docx", "pptx", "notebook", "epub")
_SUFFIXES = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".rst": "rst",
    ".rest": "rst",
    ".docx": "docx",
    ".pptx": "pptx",
    ".ipynb": "notebook",
    ".epub": "epub",
}
# Parsers that read the bytes themselves (zip containers; a notebook's JSON), so the
# text checks below (control characters, UTF-8) are theirs to make.
_BYTE_PARSERS: dict[str, Callable[[bytes], Extracted]] = {
    "docx": parse_docx,
    "pptx": parse_pptx,
    "epub": parse_epub,
    "notebook": parse_notebook,
}
# Front matter is read line by line, not with a pattern: ``\A---\s*\n(.*?)\n---``
# took 11 s on 40 KB of newlines after the opening line. Its size and nesting are
# bounded and YAML anchors are refused, so loading it and turning its values into
# text stays proportional to its few kilobytes (a 531-byte alias bomb expanded to
# 540 MiB before).
MAX_FRONT_MATTER_CHARS = 64 * 1024
MAX_FRONT_MATTER_DEPTH = 16
MAX_TITLE_CHARS = 200
# C0 controls other than tab, newline, vertical tab, form feed, carriage return, escape.
_CONTROL_BYTES = bytes(sorted(set(range(0x20)) - {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1B}))
_SNIFF_BYTES = 64 * 1024
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_COMMENT_OPEN = re.compile(r"^ {0,3}<!--")
_MAX_CONTROL_SHARE = 0.05


@dataclass(frozen=True)
class ParsedDocument:
    title: str
    body: str
    """Markdown (headings as ATX '#' lines) or plain paragraphs (see ``markdown``)."""
    front_matter: dict[str, str] = field(default_factory=dict)
    """Markdown front matter as written, or the document's properties in its place
    (DOCX/PPTX core properties, PDF information, reStructuredText bibliographic
    fields, notebook and EPUB metadata): ``author``, ``created``, ``tags``, ..."""
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
            title=_title(title or pdf.title or stem),
            body=pdf.text,
            front_matter=pdf.properties,
            summary=pdf.summary,
            markdown=pdf.markdown,
        )
    if fmt in _BYTE_PARSERS:
        return _structured(_BYTE_PARSERS[fmt](content), title, stem)
    if not wide_bom(content):
        _refuse_binary(content)
    if fmt == "html":
        try:
            page = parse_html(decode_html(content))
        except InvalidInput:
            raise
        except RecursionError:  # tree walkers recurse per nesting level
            raise InvalidInput("the HTML nests too deeply to parse (RecursionError)") from None
        except Exception as error:
            # A parser bug on odd input (lxml refuses control characters in text it is
            # given, for one) fails this document only, with the trace in the log.
            log.warning("the HTML parser failed on %s", filename or "a document", exc_info=True)
            raise InvalidInput(f"the HTML could not be parsed ({type(error).__name__})") from None
        return ParsedDocument(
            title=_title(title or page.title or stem),
            body=page.markdown,
            summary=page.summary,
            url=page.url,
        )
    # a byte-order mark is consumed (it would hide front matter); text that is not
    # UTF-8 is read in the encoding a statistical guess finds (charset.decode)
    text = decode(content, html=False)[0].replace("\r\n", "\n")
    if fmt == "rst":
        return _structured(parse_rst(text), title, stem)
    if fmt == "text":
        if not text.strip():
            raise InvalidInput("the document has no text")
        return ParsedDocument(title=_title(title or stem), body=text, markdown=False)
    meta: dict[str, str] = {}
    split = _split_front_matter(text)
    if split is not None:
        raw, text = split
        meta = _front_matter(raw)
    text = without_comment_blocks(text)
    if not text.strip():
        raise InvalidInput("the document has no text")
    doc_title = title or meta.get("title") or _first_heading(text) or stem
    return ParsedDocument(
        title=_title(doc_title),
        body=text,
        front_matter=meta,
        summary=meta.get("summary") or meta.get("description", ""),
        url=meta.get("url", ""),
        doc_type=meta.get("type", ""),
    )


def without_comment_blocks(text: str) -> str:
    """Markdown without its HTML comment blocks (CommonMark's HTML block type 2: a line
    opening with ``<!--``, up to the line holding ``-->``), which a renderer never shows:
    Node.js's API docs carry a ``<!-- YAML added: … -->`` history before every function,
    and stored, it was retrieved, embedded and quoted as the answer. Code fences are kept
    as they are, and so is an unclosed ``<!--`` (CommonMark would hide the rest of the
    document; dropping it could lose everything after a typo)."""
    if "<!--" not in text:
        return text
    lines = text.split("\n")
    kept: list[str] = []
    fence: str | None = None
    closable = True  # False once a search found no "-->" to the end: none will
    i = 0
    while i < len(lines):
        line = lines[i]
        if fence is not None:
            closing = line.strip()
            if closing and set(closing) == {fence[0]} and len(closing) >= len(fence):
                fence = None
        elif opened := _FENCE_OPEN.match(line):
            fence = opened.group(1)
        elif closable and _COMMENT_OPEN.match(line):
            after = line.index("<!--") + 4
            end = next(
                (j for j in range(i, len(lines)) if "-->" in lines[j][after if j == i else 0 :]),
                None,
            )
            if end is not None:
                i = end + 1
                continue
            closable = False
        kept.append(line)
        i += 1
    return "\n".join(kept)


def _structured(doc: Extracted, title: str, stem: str) -> ParsedDocument:
    """A document read by one of the structured-format parsers."""
    return ParsedDocument(
        title=_title(title or doc.title or _first_heading(doc.markdown) or stem),
        body=doc.markdown,
        front_matter=doc.properties,
        summary=doc.summary,
    )


def _title(text: str) -> str:
    """The title, at most MAX_TITLE_CHARS: it is stored with every chunk and leads
    every chunk's heading path, so a first heading a megabyte long must not be."""
    text = text.strip()
    if len(text) <= MAX_TITLE_CHARS:
        return text
    return text[: MAX_TITLE_CHARS - 1].rstrip() + "…"


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


def _split_front_matter(text: str) -> tuple[str, str] | None:
    """The front matter (between a first line ``---`` and the next ``---`` line) and
    the rest; None when the first line is not ``---``. Raises InvalidInput when no
    closing line comes within MAX_FRONT_MATTER_CHARS."""
    first_end = text.find("\n")
    if first_end < 0 or text[:first_end].rstrip() != "---":
        return None
    start = pos = first_end + 1
    while pos - start <= MAX_FRONT_MATTER_CHARS:
        end = text.find("\n", pos)
        line = text[pos:] if end < 0 else text[pos:end]
        if line.rstrip() == "---":
            return text[start:pos], ("" if end < 0 else text[end + 1 :])
        if end < 0:
            break
        pos = end + 1
    raise InvalidInput(
        f"the front matter (opened by '---' on the first line) is not closed by a '---' "
        f"line within {MAX_FRONT_MATTER_CHARS // 1024} KiB"
    )


def _front_matter(raw: str) -> dict[str, str]:
    """The front matter's top-level keys as text; {} when it is not a mapping.

    Raises InvalidInput for invalid YAML, anchors or aliases (an alias bomb expands a
    few hundred bytes to gigabytes), or nesting deeper than MAX_FRONT_MATTER_DEPTH.
    """
    try:
        depth = 0
        # The event stream is flat (no recursion, no expansion): check it before
        # anything builds objects from it.
        for event in yaml.parse(raw, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise InvalidInput("the front matter uses YAML anchors or aliases (&, *)")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_FRONT_MATTER_DEPTH:
                    raise InvalidInput(
                        f"the front matter nests deeper than {MAX_FRONT_MATTER_DEPTH} levels"
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        loaded = yaml.safe_load(raw)
    except yaml.YAMLError:
        raise InvalidInput("the front matter is not valid YAML") from None
    except ValueError as error:  # e.g. an integer past Python's 4300-digit limit
        raise InvalidInput(f"the front matter is not valid YAML ({error})") from None
    if not isinstance(loaded, dict):
        return {}
    # Bounded above: no aliases, at most MAX_FRONT_MATTER_CHARS of source.
    return {str(k): _front_matter_value(v) for k, v in loaded.items() if v is not None}


def _front_matter_value(value: object) -> str:
    """A front-matter value as text: a list of scalars (``tags: [a, b]``) as "a, b",
    the way document properties list keywords; anything else as Python writes it."""
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ", ".join(str(v) for v in value)
    return str(value)


def _first_heading(text: str) -> str:
    """The first level-1 ATX heading's text."""
    for line in text.split("\n"):
        if line.startswith("# ") or line.startswith("#\t"):
            heading = parse_heading(line)
            if heading is not None and heading[1]:
                return heading[1]
    return ""
