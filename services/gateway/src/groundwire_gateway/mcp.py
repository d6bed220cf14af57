"""The MCP server at ``/mcp``: the collection as tools and resources for Claude Desktop,
IDEs and agents (the official ``mcp`` SDK, streamable HTTP).

Tools: ``search`` (ranked passages with their sources), ``ask`` (a grounded answer
with its citations and how each was verified), ``list_collections`` and
``read_document``; every stored document is also a resource,
``groundwire://documents/{collection}/{source_id}``.

Nothing here decides access or cost on its own: each HTTP request to ``/mcp`` passes
the public routes' key check (``Authenticator.public``: refused with the API's 401
where a public route would refuse it), and each tool goes through the same path as
its HTTP route (``run_search``, ``start_chat``, ``read_source``, the catalog, the
limiter), so the rate limit, quota, token budget and chat slots count MCP calls like
the HTTP ones.

The endpoint is stateless (a fresh transport per request, JSON responses): any
gateway replica answers any call, with no session affinity at the load balancer.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import FastAPI
from mcp.server.mcpserver import Context, MCPServer, ResourceSecurity
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from groundwire_core.context import current_request_id
from groundwire_core.document_text import join_chunks
from groundwire_core.errors import GroundwireError, NotFound, Overloaded
from groundwire_core.identity import bind_identity
from groundwire_gateway import models
from groundwire_gateway.auth import Principal
from groundwire_gateway.chat_session import start_chat
from groundwire_gateway.errors import error_body, error_response
from groundwire_gateway.routes.document_view import read_source
from groundwire_gateway.routes.search import run_search
from groundwire_gateway.routes.security import public_principal
from groundwire_gateway.state import GatewayState

log = logging.getLogger("groundwire.gateway.mcp")

MCP_PATH = "/mcp"
RESOURCE_TEMPLATE = "groundwire://documents/{collection}/{+source_id}"

INSTRUCTIONS = """\
Groundwire holds document collections (product docs, runbooks, handbooks) and answers
from them only. Use `ask` for a question that needs an answer: it returns the answer
with numbered citations, each checked against the passage it cites. Use `search` to
find passages yourself (several angles, exact wording, comparing sources). Use
`read_document` (or the document resources) to read a whole source a result points
to. `list_collections` names the collections; without one, tools use the default.
"""

SEARCH_DESCRIPTION = """\
Search the document collection and return the best-matching passages, ranked, each
with its source (source_id, title, URL, heading path), a relevance score and a
`resource` URI for the whole document. Hybrid search (semantic + keyword), then
reranked. Use it to gather evidence, find where something is documented, or compare
what several documents say; quote passages with their source. Prefer `ask` when you
just need the answer to a question. Phrase `query` as a question or keywords."""

ASK_DESCRIPTION = """\
Answer a question from the document collection: a grounded answer whose sentences
cite numbered sources ([1], [2]…), each citation checked against the passage it
cites (`citations[].status`: supported, unsupported, contradicted when a method that
reads meaning judged it; quoted, similar, unrelated when only similarity did — a
relevance score, not proof; unchecked). Also returns the cited sources (title, URL,
passage) and a one-line verification summary.
`mode` says how it was written: generated (an LLM), extractive (sentences quoted
from the documents), declined (the documents do not answer it — say so, do not
guess). Use it for questions about what the documents say; it does not know anything
outside them. Ask one self-contained question (include the context of a follow-up)."""

LIST_DESCRIPTION = """\
List the document collections this server can search, and which one is the default
(used when a tool is given no collection). Call it when the user names a collection
you have not seen, or before searching when several may exist."""

READ_DESCRIPTION = """\
Read one stored document in full (its stored text, in order; neighbouring chunks
overlap a little), by the `source_id` a search result or citation gave. Use it when a
passage is not enough: to read the surrounding section, follow steps in order, or
check context before quoting."""


# The tools' signatures are read by the SDK at registration (postponed annotations are
# evaluated against this module's globals): the parameter types live here.
Collection = Annotated[
    str | None, Field(description="Collection to use; the default collection when absent.")
]
Query = Annotated[str, Field(description="What to look for (a question or keywords).")]
Limit = Annotated[int, Field(ge=1, le=20, description="Passages to return.")]
Question = Annotated[str, Field(description="The question, self-contained.")]
SourceId = Annotated[str, Field(description="The document's source_id.")]


# --- results (structured output: the model reads the JSON, clients the schema) ------------


class Passage(BaseModel):
    rank: int
    score: float = Field(description="Relevance; higher is better, comparable within one search.")
    source_id: str
    title: str
    url: str = Field(description="The document's canonical URL; empty when it has none.")
    heading_path: list[str] = Field(description="The section the passage sits in.")
    text: str
    chunk_id: str
    resource: str = Field(description="URI of the whole document (resources/read).")


class SearchOutput(BaseModel):
    collection: str
    query: str
    passages: list[Passage]


class CitedSource(BaseModel):
    number: int = Field(description="The [n] the answer uses.")
    source_id: str
    title: str
    url: str
    text: str = Field(description="The cited passage.")
    resource: str = Field(description="URI of the whole document; empty for a live page.")
    live: bool = Field(
        False,
        description="Looked up live on the documentation site (url), not in the collection.",
    )
    fetched_at: float = Field(0.0, description="Live only: Unix seconds of the fetch.")


class CheckedCitation(BaseModel):
    number: int
    sentence: str = Field(description="The answer sentence carrying the citation.")
    status: str = Field(
        description="supported, unsupported or contradicted (judged by nli or llm); quoted, "
        "similar or unrelated (similarity only: not proof); unchecked."
    )
    support: float
    method: str = Field(description="Verifier: nli, llm, similarity (never proof) or none.")


class AskOutput(BaseModel):
    collection: str
    answer: str
    mode: str = Field(description="generated, extractive or declined.")
    citations: list[CheckedCitation]
    sources: list[CitedSource]
    verification: str = Field(
        description="e.g. '2 of 3 citations supported (checked by nli)', or, when nothing "
        "read their meaning, '3 quoted passages chosen by similarity; none checked for "
        "meaning'."
    )
    withheld: int = Field(description="Sentences withheld from the answer: they failed the check.")
    request_id: str
    answer_id: str | None = Field(
        None, description="The stored answer (rate it: POST /v1/feedback); null if not stored."
    )


class CollectionInfo(BaseModel):
    name: str
    default: bool


class CollectionsOutput(BaseModel):
    collections: list[CollectionInfo]


class DocumentOutput(BaseModel):
    collection: str
    source_id: str
    title: str
    url: str
    doc_type: str
    text: str
    chunks_shown: int
    total_chunks: int


# --- the edge ------------------------------------------------------------------------------


async def principal_of(state: GatewayState, request: Request) -> Principal:
    """The caller, exactly as the public routes decide it: decided once per HTTP
    request by :class:`McpEndpoint` (kept on ``request.state``, which the SDK's
    request shares), so a tool does not look its key up or verify its token again.
    Raises Unauthenticated."""
    principal = getattr(request.state, "principal", None)
    if isinstance(principal, Principal):
        bind_identity(principal.identity())  # as public_principal did, in this task
        return principal
    return await public_principal(state, request)


STREAM_REFUSED = (
    "this MCP endpoint is stateless: it pushes no server-initiated messages, so it "
    "opens no GET stream; send requests with POST"
)


class McpEndpoint:
    """The ASGI app at ``/mcp``: the key check, then the SDK's transport.

    ``GET /mcp`` (the standalone SSE stream of server-initiated messages) is answered
    405 before anything else, as the MCP specification allows a server that offers no
    such stream: a stateless endpoint has nothing to push on it, and the SDK's stream
    never ended, so 1,100 unauthenticated GETs held every file descriptor until
    ``/healthz`` and searches timed out (#31). With no stream there is nothing to
    bound or time out; every POST is answered with one JSON body and ends."""

    path = MCP_PATH
    """The route template the metrics label requests with (``app.route_label``)."""

    def __init__(self, state: GatewayState, manager: StreamableHTTPSessionManager) -> None:
        self._state = state
        self._manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # a Route with an ASGI endpoint sets no "route": the label was "unmatched"
        scope["route"] = self
        if scope.get("method") == "GET":
            self._state.metrics.errors.labels(MCP_PATH, "method_not_allowed").inc()
            refused = JSONResponse(
                error_body("method_not_allowed", STREAM_REFUSED),
                status_code=405,
                headers={"Allow": "POST, DELETE"},
            )
            await refused(scope, receive, send)
            return
        try:
            await public_principal(self._state, Request(scope))
        except GroundwireError as error:
            # before the SDK reads a byte: the same 401 body and header as the API's
            self._state.metrics.errors.labels(MCP_PATH, error.code).inc()
            if error.code in ("unauthenticated", "permission_denied"):
                self._state.auth.audit.denied(None, MCP_PATH, error.code)
            await error_response(error)(scope, receive, send)
            return
        await self._manager.handle_request(scope, receive, send)


def resource_uri(collection: str, source_id: str) -> str:
    return f"groundwire://documents/{collection}/{quote(source_id, safe='/')}"


def _tool_error(error: GroundwireError) -> ToolError:
    """A typed error as the model reads it: code, message, when to retry."""
    text = f"{error.code}: {error.message}"
    if isinstance(error, Overloaded):
        text += f" (retry after {max(1, math.ceil(error.retry_after_s))} s)"
    if error.dependency:
        text += f" [dependency: {error.dependency}]"
    return ToolError(text)


async def _caller(state: GatewayState, ctx: Context) -> Principal:
    request = ctx.request_context.request
    if not isinstance(request, Request):
        raise ToolError("this server answers over HTTP only")
    try:
        return await principal_of(state, request)
    except GroundwireError as error:
        raise _tool_error(error) from None


def _collection(state: GatewayState, name: str | None) -> str:
    return name or state.settings.default_collection


def _passage(collection: str, r: models.SearchResult) -> Passage:
    return Passage(
        rank=r.rank,
        score=r.score,
        source_id=r.source_id,
        title=r.title,
        url=r.url,
        heading_path=r.heading_path,
        text=r.text,
        chunk_id=r.chunk_id,
        resource=resource_uri(collection, r.source_id),
    )


MEANING_METHODS = ("nli", "llm")
"""Verifiers that read meaning: only their verdicts may say supported."""


def verification_summary(citations: list[CheckedCitation]) -> str:
    """One line on what was checked: "N of M citations supported" only over citations a
    method that reads meaning judged; similarity verdicts are named as such (issue #32:
    a verbatim quote scores ~1.0 against its own passage, which proves nothing)."""
    if not citations:
        return "no citations"
    judged = [c for c in citations if c.method in MEANING_METHODS]
    rest = len(citations) - len(judged)
    if not judged:
        quoted = sum(c.status == "quoted" for c in citations)
        if quoted == len(citations):
            plural = "s" if quoted != 1 else ""
            return f"{quoted} quoted passage{plural} chosen by similarity; none checked for meaning"
        return f"{len(citations)} citation(s) not checked for meaning"
    supported = sum(c.status == "supported" for c in judged)
    methods = "/".join(dict.fromkeys(c.method for c in judged))
    line = f"{supported} of {len(judged)} citations supported (checked by {methods})"
    return line + (f"; {rest} not checked for meaning" if rest else "")


def _answer(collection: str, events: list[models.AskEvent]) -> AskOutput:
    """The ask tool's result from a finished chat's events."""
    citations = models.CitationsEvent(sources=[], citations=[])
    done = models.DoneEvent(mode="unspecified", answer="")
    for event in events:
        if isinstance(event, models.CitationsEvent):
            citations = event
        elif isinstance(event, models.DoneEvent):
            done = event
    checked = [
        CheckedCitation(
            number=c.number,
            sentence=c.sentence,
            status=c.status,
            support=c.support,
            method=c.method,
        )
        for c in citations.citations
    ]
    return AskOutput(
        collection=collection,
        answer=done.answer,
        mode=done.mode,
        citations=checked,
        sources=[
            CitedSource(
                number=s.number,
                source_id=s.source_id,
                title=s.title,
                url=s.url,
                text=s.text,
                resource="" if s.live else resource_uri(collection, s.source_id),
                live=s.live,
                fetched_at=s.fetched_at,
            )
            for s in citations.sources
        ],
        verification=verification_summary(checked),
        withheld=len(citations.withheld),
        request_id=current_request_id(),
        answer_id=done.answer_id,
    )


def _document(doc: models.StoredDocument) -> DocumentOutput:
    return DocumentOutput(
        collection=doc.collection,
        source_id=doc.source_id,
        title=doc.title,
        url=doc.url,
        doc_type=doc.doc_type,
        text=join_chunks(c.text for c in doc.chunks),
        chunks_shown=len(doc.chunks),
        total_chunks=doc.total,
    )


def build_server(state: GatewayState) -> MCPServer[Any]:
    """The MCP server over ``state``; transport-free (see :func:`mount`)."""
    server: MCPServer[Any] = MCPServer(
        "groundwire", instructions=INSTRUCTIONS, website_url="https://groundwire.dev"
    )
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(description=SEARCH_DESCRIPTION, annotations=read_only)
    async def search(
        query: Query,
        ctx: Context,
        collection: Collection = None,
        limit: Limit = 8,
    ) -> SearchOutput:
        principal = await _caller(state, ctx)
        try:
            body = models.SearchBody(query=query, collection=collection, limit=limit)
        except ValidationError as error:
            raise ToolError(f"invalid_input: {error.errors()[0]['msg']}") from None
        try:
            found = await run_search(state, principal, body)
        except GroundwireError as error:
            raise _tool_error(error) from None
        return SearchOutput(
            collection=found.collection,
            query=query,
            passages=[_passage(found.collection, r) for r in found.results],
        )

    @server.tool(description=ASK_DESCRIPTION, annotations=read_only)
    async def ask(
        question: Question,
        ctx: Context,
        collection: Collection = None,
    ) -> AskOutput:
        principal = await _caller(state, ctx)
        name = _collection(state, collection)
        try:
            messages = [models.ChatMessage(role="user", content=question)]
        except ValidationError as error:
            raise ToolError(f"invalid_input: {error.errors()[0]['msg']}") from None
        try:
            chat, event = await start_chat(state, principal, messages, name, [], via="mcp")
            events = [event]
            try:
                while not isinstance(event, models.DoneEvent):
                    event = await chat.next()
                    events.append(event)
            finally:
                await chat.close()
        except GroundwireError as error:
            raise _tool_error(error) from None
        return _answer(name, events)

    @server.tool(description=LIST_DESCRIPTION, annotations=read_only)
    async def list_collections(ctx: Context) -> CollectionsOutput:
        principal = await _caller(state, ctx)
        default = state.settings.default_collection
        try:
            # what GET /v1/models shows this caller: its tenant's and the public ones
            names = sorted(await state.catalog.names(principal))
        except GroundwireError as error:
            raise _tool_error(error) from None
        return CollectionsOutput(
            collections=[CollectionInfo(name=n, default=n == default) for n in names]
        )

    @server.tool(description=READ_DESCRIPTION, annotations=read_only)
    async def read_document(
        source_id: SourceId,
        ctx: Context,
        collection: Collection = None,
    ) -> DocumentOutput:
        principal = await _caller(state, ctx)
        try:
            doc = await read_source(state, principal, _collection(state, collection), source_id)
        except GroundwireError as error:
            raise _tool_error(error) from None
        return _document(doc)

    @server.resource(
        RESOURCE_TEMPLATE,
        name="document",
        description="A stored document's text (Markdown-ish; chunks in order).",
        mime_type="text/markdown",
        # a source id is a key in the store, never a path on this machine
        security=ResourceSecurity(exempt_params={"source_id"}),
    )
    async def document(collection: str, source_id: str, ctx: Context) -> str:
        request = ctx.request_context.request
        if not isinstance(request, Request):
            raise ResourceError("this server answers over HTTP only")
        try:
            doc = await read_source(
                state, await principal_of(state, request), collection, source_id
            )
        except NotFound as error:
            raise ResourceNotFoundError(error.message) from None
        except GroundwireError as error:
            raise ResourceError(str(_tool_error(error))) from None
        out = _document(doc)
        head = f"# {out.title or out.source_id}\n\n"
        if out.url:
            head += f"<{out.url}>\n\n"
        return head + out.text

    return server


def mount(app: FastAPI, state: GatewayState) -> None:
    """Serves the MCP server at ``/mcp`` on ``app`` and runs its transport for the
    app's lifetime (inside the app's own lifespan)."""
    server = build_server(state)
    server.streamable_http_app(
        stateless_http=True,
        json_response=True,
        # Host and Origin are not pinned, as on every other route: the key decides,
        # and the gateway runs behind names and proxies it cannot know.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    manager = server.session_manager
    app.router.routes.append(
        Route(MCP_PATH, endpoint=McpEndpoint(state, manager), methods=["GET", "POST", "DELETE"])
    )
    outer = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(asgi: Any) -> AsyncIterator[Any]:
        # The transport's task group must be entered and left by one task; a server
        # (or a test harness) may run the lifespan's start and end in different tasks,
        # so the manager runs in a task of its own for the app's lifetime.
        started, stop = asyncio.Event(), asyncio.Event()

        async def serve() -> None:
            async with manager.run():
                started.set()
                await stop.wait()

        async with outer(asgi) as value:
            task = asyncio.create_task(serve(), name="mcp-transport")
            ready = asyncio.create_task(started.wait())
            await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                ready.cancel()
                task.result()  # it failed to start: raise why
            try:
                yield value
            finally:
                stop.set()
                await task

    app.router.lifespan_context = lifespan
