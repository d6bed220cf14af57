"""Document parsing: formats by suffix, front matter, and the per-document reasons a
document is refused."""

from __future__ import annotations

import pytest

from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.chunker import chunk_document
from groundwire_retriever.ingest.parsers import guess_format, parse

GUIDE = b"""---
title: My Guide
url: https://example.com/guide
type: guide
summary: How to do things.
---

# Heading

Body text.
"""


def test_front_matter_is_parsed_and_removed() -> None:
    doc = parse(GUIDE, "markdown")
    assert doc.front_matter == {
        "title": "My Guide",
        "url": "https://example.com/guide",
        "type": "guide",
        "summary": "How to do things.",
    }
    assert doc.title == "My Guide"
    assert doc.summary == "How to do things."
    assert "---" not in doc.body
    assert "url:" not in doc.body
    assert doc.body.lstrip().startswith("# Heading")


def test_front_matter_with_windows_line_endings() -> None:
    doc = parse(GUIDE.replace(b"\n", b"\r\n"), "markdown")
    assert doc.front_matter["url"] == "https://example.com/guide"
    assert "\r" not in doc.body and "---" not in doc.body


def test_front_matter_after_a_byte_order_mark() -> None:
    # Editors on Windows save UTF-8 with a BOM; it must not hide the front matter.
    doc = parse(b"\xef\xbb\xbf" + GUIDE, "markdown")
    assert doc.front_matter.get("title") == "My Guide"
    assert doc.title == "My Guide"
    assert "\ufeff" not in doc.body and "---" not in doc.body


def test_front_matter_values_become_strings_and_nulls_are_dropped() -> None:
    doc = parse(b"---\nversion: 3\ndraft: true\nowner:\n---\ntext\n", "markdown")
    assert doc.front_matter == {"version": "3", "draft": "True"}


def test_front_matter_that_is_not_a_mapping_is_ignored_but_removed() -> None:
    doc = parse(b"---\n- a\n- b\n---\ntext\n", "markdown", filename="x.md")
    assert doc.front_matter == {}
    assert doc.body == "text\n"


def test_invalid_front_matter_yaml_is_refused() -> None:
    with pytest.raises(InvalidInput, match="front matter is not valid YAML"):
        parse(b"---\ntitle: [unclosed\n---\ntext\n", "markdown")


def test_front_matter_is_markdown_only() -> None:
    doc = parse(b"---\ntitle: t\n---\nbody\n", "text", filename="notes.txt")
    assert doc.front_matter == {}
    assert doc.body.startswith("---\ntitle: t")


def test_title_precedence() -> None:
    assert parse(GUIDE, "markdown", title="Given").title == "Given"
    assert parse(GUIDE, "markdown").title == "My Guide"
    assert parse(b"text\n\n# First Heading\n", "markdown", filename="a.md").title == (
        "First Heading"
    )
    assert parse(b"just text\n", "text", filename="docs/notes.txt").title == "notes"


def test_parsed_document_chunks_with_its_summary_and_title() -> None:
    doc = parse(GUIDE, "markdown")
    chunks = chunk_document(doc.title, doc.body, summary=doc.summary)
    # the document's leading H1 is its title: the front matter's title stands for it
    assert chunks[0].heading_path == ("My Guide",)
    assert chunks[0].text == "My Guide\n\nHow to do things.\n\nBody text."


@pytest.mark.parametrize(
    ("content", "fmt", "reason"),
    [
        (b"abc\x00def", "text", "binary"),
        (b"# Title\n\x00\x01\x02", "markdown", "NUL"),
        (bytes(range(0x80, 0x100)) * 16, "text", "not valid UTF-8 (byte 0)"),
        (b"\xff\xfe", "markdown", "no text"),  # a UTF-16 byte-order mark, nothing after
        (b"", "markdown", "no text"),
        (b"  \n\n\t\n", "text", "no text"),
        (b"---\ntitle: only front matter\n---\n", "markdown", "no text"),
        (b"<html><script>x()</script><nav>menu</nav></html>", "html", "the HTML has no text"),
        (b"%PDF-1.7", "pdf", "the PDF could not be read"),
        (bytes(range(1, 32)) * 4 + b"text", "markdown", "looks binary"),
        (b"text", "odt", "unknown document type 'odt'"),
        (b"text", "docx", "the DOCX file is not a valid zip container"),
        (b"{", "notebook", "the notebook is not valid JSON"),
    ],
)
def test_refused_documents_say_why(content: bytes, fmt: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse(content, fmt, filename="doc")
    assert reason in refused.value.message
    assert refused.value.code == "invalid_input"


@pytest.mark.parametrize(
    ("filename", "fmt"),
    [
        ("a.md", "markdown"),
        ("docs/A.MARKDOWN", "markdown"),
        ("notes.txt", "text"),
        ("notes.text", "text"),
        ("page.htm", "html"),
        ("page.html", "html"),
        ("paper.pdf", "pdf"),
        ("guide.rst", "rst"),
        ("report.DOCX", "docx"),
        ("deck.pptx", "pptx"),
        ("analysis.ipynb", "notebook"),
        ("book.epub", "epub"),
    ],
)
def test_format_from_suffix(filename: str, fmt: str) -> None:
    assert guess_format("", filename) == fmt


def test_declared_format_wins_over_the_suffix() -> None:
    assert guess_format("text", "readme.md") == "text"


@pytest.mark.parametrize("filename", ["report.odt", "Makefile", ""])
def test_unknown_suffix_is_refused(filename: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        guess_format("", filename)
    assert "unknown document type" in refused.value.message
    assert "markdown" in refused.value.message  # says what is accepted


def test_markdown_comment_blocks_are_dropped_but_not_in_code_or_unclosed() -> None:
    text = (
        "# Timers\n\n"
        "<!-- YAML\nadded: v0.0.1\nchanges:\n  - version: v18.0.0\n-->\n\n"
        "Schedules a one-time callback.\n\n"
        "```html\n<!-- kept: this is code -->\n```\n\n"
        "Inline `<!-- x -->` and text <!-- mid-line --> stay.\n\n"
        "<!-- an unclosed comment\n\nThe rest of the page.\n"
    )
    doc = parse(text.encode(), "markdown", filename="timers.md")
    assert "YAML" not in doc.body and "v18.0.0" not in doc.body
    assert "Schedules a one-time callback." in doc.body
    assert "<!-- kept: this is code -->" in doc.body
    assert "Inline `<!-- x -->` and text <!-- mid-line --> stay." in doc.body
    assert "<!-- an unclosed comment" in doc.body and "The rest of the page." in doc.body
    # a document of nothing but a comment has no text
    with pytest.raises(InvalidInput, match="no text"):
        parse(b"<!-- only this -->\n", "markdown", filename="empty.md")
