"""Issue #22's formats (reStructuredText, DOCX, PPTX, notebooks, EPUB, PDF with
headings), written by tests/fixtures/documents.py: each is ingested with its title,
heading paths and properties, and its properties become filterable metadata when the
collection declares them. Hostile variants are in tests/fixtures/hostile.py."""

from __future__ import annotations

import json

import pytest

from groundwire_cli.ingest import SUFFIXES
from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.archive import MAX_UNPACKED_BYTES
from groundwire_retriever.ingest.markup import MarkdownWriter, demoted
from groundwire_retriever.ingest.parsers import guess_format, parse
from groundwire_retriever.ingest.pipeline import ChunkingPolicy, DocumentInput, prepare_chunks
from tests.fixtures import documents
from tests.fixtures.documents import AUTHOR, CREATED_ISO, TAGS

POLICY = ChunkingPolicy(min_tokens=0, max_tokens=200, overlap_tokens=0)
FILTERABLE = ("source_id", "doc_type", "title", "author", "tags", "created")


async def _chunks(
    name: str, content: bytes, *, title: str, metadata: dict[str, str]
) -> dict[tuple[str, ...], str]:
    """The chunks' texts by heading path, each chunk checked for the document's
    title and for holding (at least) ``metadata``."""
    chunks = await prepare_chunks(
        DocumentInput(name, content, filename=name), POLICY, keep_properties=FILTERABLE
    )
    for chunk in chunks:
        assert chunk.title == title
        assert chunk.metadata | metadata == chunk.metadata, chunk.metadata
    return {c.heading_path: c.text for c in chunks}


async def test_docx_headings_tables_and_core_properties() -> None:
    title = "Tidewater Pump Manual"  # the Title paragraph: the core title is empty
    by_path = await _chunks(
        "manual.docx",
        documents.docx_document(),
        title=title,
        metadata={"author": AUTHOR, "tags": TAGS, "created": CREATED_ISO},
    )
    assert list(by_path) == [
        (title, "Installation"),
        (title, "Installation", "Wiring"),
        (title, "Maintenance"),
    ]
    wiring = by_path[(title, "Installation", "Wiring")]
    assert "- Connect the brown wire" in wiring
    assert "| Base bolt | 40 Nm \\| dry |" in wiring  # a row per row, the cell's | escaped
    # a paragraph that starts with '#' is text, not a heading
    assert "\\# not a heading" in wiring
    doc = parse(documents.docx_document(), "docx")
    assert doc.summary == "How to install the Tidewater pump."
    assert doc.front_matter["modified"] == CREATED_ISO


async def test_pptx_slides_are_sections_with_tables_and_notes() -> None:
    title = "Tidewater Pump Training"
    by_path = await _chunks(
        "deck.pptx",
        documents.pptx_deck(),
        title=title,
        metadata={"author": AUTHOR, "tags": TAGS, "created": CREATED_ISO},
    )
    assert list(by_path) == [(title, "Installation"), (title, "Maintenance")]
    assert "Use the four supplied anchors." in by_path[(title, "Installation")]
    assert "Notes: Mention the warranty sticker." in by_path[(title, "Installation")]
    assert "| Flush the impeller | Every spring |" in by_path[(title, "Maintenance")]


async def test_notebook_cells_become_markdown_and_code_outputs_are_dropped() -> None:
    title = "Pump flow analysis"
    by_path = await _chunks(
        "flow.ipynb", documents.notebook(), title=title, metadata={"author": AUTHOR, "tags": TAGS}
    )
    assert list(by_path) == [(title, "Loading data")]
    text = by_path[(title, "Loading data")]
    assert "We read the Tidewater flow log." in text
    assert "```python\nflow = read_log('tidewater.csv')\nprint(flow.mean())\n```" in text
    assert "OUTPUT-SENTINEL" not in text and "RAW-SENTINEL" not in text
    assert parse(documents.notebook(), "notebook").front_matter["language"] == "python"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (json.dumps({"worksheets": [], "nbformat": 3}).encode(), "nbformat 3"),
        (b"[1, 2]", "its JSON is not an object"),
        (json.dumps({"cells": {}}).encode(), "no list of cells"),
        (json.dumps({"cells": [{"cell_type": "widget", "source": ""}]}).encode(), "type 'widget'"),
        (documents.notebook(cells=[]), "the notebook has no text"),
        (b"\xff{}", "not valid UTF-8"),
    ],
)
def test_malformed_notebooks_are_refused_with_a_reason(content: bytes, reason: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse(content, "notebook", filename="x.ipynb")
    assert reason in refused.value.message


async def test_rst_sections_literal_blocks_tables_and_bibliographic_fields() -> None:
    title = "Tidewater Pump Guide"
    by_path = await _chunks(
        "guide.rst",
        documents.RST,
        title=title,
        metadata={"author": AUTHOR, "tags": TAGS},  # ":Date:" is kept only when declared
    )
    assert list(by_path) == [(title,), (title, "Installation"), (title, "Installation", "Wiring")]
    install = by_path[(title, "Installation")]
    assert "```\nanchor --count 4\n# a comment in the code, not a heading\n```" in install
    assert "| Base bolt | 40 Nm |" in by_path[(title, "Installation", "Wiring")]
    assert parse(documents.RST, "rst").front_matter["date"] == "2024-05-01"
    # the docinfo is metadata, not text; the include directive read nothing
    assert "Lovelace" not in "".join(by_path.values())
    assert "root:" not in "".join(by_path.values())


@pytest.mark.parametrize(
    "directive",
    [
        ".. include:: /etc/hostname",
        ".. raw:: html\n   :file: /etc/hostname",
        ".. csv-table:: T\n   :file: /etc/hostname",
        ".. raw:: html\n\n   <script>alert(1)</script>",
    ],
)
def test_rst_directives_that_read_files_or_pass_html_are_off(directive: str) -> None:
    doc = parse(f"Title\n=====\n\n{directive}\n\nBody text.\n".encode(), "rst")
    with open("/etc/hostname") as host:
        hostname = host.read().strip()
    assert "Body text." in doc.body
    assert hostname not in doc.body and "script" not in doc.body


async def test_epub_chapters_in_spine_order_with_dublin_core_properties() -> None:
    title = "The Tidewater Book"
    by_path = await _chunks(
        "book.epub",
        documents.epub_book(),
        title=title,
        metadata={"author": AUTHOR, "tags": TAGS, "created": "2024-05-01"},
    )
    # the cover (no text) is passed over; the spine, not the manifest, gives the order
    assert list(by_path) == [
        (title, "Installation", "Base"),
        (title, "Maintenance", "Impeller"),
    ]
    assert parse(documents.epub_book(), "epub").summary == "All about the pump."


def test_an_epub_without_its_package_document_is_refused() -> None:
    broken = documents.zip_bytes([("mimetype", b"application/epub+zip")])
    with pytest.raises(InvalidInput, match=r"the EPUB has no META-INF/container\.xml"):
        parse(broken, "epub")


async def test_pdf_headings_from_font_sizes_and_bold_give_heading_paths() -> None:
    title = "Tidewater Field Manual"
    by_path = await _chunks(
        "manual.pdf", documents.headed_pdf(), title=title, metadata={"author": AUTHOR, "tags": TAGS}
    )
    assert list(by_path) == [
        (title, "Installation"),
        (title, "Installation", "Wiring"),
        (title, "Maintenance"),
        (title, "Maintenance", "Safety"),  # bold at the body's size: the lowest level
    ]
    assert "Use the four supplied anchors." in by_path[(title, "Installation")]


async def test_properties_are_kept_only_where_the_collection_filters_on_them() -> None:
    doc = DocumentInput(
        "m.docx", documents.docx_document(), filename="m.docx", metadata={"tags": "given"}
    )
    chunks = await prepare_chunks(doc, POLICY, keep_properties=("source_id", "tags", "title"))
    # the caller's metadata wins; a property that is a chunk field (title) is not metadata
    assert {tuple(c.metadata.items()) for c in chunks} == {(("tags", "given"),)}
    plain = await prepare_chunks(
        DocumentInput("m.docx", documents.docx_document(), filename="m.docx"), POLICY
    )
    assert all(c.metadata == {} for c in plain)
    # a kept property is part of what identifies a chunk's content: changing it rewrites
    assert {c.content_hash for c in chunks}.isdisjoint(c.content_hash for c in plain)


async def test_markdown_front_matter_lists_become_filterable_text() -> None:
    content = (
        b"---\nauthor: Ada\ntags: [setup, hardware]\nreviewed: 2024-05-01\n---\n# T\n\nBody.\n"
    )
    chunks = await prepare_chunks(
        DocumentInput("t.md", content, filename="t.md"),
        POLICY,
        keep_properties=("tags", "reviewed"),
    )
    assert chunks[0].metadata == {"tags": "setup, hardware", "reviewed": "2024-05-01"}


def test_markdown_writer_keeps_document_text_out_of_markdown_structure() -> None:
    out = MarkdownWriter()
    out.paragraph("| looks like a row\n# looks like a heading\n```\n---")
    out.code("a ``` b ```` c")
    assert out.text() == (
        "\\| looks like a row\n\\# looks like a heading\n\\```\n\\---\n\n"
        "`````\na ``` b ```` c\n`````\n"
    )
    assert not MarkdownWriter().has_text()
    assert demoted("# A\n```\n# code\n```\n###### F\n") == "## A\n```\n# code\n```\n###### F\n"


def test_zip_containers_that_would_unpack_too_far_are_refused_unread() -> None:
    bomb = documents.docx_zip_bomb(unpacked_mib=(MAX_UNPACKED_BYTES >> 20) + 1)
    with pytest.raises(InvalidInput, match="zip bomb"):
        parse(bomb, "docx")
    with pytest.raises(InvalidInput, match="not a valid zip container"):
        parse(b"PK\x03\x04 not really", "pptx")


def test_every_suffix_the_cli_sends_is_a_format_the_retriever_reads() -> None:
    assert {guess_format("", f"x{suffix}") for suffix in SUFFIXES} == {
        "markdown",
        "text",
        "html",
        "pdf",
        "rst",
        "docx",
        "pptx",
        "notebook",
        "epub",
    }


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"T\n=\n\n" + b"word " * 2_500, "docutils reads lines of at most 10000"),
        (
            b"T\n=\n\n" + b"".join(b"  " * i + b"- item\n\n" for i in range(400)),
            "nests too deeply",
        ),
        (b".. a comment only\n", "the document has no text"),
    ],
)
def test_rst_that_docutils_would_drop_or_overflow_is_refused_with_a_reason(
    content: bytes, reason: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse(content, "rst", filename="x.rst")
    assert reason in refused.value.message
