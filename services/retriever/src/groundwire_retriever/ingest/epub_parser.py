"""EPUB e-books to Markdown: the chapters in reading order through the HTML path.

An EPUB is a zip (checked first by ``archive``) whose ``META-INF/container.xml``
names a package document (OPF): Dublin Core metadata, a manifest of parts and a
spine giving the reading order. The chapters are XHTML, so each goes through
``html_parser`` like any page and keeps its headings, one level down: a chapter's
``<h1>`` is a section of the book. Read with ``zipfile`` and lxml
rather than ``ebooklib``, which is AGPL-3.0; the container format needs no more
than these two documents. Their XML is parsed without DTDs, entities or network
access.

Properties from the Dublin Core metadata: ``author`` (the creators), ``created``
(the date), ``tags`` (the subjects), ``language``, ``publisher``; the description is
the summary.
"""

from __future__ import annotations

import posixpath
import zipfile
import zlib
from typing import Any
from urllib.parse import unquote

from lxml import etree

from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.archive import open_zip
from groundwire_retriever.ingest.html_parser import decode_html, parse_html
from groundwire_retriever.ingest.markup import Extracted, demoted

_NS = {
    "c": "urn:oasis:names:tc:opendocument:xmlns:container",
    "opf": "http://www.idpf.org/2007/opf",
    "dc": "http://purl.org/dc/elements/1.1/",
}
_CHAPTER_TYPES = frozenset({"application/xhtml+xml", "text/html"})
_PROPERTIES = (
    ("author", "creator"),
    ("created", "date"),
    ("tags", "subject"),
    ("language", "language"),
    ("publisher", "publisher"),
)
_NO_TEXT = "no text"  # html_parser's refusal of an empty page (a cover image)


def _member(archive: zipfile.ZipFile, name: str) -> bytes:
    """One member's bytes. Raises InvalidInput when it is missing or damaged."""
    try:
        return archive.read(name)
    except KeyError:
        raise InvalidInput(f"the EPUB has no {name}") from None
    except (
        zipfile.BadZipFile,
        zlib.error,
        EOFError,
        NotImplementedError,
        OSError,
        ValueError,
    ) as error:
        # e.g. ValueError: a member's offset points before the start of the file
        raise InvalidInput(f"the EPUB's {name} is damaged ({type(error).__name__})") from None


def _xml(archive: zipfile.ZipFile, name: str) -> Any:
    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False
    )
    try:
        return etree.fromstring(_member(archive, name), parser=parser)
    except etree.XMLSyntaxError:
        raise InvalidInput(f"the EPUB's {name} is not valid XML") from None


def _texts(package: Any, tag: str) -> list[str]:
    values = (" ".join(e.xpath("string()").split()) for e in package.iterfind(f".//dc:{tag}", _NS))
    return [v for v in values if v]


def parse_epub(content: bytes) -> Extracted:
    """An EPUB as Markdown, chapter after chapter. Raises InvalidInput for a file
    that is not an EPUB, is damaged, would unpack too far, or has no text."""
    archive = open_zip(content, "EPUB")
    try:
        return _read(archive)
    except (InvalidInput, MemoryError, RecursionError):
        raise
    except Exception as error:  # a damaged container fails in more ways than listed above
        raise InvalidInput(f"the EPUB file could not be read ({type(error).__name__})") from None
    finally:
        archive.close()


def _read(archive: zipfile.ZipFile) -> Extracted:
    """The book's chapters in spine order, and its metadata."""
    container = _xml(archive, "META-INF/container.xml")
    rootfile = container.find(".//c:rootfile", _NS)
    opf_name = rootfile.get("full-path", "") if rootfile is not None else ""
    if not opf_name:
        raise InvalidInput("the EPUB's container names no package document")
    package = _xml(archive, opf_name)
    base = posixpath.dirname(opf_name)
    manifest = {
        item.get("id"): item
        for item in package.iterfind(".//opf:manifest/opf:item", _NS)
        if item.get("id")
    }
    chapters: list[str] = []
    for ref in package.iterfind(".//opf:spine/opf:itemref", _NS):
        item = manifest.get(ref.get("idref"))
        if item is None or item.get("media-type") not in _CHAPTER_TYPES:
            continue
        name = posixpath.normpath(posixpath.join(base, unquote(item.get("href", ""))))
        content = _member(archive, name)
        try:
            page = parse_html(decode_html(content))
        except InvalidInput as error:
            if _NO_TEXT in error.message:  # a cover or a blank page
                continue
            raise InvalidInput(f"the EPUB's {name}: {error.message}") from None
        chapters.append(demoted(page.markdown))
    if not chapters:
        raise InvalidInput("the EPUB has no text")
    properties = {key: ", ".join(_texts(package, tag)) for key, tag in _PROPERTIES}
    titles = _texts(package, "title")
    descriptions = _texts(package, "description")
    return Extracted(
        title=titles[0] if titles else "",
        markdown="\n".join(chapters),
        properties={key: value for key, value in properties.items() if value},
        summary=descriptions[0] if descriptions else "",
    )
