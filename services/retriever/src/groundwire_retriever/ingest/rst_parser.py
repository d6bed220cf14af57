"""reStructuredText to Markdown with docutils, through the HTML path.

docutils is the reference reStructuredText parser (Sphinx builds on it). Its code is
in the public domain, the few exceptions under BSD-2-Clause (its COPYING file); the
one GPL file it lists, an Emacs mode, is not in the wheel. It parses the source into
a doctree, docutils' own HTML5 writer renders it, and ``html_parser`` (lxml and
html-to-markdown) turns that into Markdown: sections become headings, so chunks get
heading paths; literal blocks and ``code-block`` become fenced code; tables, grid or
simple, become pipe tables. One HTML-to-Markdown path for HTML pages and rendered
reStructuredText rather than a second, hand-written doctree walker.

A document is untrusted input, and docutils' directives can read files and URLs on
the server (``include``, ``raw`` with ``:file:``/``:url:``, ``csv-table`` with
``:file:``) or pass HTML through (``raw``): file insertion and raw content are off,
configuration files and environment are not read (``_disable_config``), and errors
in the markup never stop the parse (``halt_level`` 5); what docutils cannot parse is
left out of the text. Sphinx-only roles and directives (``:ref:``, ``toctree``) are
unknown to docutils and are left out the same way.

docutils' inline-markup parser takes time that grows faster than the paragraph: 3,000
characters of unbalanced markup (``*a *a *a …``) in one paragraph took 1.9 s here and
10,000 took 13 s. The sandbox's time budget per document is what bounds that; a line
longer than docutils' own limit (10,000 characters, which it sets for the same reason)
is refused with that reason rather than silently dropped.

The bibliographic fields (``:Author:``, ``:Date:``, ``:Tags:`` and any other field
list at the top) are kept as properties, under their names in lower case, and taken
out of the text.

The title is docutils' document title (a lone top-level section), else the first
heading of any level, else the first line that is bold as a whole (the AWS CLI's
examples open with ``**To create a bucket**`` and have no section at all), else none
(the caller falls back to the file name). Never the HTML page's ``<title>``: without
a document title docutils writes its source name there, ``<string>`` (issue #32: all
329 AWS CLI example pages were titled so).
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes
from docutils.core import publish_doctree, publish_from_doctree
from docutils.utils import SystemMessage

from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.html_parser import parse_html
from groundwire_retriever.ingest.markup import Extracted

_SETTINGS: dict[str, Any] = {
    "_disable_config": True,  # no docutils.conf from the working directory or $DOCUTILSCONFIG
    "file_insertion_enabled": False,
    "raw_enabled": False,
    "halt_level": 5,  # never raise on a markup error
    "report_level": 5,  # and write no system messages into the text
    "warning_stream": False,
    "input_encoding": "unicode",
    "output_encoding": "unicode",
    "embed_stylesheet": False,
    "stylesheet_path": "",
    "syntax_highlight": "none",
    "math_output": "LaTeX",  # math as its source: no MathML converter
    "traceback": True,  # errors reach us as exceptions, not as sys.exit
}
_MAX_PROPERTY_CHARS = 1_000
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.M)
_BOLD_LINE = re.compile(r"^[ \t]*\*\*([^*\n]+?)\*\*[ \t]*[.:]?[ \t]*$", re.M)


def title_of(markdown: str) -> str:
    """The first heading's text (any level), else the first line bold as a whole, else
    "" (the caller names the document by its file)."""
    heading = _HEADING.search(markdown)
    bold = _BOLD_LINE.search(markdown)
    found = min(
        (m for m in (heading, bold) if m is not None), key=lambda m: m.start(), default=None
    )
    return " ".join(found.group(1).split()) if found is not None else ""


_MAX_LINE_CHARS = 10_000  # docutils' line_length_limit default: longer lines are dropped


def _docinfo(document: nodes.document) -> dict[str, str]:
    """The bibliographic fields as properties; the docinfo is removed from the tree."""
    properties: dict[str, str] = {}
    for info in list(document.findall(nodes.docinfo)):
        for child in info.children:
            if isinstance(child, nodes.field) and len(child) == 2:
                name, value = child[0].astext(), child[1].astext()
            else:
                name, value = child.tagname, child.astext()
            key = "_".join(name.lower().split())
            if key and value.strip() and key not in properties:
                properties[key] = " ".join(value.split())[:_MAX_PROPERTY_CHARS]
        info.parent.remove(info)
    return properties


def parse_rst(text: str) -> Extracted:
    """A reStructuredText document as Markdown. Raises InvalidInput when it has no
    text, has a line past docutils' limit, nests past Python's recursion limit, or
    docutils fails on it."""
    longest = max((len(line) for line in text.split("\n")), default=0)
    if longest > _MAX_LINE_CHARS:
        raise InvalidInput(
            f"a line of the reStructuredText is {longest} characters long; docutils reads "
            f"lines of at most {_MAX_LINE_CHARS}"
        )
    try:
        document = publish_doctree(text, settings_overrides=_SETTINGS)
        properties = _docinfo(document)
        for literal in document.findall(nodes.literal):
            # the writer's <code> (its "code" role's), not <span class="docutils
            # literal">, which reached Markdown as plain words: ``create-bucket``
            # lost its monospace
            literal["classes"].append("code")
        title = " ".join(str(document.get("title", "")).split())
        html = publish_from_doctree(document, writer="html5", settings_overrides=_SETTINGS)
    except RecursionError:
        raise InvalidInput("the reStructuredText nests too deeply to parse") from None
    except (SystemMessage, nodes.NodeFound, ValueError, KeyError, AttributeError) as error:
        raise InvalidInput(
            f"the reStructuredText could not be parsed ({type(error).__name__})"
        ) from None
    try:
        page = parse_html(html if isinstance(html, str) else html.decode())
    except InvalidInput as error:
        if error.message.startswith("the HTML has no text"):  # the HTML is ours, not theirs
            raise InvalidInput("the document has no text") from None
        raise
    return Extracted(
        title=title or title_of(page.markdown),
        markdown=page.markdown,
        properties=properties,
        summary=page.summary,
    )
