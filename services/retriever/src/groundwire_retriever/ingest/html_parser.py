"""HTML to Markdown: BeautifulSoup (lxml) parses, markdownify writes Markdown.

Headings stay ATX headings (so the chunker sees the page's sections), ``<pre>``
becomes a fenced block, tables become pipe tables. Scripts, styles, navigation and
other non-content elements are dropped first. Broken markup is parsed as far as
lxml's recovering parser gets; only a page with no text at all is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bs4 import BeautifulSoup, Tag
from bs4.dammit import EncodingDetector
from markdownify import MarkdownConverter

from groundwire_core.errors import InvalidInput

# Not content: code, styling, navigation chrome and embedded objects.
_DROPPED = ["script", "style", "noscript", "template", "nav", "svg", "iframe", "object"]
_PERMALINK_TEXT = frozenset({"¶", "#", "§", "🔗"})
_LANGUAGE_CLASS = re.compile(r"^(?:language|lang)-(\S+)$")
_BACKTICK_RUN = re.compile(r"`{3,}")


@dataclass(frozen=True)
class HtmlPage:
    title: str
    markdown: str
    summary: str
    url: str


class _Converter(MarkdownConverter):
    """markdownify with the few changes chunk text needs.

    Overriding ``convert_<tag>`` is markdownify's documented extension point; its
    bundled stub does not list those hooks, hence the ``type: ignore[misc]``.
    """

    def convert_pre(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        block: str = super().convert_pre(el, text, parent_tags)  # type: ignore[misc]
        runs = _BACKTICK_RUN.findall(text)
        if not runs:
            return block
        # The code itself holds a ``` line: fence it with a longer run (CommonMark).
        fence = "`" * (max(len(r) for r in runs) + 1)
        inner = block.strip("\n")
        return f"\n\n{fence}{inner[3:-3]}{fence}\n\n"

    def convert_td(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        cell: str = super().convert_td(el, text.replace("|", "\\|"), parent_tags)  # type: ignore[misc]
        return cell

    def convert_th(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        cell: str = super().convert_th(el, text.replace("|", "\\|"), parent_tags)  # type: ignore[misc]
        return cell

    def convert_img(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        # The alt text is the content; a src (often a data: URI) is noise to a model.
        return str(el.get("alt") or "")

    def convert_a(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        return text


def _code_language(el: Tag) -> str:
    for node in (el, el.find("code")):
        if isinstance(node, Tag):
            for cls in node.get_attribute_list("class"):
                match = _LANGUAGE_CLASS.match(cls or "")
                if match:
                    return match.group(1)
    return ""


_CONVERTER = _Converter(
    heading_style="ATX",
    bullets="-",
    code_language_callback=_code_language,
    escape_asterisks=False,
    escape_underscores=False,
    escape_misc=False,
)


def decode_html(content: bytes) -> str:
    """The page's text: UTF-8, else the charset the page declares."""
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        utf8_error = error.start
    declared = EncodingDetector.find_declared_encoding(content, is_html=True)
    if declared:
        try:
            return content.decode(declared)
        except (UnicodeDecodeError, LookupError):
            raise InvalidInput(
                f"the HTML declares charset {declared!r} but is not valid in it"
            ) from None
    raise InvalidInput(
        f"the content is not valid UTF-8 (byte {utf8_error}) and declares no charset"
    )


def _meta(soup: BeautifulSoup, *keys: str) -> str:
    for key in keys:
        for attr in ("property", "name"):
            tag = soup.find("meta", attrs={attr: key})
            if isinstance(tag, Tag):
                value = str(tag.get("content") or "").strip()
                if value:
                    return value
    return ""


def _canonical_url(soup: BeautifulSoup) -> str:
    link = soup.find("link", rel="canonical")
    href = str(link.get("href") or "").strip() if isinstance(link, Tag) else ""
    url = href or _meta(soup, "og:url")
    return url if url.startswith(("http://", "https://")) else ""


def _tidy_headings(root: BeautifulSoup) -> None:
    """Heading text only: permalink anchors (``¶``) go, other links keep their text."""
    for heading in root.find_all(re.compile(r"^h[1-6]$")):
        for anchor in heading.find_all("a"):
            if anchor.get_text(strip=True) in _PERMALINK_TEXT or not anchor.get_text(strip=True):
                anchor.decompose()


def _text_of(tag: Any) -> str:
    return " ".join(tag.get_text(" ").split()) if isinstance(tag, Tag) else ""


def parse_html(text: str) -> HtmlPage:
    """Converts one page. Raises InvalidInput when no text is left."""
    soup = BeautifulSoup(text, "lxml")
    _tidy_headings(soup)
    h1 = _text_of(soup.find("h1"))
    title = _meta(soup, "og:title") or _text_of(soup.title) or h1
    if h1 and h1 in title:
        title = h1  # "Install | Site" in <title>, "Install" in the page: the page's is cleaner
    summary = _meta(soup, "description", "og:description")
    url = _canonical_url(soup)
    for tag in soup.find_all(_DROPPED):
        tag.decompose()
    main = soup.find("main")
    root = main if isinstance(main, Tag) else (soup.body or soup)
    markdown = _CONVERTER.convert_soup(root)
    if not markdown.strip():
        raise InvalidInput("the HTML has no text (after removing scripts, styles and navigation)")
    return HtmlPage(title=title, markdown=markdown.strip() + "\n", summary=summary, url=url)
