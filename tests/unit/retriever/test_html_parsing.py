"""HTML documents: converted to Markdown (lxml + html-to-markdown) so the chunker
sees the page's headings, code blocks and tables; metadata from the head. Pages in
the shapes of documentation generators' output are in test_html_sites.py."""

from __future__ import annotations

import pytest

from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.chunker import chunk_document
from groundwire_retriever.ingest.parsers import parse

PAGE = b"""<!doctype html>
<html><head>
  <title>Install | Groundwire docs</title>
  <meta name="description" content="How to install Groundwire.">
  <link rel="canonical" href="https://groundwire.dev/docs/install">
  <style>body { color: red }</style>
  <script>window.tracking = "do not index";</script>
</head>
<body>
  <nav><a href="/">Home</a> <a href="/docs">Docs menu</a></nav>
  <main>
    <h1>Install<a class="headerlink" href="#install">\xc2\xb6</a></h1>
    <p>Groundwire runs on <b>Linux</b> and <a href="https://example.com/mac">macOS</a>.</p>
    <h2>From source</h2>
    <pre><code class="language-bash">make setup
make test</code></pre>
    <h3>Options</h3>
    <table>
      <tr><th>name</th><th>default</th></tr>
      <tr><td>port</td><td>50051</td></tr>
      <tr><td>pattern</td><td>a|b</td></tr>
    </table>
    <img src="data:image/png;base64,iVBORw0KGgo=" alt="architecture diagram">
  </main>
</body></html>
"""


def test_headings_code_and_tables_become_markdown() -> None:
    doc = parse(PAGE, "html", filename="install.html")
    assert doc.markdown
    assert doc.body.startswith("# Install\n")
    assert "\n## From source\n" in doc.body
    assert "\n### Options\n" in doc.body
    assert "```bash\nmake setup\nmake test\n```" in doc.body
    assert "| name | default |\n| --- | --- |\n| port | 50051 |\n| pattern | a\\|b |" in doc.body
    assert "Groundwire runs on **Linux** and macOS." in doc.body  # link text, no URL


def test_scripts_styles_navigation_and_image_data_are_dropped() -> None:
    body = parse(PAGE, "html").body
    for gone in ("tracking", "color: red", "Docs menu", "base64", "¶", "Groundwire docs"):
        assert gone not in body
    assert "architecture diagram" in body  # an image's alt text is content


def test_metadata_from_the_head() -> None:
    doc = parse(PAGE, "html", filename="install.html")
    assert doc.title == "Install"  # the <title> holds the h1 plus the site name
    assert doc.summary == "How to install Groundwire."
    assert doc.url == "https://groundwire.dev/docs/install"


def test_sections_follow_the_page_headings() -> None:
    doc = parse(PAGE, "html")
    chunks = chunk_document(doc.title, doc.body, summary=doc.summary)
    assert [c.heading_path for c in chunks] == [
        ("Install",),
        ("Install", "From source"),
        ("Install", "From source", "Options"),
    ]
    assert chunks[0].text.startswith("Install\n\nHow to install Groundwire.\n\n")
    assert "| port | 50051 |" in chunks[2].text


@pytest.mark.parametrize(
    ("head", "body", "title"),
    [
        ('<meta property="og:title" content="OG"><title>Tab</title>', "<h1>Head</h1>", "OG"),
        ("<title>Tab</title>", "<h1>Head</h1>", "Tab"),
        ("", "<h1>Head</h1><p>x</p>", "Head"),
        ("", "<p>no title at all</p>", "page"),
    ],
)
def test_title_precedence(head: str, body: str, title: str) -> None:
    html = f"<html><head>{head}</head><body>{body}<p>text</p></body></html>".encode()
    assert parse(html, "html", filename="docs/page.html").title == title
    assert parse(html, "html", title="Given", filename="page.html").title == "Given"


def test_code_holding_a_fence_gets_a_longer_fence_and_stays_one_block() -> None:
    html = (
        b"<h2>Markdown</h2><pre><code>```python\n# not a heading\n```\n\n## nor this</code></pre>"
    )
    doc = parse(html, "html", filename="md.html")
    assert "````\n```python\n# not a heading\n```\n\n## nor this\n````" in doc.body
    chunks = chunk_document(doc.title, doc.body)
    assert len(chunks) == 1 and "## nor this" in chunks[0].text


def test_broken_markup_is_parsed_as_far_as_it_goes() -> None:
    html = b"<html><body><h1>Broken<p>first <b>bold <div>second</td></tr> <p>third"
    doc = parse(html, "html", filename="broken.html")
    assert doc.title == "Broken"
    for text in ("first", "bold", "second", "third"):
        assert text in doc.body


def test_declared_charset_is_honoured() -> None:
    html = '<meta charset="iso-8859-1"><p>café crème</p>'.encode("latin-1")
    assert "café crème" in parse(html, "html").body


def test_a_summary_from_open_graph() -> None:
    html = b'<meta property="og:description" content="From OG."><p>text</p>'
    assert parse(html, "html").summary == "From OG."


@pytest.mark.parametrize(
    ("html", "reason"),
    [
        (b"<html><head><title>Only a title</title></head><body></body></html>", "no text"),
        (b'<meta charset="x-no-such-charset"><p>caf\xe9</p>', "declares charset"),
        (b"<p>\x00\x01binary</p>", "looks binary"),
    ],
)
def test_pages_without_usable_text_are_refused(html: bytes, reason: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse(html, "html", filename="bad.html")
    assert reason in refused.value.message
