"""Malformed documents are refused one by one with a reason the ingest report can
show; what is readable in a damaged document is still used."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.pipeline import ChunkingPolicy, DocumentInput, prepare_chunks

PdfMaker = Callable[..., bytes]
POLICY = ChunkingPolicy()  # the defaults: 300-800 tokens, 20 MiB per document


def _garbage(n: int, seed: int = 7) -> bytes:
    rnd = random.Random(seed)
    return bytes(rnd.getrandbits(8) for _ in range(n))


async def _refusal(doc: DocumentInput) -> str:
    with pytest.raises(InvalidInput) as refused:
        await prepare_chunks(doc, POLICY)
    return refused.value.message


@pytest.mark.parametrize(
    ("filename", "reason"),
    [
        ("noise.md", "the content looks binary (it contains NUL bytes)"),
        ("noise.txt", "the content looks binary (it contains NUL bytes)"),
        ("noise.html", "the content looks binary (it contains NUL bytes)"),
        ("noise.pdf", "the PDF could not be read"),
    ],
)
async def test_binary_garbage(filename: str, reason: str) -> None:
    assert reason in await _refusal(DocumentInput(filename, _garbage(64 * 1024), filename=filename))


async def test_high_bytes_that_are_not_utf8() -> None:
    garbage = bytes(b | 0x80 for b in _garbage(4096))  # no NUL, no control bytes
    message = await _refusal(DocumentInput("latin.txt", garbage, filename="latin.txt"))
    assert "not valid UTF-8" in message


async def test_a_50_mb_file_is_over_the_limit() -> None:
    content = b"word " * (10 * 1024 * 1024)  # 50 MiB of perfectly good text
    message = await _refusal(DocumentInput("huge.txt", content, filename="huge.txt"))
    assert message == f"the document is {len(content)} bytes; the limit is {20 * 1024 * 1024}"


async def test_broken_html_keeps_what_parses() -> None:
    html = (
        b"<html><head><title>Half a page</title><body><h1>Half a page<h2>Setup"
        b"<p>Install the <b>agent <div>then restart it</td></tr></table><p>Done"
    )
    chunks = await prepare_chunks(DocumentInput("half.html", html, filename="half.html"), POLICY)
    text = " ".join(c.text for c in chunks)
    for words in ("Install the", "agent", "then restart it", "Done"):
        assert words in text
    assert chunks[0].title == "Half a page"


@pytest.mark.parametrize(
    "html",
    [
        b"<html><head><script>var closing = '</div>'",
        b"<html><body><div><span></div></td><img src=logo.png></body>",
        b"<nav><a href='/'>Home</a></nav><style>p { color: red }</style>",
    ],
)
async def test_broken_html_with_no_text_is_refused(html: bytes) -> None:
    message = await _refusal(DocumentInput("broken.html", html, filename="broken.html"))
    assert message == "the HTML has no text (after removing scripts, styles and navigation)"


async def test_an_empty_pdf(make_pdf: PdfMaker) -> None:
    blank = make_pdf([[], []])  # two pages, nothing drawn
    message = await _refusal(DocumentInput("blank.pdf", blank, filename="blank.pdf"))
    assert message == "the PDF has no text layer (a scanned PDF needs OCR first)"


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.9])
async def test_a_corrupt_pdf(make_pdf: PdfMaker, cut: float) -> None:
    good = make_pdf([["The quarterly figures"], ["More figures"]], title="Report")
    broken = good[: int(len(good) * cut)]
    message = await _refusal(DocumentInput("cut.pdf", broken, filename="cut.pdf"))
    assert message.startswith("the PDF could not be read")


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        (
            DocumentInput("deck", b"slides", filename="deck.odp"),
            "unknown document type for 'deck.odp'",
        ),
        (
            DocumentInput("noext", b"text", filename="Makefile"),
            "unknown document type for 'Makefile'",
        ),
        (DocumentInput("declared", b"text", format="odt"), "unknown document type 'odt'"),
    ],
)
async def test_an_unknown_type(doc: DocumentInput, reason: str) -> None:
    message = await _refusal(doc)
    assert reason in message
    assert "markdown, text, html, pdf" in message


async def test_good_documents_of_every_format_are_chunked(make_pdf: PdfMaker) -> None:
    docs = [
        DocumentInput("a.md", b"# Guide\n\nMarkdown body.", filename="a.md"),
        DocumentInput("b.txt", b"Plain body.", filename="b.txt"),
        DocumentInput("c.html", b"<h1>Page</h1><p>HTML body.</p>", filename="c.html"),
        DocumentInput("d.pdf", make_pdf([["PDF body."]], title="Paper"), filename="d.pdf"),
    ]
    texts = [(await prepare_chunks(doc, POLICY))[0].text for doc in docs]
    assert texts == [
        "Guide\n\nMarkdown body.",
        "b\n\nPlain body.",
        "Page\n\nHTML body.",
        "Paper\n\nPDF body.",
    ]
