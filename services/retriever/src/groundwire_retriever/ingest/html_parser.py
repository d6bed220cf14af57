"""HTML to Markdown: the page's own content and title, without the site around it.

lxml parses, a few landmark rules pick the content, html-to-markdown writes
Markdown. Headings stay ATX headings (so the chunker sees the page's sections),
``<pre>`` becomes a fenced block (a longer fence when the code holds one), tables
become pipe tables, a link keeps its text and an image its alt text. Broken markup
is parsed as far as lxml's recovering parser gets; a page with no text, or one
beyond the parser's limits (elements nested 256 deep), is refused with the reason.

Which part of a page is its content. Documentation generators wrap every page in
the site's chrome: a sidebar with the book's table of contents, a menu bar whose
``<h1>`` is the site's name (mdBook), a search box, breadcrumbs, "previous/next"
links and a footer. All of them mark the page's own content with the HTML5/ARIA
landmarks that screen readers use: ``role="main"`` (Sphinx themes, Furo), ``<main>``
(mdBook, MkDocs, docutils) and, inside it, one ``<article>`` (MkDocs Material,
Docusaurus). The rules, in order:

1. The content root is the first ``role="main"`` element, else the first
   ``<main>``, else ``<body>``.
2. Inside it, what is never content goes: scripts, styles, navigation (``<nav>``
   and ``role="navigation"``), search boxes and forms (``role="search"``,
   ``<form>``, buttons, inputs), banners and footers (``role="banner"``,
   ``role="contentinfo"``, ``<footer>``), dialogs and menus, and elements hidden
   from readers (``hidden``, ``aria-hidden="true"``). Without a landmark (root
   ``<body>``), ``<aside>`` is a sidebar and goes too; inside one it stays, since
   docutils writes footnotes, topics and sidebars as ``<aside>``.
3. When the root then holds exactly one outermost ``<article>`` with at least half
   of its text, the article is the root (MkDocs Material's ``<main>`` also holds
   both sidebars).
4. A landmark left without text (a placeholder that a script fills) gives way to
   ``<body>``, cleaned by rule 2.

The title is the page's: ``og:title`` or ``<title>``, which generators write as
"Page - Site" (mdBook, MkDocs), "Page — Site documentation" (Sphinx) or "Page |
Site" (Docusaurus). When the content's first ``<h1>`` appears in it, that h1 is
the title; otherwise the last " - "/" — "/" | " part (the site's name) is cut off.
The menu's ``<h1>`` is outside the content root, so it is never the title.

Why these libraries (measured 2026-11-24 on fixture pages in the shapes of
mdBook, Sphinx and MkDocs Material output and on the real mdBook, rustdoc and
Sphinx pages installed on the build machines):

- Not an article extractor. trafilatura 2.3 (Apache-2.0, 15 dependencies, among
  them ``tld`` under MPL-1.1/GPL/LGPL) titled the mdBook page "Keyboard shortcuts"
  (its help pop-up) and the MkDocs one "Install¶", kept the ``¶`` permalinks in
  every heading and dropped code languages (its first call, with metadata, took
  2.4 s; later ones ~9 ms). readability-lxml 0.9 (Apache-2.0, but it requires ``chardet``, LGPL)
  emptied every mdBook heading (their text is a link), titled the mdBook page with
  the book's name and kept the previous/next links. Both score text density, which
  suits news articles; documentation pages are short, link-heavy and full of code,
  and the landmarks above are a standard every generator we looked at writes.
- lxml and html-to-markdown (MIT; the Rust crates in its wheel are all under
  permissive licences, per the SBOM it ships) rather than BeautifulSoup and
  markdownify: on Python's 78 KB IDLE help page BeautifulSoup's tree alone took
  ~40 ms and the whole conversion 80-110 ms; lxml parses it in ~1 ms and
  html-to-markdown converts it in ~15 ms. markdownify also recurses in Python
  (three frames per level), so 3,000 nested ``<b>`` raised RecursionError; here
  libxml2 stops at 256 levels, and such a page is refused with that reason in the
  ingest report (real pages nest 10-25 levels: the Rust and Python docs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import lxml.html
from html_to_markdown import ConversionError, ConversionOptions, PreprocessingOptions, convert
from lxml import etree

from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.charset import decode

# Never content, wherever they sit: code, styling, navigation, embedded objects,
# form controls (search boxes, theme pickers) and footers.
_DROPPED = frozenset(
    {
        "script",
        "style",
        "noscript",
        "template",
        "nav",
        "svg",
        "iframe",
        "object",
        "form",
        "search",
        "button",
        "input",
        "select",
        "textarea",
        "dialog",
        "footer",
    }
)
# ARIA roles of site chrome (landmarks and widgets that are not the page's text).
_CHROME_ROLES = frozenset(
    {"navigation", "search", "banner", "contentinfo", "dialog", "menu", "menubar", "toolbar"}
)
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_BLOCKS = "|".join(f".//{tag}" for tag in (*_HEADINGS, "p", "div", "section", "pre", "ul", "ol"))
_PERMALINK_TEXT = frozenset({"¶", "#", "§", "🔗"})
_LANGUAGE_CLASS = re.compile(r"^(?:language|lang|highlight)-(\S+)$")
# Pygments classes that name no language (Sphinx's "highlight-default" is its default lexer).
_NO_LANGUAGE = frozenset({"default", "none", "text", "plain", "plaintext"})
# How generators join a page's title to the site's: "Page - Site", "Page — Site", "Page | Site"
# (hyphen, en and em dash, bar, middle dot, bullet, guillemet, double colon).
_TITLE_SEPARATOR = re.compile(r"\s+(?:[-\u2013\u2014|\u00b7\u2022\u00bb]|::)\s+")
# lxml refuses a str that declares its encoding; the text is already decoded.
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
# C0 controls other than tab and newlines: HTML forbids them and lxml refuses them when a
# tree edit moves the text they sit in ("All strings must be XML compatible").
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# libxml2's advice to its own callers, not to the person whose page was refused.
_PARSER_HINT = re.compile(r",?\s*(?:use|try) XML_PARSE_HUGE.*$")
_NO_TEXT = "the HTML has no text (after removing scripts, styles and navigation)"

_OPTIONS = ConversionOptions(
    heading_style="atx",
    bullets="-",
    escape_asterisks=False,
    escape_underscores=False,
    escape_misc=False,
    autolinks=False,
    compact_tables=True,
    code_block_style="backticks",
    extract_metadata=False,
    # A link's text is the content; its URL is noise to a model.
    strip_tags=["a"],
    # The landmark rules above decide what is content; its own heuristics would
    # second-guess them.
    preprocessing=PreprocessingOptions(enabled=False),
)


@dataclass(frozen=True)
class HtmlPage:
    title: str
    markdown: str
    summary: str
    url: str


def decode_html(content: bytes) -> str:
    """The page's text, read as a browser reads it (``charset.decode``: byte-order
    mark, declared charset, UTF-8, then a statistical guess). Raises InvalidInput."""
    return decode(content, html=True)[0]


def _text_of(element: Any) -> str:
    return " ".join(element.text_content().split()) if element is not None else ""


def _parse(text: str, *, huge: bool = False) -> Any:
    """The page's tree. Raises InvalidInput for an empty page or one past libxml2's limits.

    libxml2 stops at a limit and drops the rest of the page; refusing it beats
    indexing part of it. A text node over 10 MB (a long log in one ``<pre>``) is
    parsed again with ``huge_tree``, which lifts that limit; the depth limit stays,
    since past 256 levels libxml2's HTML parser slows quadratically (3,000 nested
    ``<b>`` took 10 s with ``huge_tree``).
    """
    parser = lxml.html.HTMLParser(remove_comments=True, remove_pis=True, huge_tree=huge)
    try:
        document = lxml.html.document_fromstring(
            _CONTROL.sub("", _XML_DECLARATION.sub("", text)), parser=parser
        )
    except etree.ParserError:  # "Document is empty"
        raise InvalidInput(_NO_TEXT) from None
    for entry in parser.error_log:
        if entry.type_name != "ERR_RESOURCE_LIMIT":
            continue  # broken markup: lxml recovers
        if "depth" not in entry.message and not huge:
            return _parse(text, huge=True)
        limit = _PARSER_HINT.sub("", entry.message).strip()
        raise InvalidInput(f"the HTML is beyond the parser's limits ({limit})")
    return document


def _meta(document: Any, *keys: str) -> str:
    for key in keys:
        for attr in ("property", "name"):
            for value in document.xpath(f"//meta[@{attr}=$key]/@content", key=key):
                if value.strip():
                    return str(value).strip()
    return ""


def _declared_title(document: Any) -> str:
    """``og:title``, else the page's ``<title>`` (not an SVG icon's)."""
    title = _meta(document, "og:title")
    if title:
        return " ".join(title.split())
    tags = document.xpath("//title[not(ancestor::svg)]")
    return _text_of(tags[0]) if tags else ""


def _canonical_url(document: Any) -> str:
    hrefs = document.xpath(
        "//link[contains(concat(' ', normalize-space(@rel), ' '), ' canonical ')]/@href"
    )
    url = (str(hrefs[0]).strip() if hrefs else "") or _meta(document, "og:url")
    return url if url.startswith(("http://", "https://")) else ""


def _content_root(document: Any) -> tuple[Any, bool]:
    """The element holding the page's content (rule 1), and whether a landmark marked it."""
    for path in ('//*[@role="main"]', "//main"):
        found = document.xpath(path)
        if found:
            return found[0], True
    return _body(document), False


def _body(document: Any) -> Any:
    bodies = document.xpath("//body")
    return bodies[0] if bodies else document


def _is_chrome(element: Any, *, landmark: bool) -> bool:
    tag = element.tag
    if tag in _DROPPED or (tag == "aside" and not landmark):
        return True
    if element.get("role") in _CHROME_ROLES or element.get("aria-hidden") == "true":
        return True
    return element.get("hidden") is not None


def _drop_chrome(root: Any, *, landmark: bool) -> None:
    """Removes what is never the page's content from ``root`` (rule 2)."""
    doomed: list[Any] = []
    pending = list(root)
    while pending:  # iterative: a deep page must not cost Python stack
        element = pending.pop()
        if not isinstance(element.tag, str):
            continue  # an entity or a processing instruction left by the parser
        if _is_chrome(element, landmark=landmark):
            doomed.append(element)  # its descendants go with it
        else:
            pending.extend(element)
    for element in doomed:
        element.drop_tree()  # keeps the text that follows it


def _single_article(root: Any) -> Any:
    """The one outermost ``<article>`` holding most of ``root``'s text, else ``root`` (rule 3)."""
    articles = root.xpath(".//article[not(ancestor::article)]")
    if len(articles) != 1:
        return root
    article = articles[0]
    return article if 2 * len(_text_of(article)) >= len(_text_of(root)) else root


def _code_language(pre: Any) -> str:
    # Highlighters put the language on the <code>, the <pre> or a wrapper: Sphinx's
    # <div class="highlight-console"><div class="highlight"><pre>, MkDocs's
    # <div class="language-console highlight"><pre><code>.
    parent = pre.getparent()
    grandparent = parent.getparent() if parent is not None else None
    for node in (pre.find("code"), pre, parent, grandparent):
        if node is None:
            continue
        for cls in (node.get("class") or "").split():
            match = _LANGUAGE_CLASS.match(cls)
            if match:
                language = match.group(1)
                return "" if language in _NO_LANGUAGE else language
    return ""


def _tidy(root: Any) -> None:
    """No permalinks, images as their alt text, code blocks named, summaries as blocks."""
    for anchor in list(root.iter("a")):
        # Sphinx puts a "¶" link after every heading and API signature (<dt>).
        if anchor.text_content().strip() in _PERMALINK_TEXT:
            anchor.drop_tree()
    for image in list(root.iter("img")):
        # The alt text is the content; a src (often a data: URI) is noise to a model.
        image.tail = (image.get("alt") or "") + (image.tail or "")
        image.drop_tree()
    for summary in root.iter("summary"):
        # html-to-markdown writes a <summary> as **bold** text; around a heading
        # (rustdoc puts every method's signature there) that leaves "**" in the
        # heading line, so a summary holding blocks is rendered as a block.
        if summary.xpath(_BLOCKS):
            summary.tag = "div"
    for pre in root.iter("pre"):
        language = _code_language(pre)
        if language:
            code = pre.find("code")
            (code if code is not None else pre).set("class", f"language-{language}")


def _page_title(declared: str, h1: str) -> str:
    """The page's own title from ``og:title``/``<title>`` and the content's first h1."""
    if not declared:
        return h1
    if h1 and h1.casefold() in declared.casefold():
        return h1  # "Install | Site" in <title>, "Install" in the page: the page's is cleaner
    separators = list(_TITLE_SEPARATOR.finditer(declared))
    if separators:
        return declared[: separators[-1].start()].strip()  # "Page - Site": the site goes
    return declared


def parse_html(text: str) -> HtmlPage:
    """Converts one page: its content as Markdown, its own title, summary and URL.

    Raises InvalidInput when no text is left once the site's chrome is removed,
    when the page is beyond the parser's limits (elements nested 256 deep), or when
    html-to-markdown fails on it.
    """
    document = _parse(text)
    declared_title = _declared_title(document)
    summary = _meta(document, "description", "og:description")
    url = _canonical_url(document)
    root, landmark = _content_root(document)
    _drop_chrome(root, landmark=landmark)
    if landmark and not _text_of(root):
        root, landmark = _body(document), False  # rule 4
        _drop_chrome(root, landmark=landmark)
    root = _single_article(root)
    _tidy(root)
    h1 = root.xpath("(.//h1)[1]")
    title = _page_title(declared_title, _text_of(h1[0]) if h1 else "")
    html = lxml.html.tostring(root, encoding="unicode", with_tail=False)
    try:
        markdown = convert(html, _OPTIONS).content or ""
    except ConversionError as error:  # its whole hierarchy, a caught Rust panic included
        raise InvalidInput(f"the HTML could not be converted to Markdown: {error}") from None
    if not markdown.strip():
        raise InvalidInput(_NO_TEXT)
    return HtmlPage(title=title, markdown=markdown.strip() + "\n", summary=summary, url=url)
