"""Documents as their authors wrote them (issue #32): a reStructuredText page without a
title is named by its first heading, its first bold line or its file name (never
docutils' ``<string>``), and HTML or text in a legacy encoding that declares none is
read the way a browser reads it (byte-order mark, declared charset, UTF-8, then a
statistical guess), not refused."""

from __future__ import annotations

import pytest

from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.charset import decode
from groundwire_retriever.ingest.parsers import parse
from groundwire_retriever.ingest.rst_parser import title_of

# the shape of the AWS CLI's examples: no section, a bold first line, literal blocks
AWS_EXAMPLE = b"""**To create a bucket**

The following ``create-bucket`` example creates a bucket named ``my-bucket``::

    aws s3api create-bucket --bucket my-bucket --region us-east-1

Output::

    {
        "Location": "/my-bucket"
    }
"""
# French and typographic quotes: bytes 0x80-0x9F (curly quotes, dashes) are where
# windows-1252 and ISO-8859-1 differ, and accented letters where cp1250 differs
XSLT_TEXT = (
    "Applying a stylesheet. Call \u201cxsltApplyStylesheet\u201d \u2014 it returns the "
    "r\u00e9sultat document; na\u00efve caf\u00e9 users are welcome, and the fa\u00e7ade "
    "\u2019s cr\u00e8me br\u00fbl\u00e9e too. "
)


def test_rst_without_a_title_is_named_by_its_first_bold_line() -> None:
    doc = parse(AWS_EXAMPLE, "rst", filename="s3api/create-bucket.rst")
    assert doc.title == "To create a bucket"
    assert "<string>" not in doc.title + doc.body
    assert "aws s3api create-bucket --bucket my-bucket" in doc.body
    # inline literals stay code (they reached Markdown as plain words)
    assert "The following `create-bucket` example creates a bucket named `my-bucket`" in doc.body


def test_rst_without_a_heading_or_bold_line_is_named_by_its_file() -> None:
    doc = parse(b"Just a paragraph of plain words.\n", "rst", filename="notes/plain-words.rst")
    assert doc.title == "plain-words"


def test_rst_titles_come_from_the_first_heading_of_any_level() -> None:
    two_sections = b"Install\n=======\n\nText.\n\nUpgrade\n=======\n\nMore text.\n"
    assert parse(two_sections, "rst", filename="guide.rst").title == "Install"
    assert parse(b"Title\n=====\n\nBody.\n", "rst", filename="x.rst").title == "Title"
    assert title_of("Intro text.\n\n### Deep heading ###\n\n**Bold later**\n") == "Deep heading"
    assert title_of("**Bold first**\n\n## Heading\n") == "Bold first"
    assert title_of("Some **bold** inside a line.\n") == ""


def test_windows_1252_html_without_a_declared_charset_is_decoded() -> None:
    page = (
        "<html><head><title>libxslt: the manual</title></head><body>"
        f"<h1>Applying a stylesheet</h1><p>{XSLT_TEXT * 6}</p></body></html>"
    ).encode("cp1252")
    with pytest.raises(UnicodeDecodeError):
        page.decode("utf-8")
    doc = parse(page, "html", filename="xslt.html")
    assert "\u201cxsltApplyStylesheet\u201d \u2014 it returns the r\u00e9sultat" in doc.body
    assert "na\u00efve caf\u00e9" in doc.body and "cr\u00e8me br\u00fbl\u00e9e" in doc.body


def test_a_declared_latin1_page_is_read_as_windows_1252_like_a_browser() -> None:
    page = (
        '<html><head><meta charset="iso-8859-1"><title>Quotes</title></head>'
        f"<body><p>{XSLT_TEXT}</p></body></html>"
    ).encode("cp1252")
    text, encoding = decode(page, html=True)
    assert encoding == "cp1252" and "\u201cxsltApplyStylesheet\u201d" in text


def test_legacy_text_and_markdown_are_guessed_and_utf16_is_read_by_its_bom() -> None:
    assert "na\u00efve caf\u00e9" in parse((XSLT_TEXT * 4).encode("cp1252"), "text").body
    markdown = ("# R\u00e9sum\u00e9\n\n" + XSLT_TEXT * 4).encode("cp1252")
    assert parse(markdown, "markdown", filename="cv.md").title == "R\u00e9sum\u00e9"
    wide = parse("# Title\n\nhello w\u00f6rld\n".encode("utf-16"), "markdown", filename="w.md")
    assert wide.title == "Title" and "w\u00f6rld" in wide.body


def test_a_page_whose_bytes_fit_no_encoding_is_still_refused_with_the_reason() -> None:
    with pytest.raises(InvalidInput) as refused:
        parse(bytes(range(0x80, 0x100)) * 16, "html", filename="noise.html")
    assert "not valid UTF-8 (byte" in refused.value.message
    assert "no encoding fits it" in refused.value.message
