"""The source view renders a document's Markdown as its author wrote it (issue #32:
fences and ``**`` showed raw), sanitised: raw HTML escaped, no images, no script
links; code in ``<pre>``/``<code>``; the cited range still marked; plain text stays
pre-wrapped text."""

from __future__ import annotations

from groundwire_gateway import models
from groundwire_gateway.routes.document_view import render_document

GUIDE = (
    "Install > Linux\n\n"
    "## Install on Linux\n\n"
    "Run the installer with **sudo** and pass `--prefix`:\n\n"
    "```bash\nsudo ./install.sh --prefix /opt/widget\n```\n\n"
    "| option | meaning |\n|---|---|\n| `--prefix` | where it goes |\n\n"
    "<script>alert(1)</script> <img src=x onerror=alert(2)>\n\n"
    "![logo](https://evil.example/logo.png) [click](javascript:alert(3)) "
    "[docs](https://docs.example.com/install)\n"
)


def _doc(text: str, source_id: str = "guide/install.md") -> models.StoredDocument:
    chunk = models.StoredChunk(chunk_id="c0", chunk_index=0, heading_path=["Install"], text=text)
    return models.StoredDocument(
        collection="docs", source_id=source_id, title="Install", url="", doc_type="",
        chunks=[chunk], total=1,
    )  # fmt: skip


def test_markdown_is_rendered_with_code_in_pre_and_code() -> None:
    page = render_document(_doc(GUIDE))
    assert '<div class="text markdown">' in page
    assert "<h2>Install on Linux</h2>" in page
    assert "<strong>sudo</strong>" in page and "<code>--prefix</code>" in page
    assert '<pre><code class="language-bash">sudo ./install.sh --prefix /opt/widget\n' in page
    assert "<table>" in page and "<th>option</th>" in page
    assert "```" not in page and "**" not in page


def test_markup_from_the_document_never_runs() -> None:
    page = render_document(_doc(GUIDE))
    for raw in ("<script", "<img", "onerror=alert(2)>", 'href="javascript:'):
        assert raw not in page, raw
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert '<a href="https://docs.example.com/install">docs</a>' in page


def test_the_cited_range_is_marked_inside_the_rendered_markdown() -> None:
    start = GUIDE.index("Run the installer")
    end = GUIDE.index(":\n\n```")
    page = render_document(_doc(GUIDE), "c0", (start, end))
    assert (
        '<p><mark class="evidence">Run the installer with <strong>sudo</strong> and pass '
        "<code>--prefix</code></mark>:</p>" in page
    )
    # a range across blocks is shown on the text as stored, not mis-nested
    across = render_document(_doc(GUIDE), "c0", (start, GUIDE.index("| option")))
    assert across.count("<mark") == 1 and '<div class="text">' in across


def test_plain_text_stays_pre_wrapped() -> None:
    page = render_document(_doc("Line one **not bold**\n  indented", "notes/log.txt"))
    assert '<div class="text">Line one **not bold**\n  indented</div>' in page
