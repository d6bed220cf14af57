"""GET /v1/sources/view: a stored source as a safe HTML page, the cited chunk marked.

Every source opens: a citation links to the source's URL when it has one, and here
otherwise. The page is built from the chunks the retriever stores (ReadSource), in
document order. Stored text is Markdown (every format is converted to it at ingest),
so it is rendered as its author wrote it (issue #32: fences and ``**`` showed raw):
markdown-it-py (MIT) in CommonMark mode plus tables, with raw HTML off (a document's
``<script>`` or ``<img onerror>`` is shown as text, escaped), images off and link
targets checked by markdown-it's own rules (no ``javascript:``); code is in ``<pre>``
and ``<code>``. A plain-text source (``.txt``, ``.log``) stays pre-wrapped text.
No script runs on the page (its CSP allows none). The cited chunk carries the class
``cited`` and an ``id="cited"`` anchor, so a link ending in ``#cited`` scrolls to it
without any script; with ``start`` and ``end`` (a citation's ``source_span``: a range
of the chunk's text) the supporting sentence inside it is a ``<mark>``. Access is
guarded like ``POST /v1/search``: the same optional key and the same search rate and
quota.
"""

from html import escape
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import HTMLResponse
from markdown_it import MarkdownIt

from groundwire_core.urls import is_web_url
from groundwire_gateway import models
from groundwire_gateway.auth import Principal
from groundwire_gateway.limits import is_anonymous
from groundwire_gateway.routes import PUBLIC_ERRORS
from groundwire_gateway.routes.security import OPTIONAL_AUTH, public_caller
from groundwire_gateway.routes.system import PAGE_HEADERS
from groundwire_gateway.state import GatewayState

VIEW_PATH = "/v1/sources/view"
# The page is HTML, its errors the one JSON error body: spelled out, because a
# ``model`` entry would take the route's media type (text/html) in the OpenAPI document.
_JSON_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {
        **{k: v for k, v in entry.items() if k != "model"},
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
    }
    for status, entry in PUBLIC_ERRORS.items()
}


_PLAIN_SUFFIXES = (".txt", ".text", ".log", ".csv", ".tsv")
_MARK_OPEN, _MARK_CLOSE = "\ue000", "\ue001"
"""Private-use characters put around the highlighted range before rendering, turned
into ``<mark>`` after (a document's own are replaced first, same length)."""
_MARKDOWN = (
    MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    .enable("table")
    .disable("image")
)


def _chunk_html(text: str, span: tuple[int, int] | None) -> str:
    """The chunk's text escaped, ``span`` (when it lies inside the text) marked."""
    if span is None or not 0 <= span[0] < span[1] <= len(text):
        return escape(text)
    start, end = span
    return (
        f"{escape(text[:start])}<mark class=\"evidence\">{escape(text[start:end])}</mark>"
        f"{escape(text[end:])}"
    )


def _markdown_html(text: str, span: tuple[int, int] | None) -> str | None:
    """The chunk's Markdown rendered (raw HTML escaped), ``span`` marked; None when the
    span crosses a line (a mark across blocks would not nest: shown as text instead)."""
    text = text.replace(_MARK_OPEN, "\ufffd").replace(_MARK_CLOSE, "\ufffd")
    if span is not None and 0 <= span[0] < span[1] <= len(text):
        start, end = span
        if "\n" in text[start:end].strip():
            return None
        text = f"{text[:start]}{_MARK_OPEN}{text[start:end]}{_MARK_CLOSE}{text[end:]}"
    html: str = _MARKDOWN.render(text)
    return html.replace(_MARK_OPEN, '<mark class="evidence">').replace(_MARK_CLOSE, "</mark>")


def is_plain_text(source_id: str) -> bool:
    """Whether a source is plain text (shown pre-wrapped, not rendered as Markdown)."""
    return source_id.lower().endswith(_PLAIN_SUFFIXES)


def render_document(
    doc: models.StoredDocument, cited: str = "", span: tuple[int, int] | None = None
) -> str:
    """The HTML page of a stored source; ``cited`` is the chunk id to mark and
    ``span`` the [start, end) of its text to highlight (ignored when it does not lie
    inside the chunk's text). Every value from the store is escaped."""
    title = doc.title or doc.source_id
    link = doc.url if is_web_url(doc.url) else None
    meta = [f"<code>{escape(doc.source_id)}</code>"]
    if doc.doc_type:
        meta.append(escape(doc.doc_type))
    meta.append(f"{doc.total} chunk{'s' if doc.total != 1 else ''}")
    if link:
        meta.append(f'<a href="{escape(link)}" rel="noopener noreferrer">{escape(link)}</a>')
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)} · Groundwire</title>",
        '<link rel="icon" href="data:,">',
        '<link rel="stylesheet" href="/static/docview.css">',
        "</head><body>",
        f"<header><h1>{escape(title)}</h1>",
        f'<p class="meta">{" · ".join(meta)}</p>',
        f'<p class="meta">Collection <code>{escape(doc.collection)}</code>. The stored text, '
        "chunk by chunk (neighbouring chunks overlap a little).</p></header>",
        "<main>",
    ]
    # A chunk's text starts with its heading path already: no separate headings.
    plain = is_plain_text(doc.source_id)
    for chunk in doc.chunks:
        is_cited = bool(cited) and chunk.chunk_id == cited
        classes = "chunk cited" if is_cited else "chunk"
        current = ' aria-current="true"' if is_cited else ""
        anchor = '<span id="cited"></span>' if is_cited else ""
        label = "Cited passage" if is_cited else f"Chunk {chunk.chunk_index}"
        marked = span if is_cited else None
        rendered = None if plain else _markdown_html(chunk.text, marked)
        body = (
            f'<div class="text">{_chunk_html(chunk.text, marked)}</div>'
            if rendered is None
            else f'<div class="text markdown">{rendered}</div>'
        )
        parts.append(
            f'<section class="{classes}" id="chunk-{chunk.chunk_index}" '
            f'data-chunk-id="{escape(chunk.chunk_id)}"{current}>{anchor}'
            f'<p class="label">{label}</p>'
            f"{body}</section>"
        )
    if doc.total > len(doc.chunks):
        parts.append(f'<p class="meta">… and {doc.total - len(doc.chunks)} more chunks.</p>')
    parts.append("</main></body></html>")
    return "\n".join(parts)


def router(state: GatewayState) -> APIRouter:
    api = APIRouter()
    caller = public_caller(state)

    @api.get(
        VIEW_PATH,
        response_class=HTMLResponse,
        responses={
            **_JSON_ERRORS,
            200: {
                "description": "The page.",
                "content": {"text/html": {"schema": {"type": "string"}}},
            },
        },
        openapi_extra=OPTIONAL_AUTH,
        summary="A stored source as an HTML page, the cited chunk marked (link to #cited).",
        description="What a citation links to when its source has no URL: the source's "
        "stored chunks in document order, their Markdown rendered with raw HTML escaped "
        "(no markup from the document runs). `chunk` marks one chunk (class `cited`, "
        "anchor `#cited`); "
        "`start` and `end` (a citation's `source_span`) highlight that range of its text. "
        "Guarded like POST /v1/search: the same optional key, rate and quota.",
    )
    async def view_source(
        principal: Annotated[Principal, Depends(caller)],
        source_id: Annotated[
            str, Query(min_length=1, max_length=512, description="The source's id.")
        ],
        collection: Annotated[
            str | None,
            Query(pattern=models.COLLECTION_PATTERN, description="Default: the server's."),
        ] = None,
        chunk: Annotated[
            str, Query(max_length=64, description="chunk_id of the passage to mark.")
        ] = "",
        start: Annotated[
            int | None,
            Query(ge=0, le=10_000_000, description="Start of the range of the marked "
                  "chunk's text to highlight (a citation's `source_span`)."),
        ] = None,
        end: Annotated[
            int | None,
            Query(ge=0, le=10_000_000, description="End (exclusive) of that range."),
        ] = None,
    ) -> HTMLResponse:
        name = collection or state.settings.default_collection
        doc = await read_source(state, principal, name, source_id)
        span = (start, end) if start is not None and end is not None else None
        return HTMLResponse(render_document(doc, chunk, span), headers=PAGE_HEADERS)

    return api


async def read_source(
    state: GatewayState, principal: Principal, collection: str, source_id: str
) -> models.StoredDocument:
    """A stored source as ``GET /v1/sources/view`` reads it (also the MCP
    ``read_document`` tool and document resources): the collection check, the search
    rate and quota, the retriever call. Raises NotFound, the limits' rejections and
    the upstream errors."""
    await state.catalog.check(collection, reveal=not is_anonymous(principal), caller=principal)
    ticket = await state.limiter.admit(
        state.limiter.ask_for("search", principal.client, principal.tenant)
    )
    try:
        return await state.upstream.read_source(collection, source_id)
    finally:
        await state.limiter.release(ticket)
