"""PDF documents through pypdf: page text as paragraphs, title and summary from the
document information, and a reason for every PDF that cannot be used."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
from pypdf import PdfReader, PdfWriter

from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.chunker import chunk_document
from groundwire_retriever.ingest.parsers import parse

PdfMaker = Callable[..., bytes]


def test_pages_become_paragraphs_with_title_and_summary(make_pdf: PdfMaker) -> None:
    pdf = make_pdf(
        [["Results of the study", "", "The first paragraph", "continues here."], ["Page two."]],
        title="My Paper",
        subject="What we found.",
    )
    doc = parse(pdf, "pdf", filename="paper.pdf")
    assert (doc.title, doc.summary, doc.markdown) == ("My Paper", "What we found.", False)
    assert "Results of the study" in doc.body
    assert "The first paragraph\ncontinues here." in doc.body
    assert doc.body.rstrip().endswith("\n\nPage two.")  # a page is its own paragraph


def test_title_falls_back_to_the_first_line(make_pdf: PdfMaker) -> None:
    # reportlab writes "untitled" when no title is set: a placeholder, not a title
    pdf = make_pdf([["Quarterly report 2024", "Revenue grew."]])
    assert parse(pdf, "pdf", filename="q.pdf").title == "Quarterly report 2024"
    assert parse(pdf, "pdf", title="Given", filename="q.pdf").title == "Given"


def test_lines_that_look_like_markdown_are_plain_text(make_pdf: PdfMaker) -> None:
    pdf = make_pdf([["# 1 Introduction", "| not a table"]], title="T")
    doc = parse(pdf, "pdf", filename="x.pdf")
    chunks = chunk_document(doc.title, doc.body, markdown=doc.markdown)
    assert [c.heading_path for c in chunks] == [("T",)]


def test_each_page_can_be_its_own_chunk(make_pdf: PdfMaker) -> None:
    pages = [[" ".join(f"p{p}w{i}" for i in range(12))] for p in range(3)]
    doc = parse(make_pdf(pages, title="T"), "pdf", filename="x.pdf")
    chunks = chunk_document(doc.title, doc.body, markdown=False, max_tokens=20, overlap_tokens=0)
    assert [c.text.split()[1:] for c in chunks] == [
        [f"p{p}w{i}" for i in range(12)] for p in range(3)
    ]


def _blank_pdf(pages: int) -> bytes:
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(200, 200)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _encrypted(pdf: bytes) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    writer.encrypt(user_password="secret", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda m: _blank_pdf(0), "the PDF has no pages"),
        (lambda m: _blank_pdf(2), "no text layer"),
        (lambda m: m([["some text"]])[:300], "could not be read"),
        (lambda m: b"%PDF-1.7\n" + bytes(range(256)) * 8, "could not be read"),
        (lambda m: b"just words in a .pdf file", "could not be read"),
        (lambda m: _encrypted(m([["hidden"]])), "the PDF is encrypted"),
    ],
    ids=["no-pages", "blank-pages", "truncated", "garbage", "not-a-pdf", "encrypted"],
)
def test_unusable_pdfs_are_refused_with_a_reason(
    make: Callable[[PdfMaker], bytes], make_pdf: PdfMaker, reason: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse(make(make_pdf), "pdf", filename="bad.pdf")
    assert reason in refused.value.message
    assert refused.value.code == "invalid_input"


def test_a_pdf_with_an_empty_password_is_read(make_pdf: PdfMaker) -> None:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf([["open text"]], title="T"))))
    writer.encrypt(user_password="", owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    assert "open text" in parse(out.getvalue(), "pdf").body
