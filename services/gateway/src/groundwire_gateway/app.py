"""The gateway's ASGI app: routes, validation at the edge, errors mapped once,
metrics, and the web page."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from opentelemetry import trace
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from groundwire_core.context import REQUEST_ID_HEADER, request_scope
from groundwire_core.database import create_engine, prepare, session_factory
from groundwire_core.errors import GroundwireError
from groundwire_core.grpc.service_auth import set_process_token
from groundwire_core.identity import identity_scope
from groundwire_gateway import mcp, models
from groundwire_gateway.audit import Auditor
from groundwire_gateway.auth import Authenticator
from groundwire_gateway.catalog import Catalog
from groundwire_gateway.daily import DailyLedger
from groundwire_gateway.db.base import MIGRATIONS
from groundwire_gateway.db.conversations import ConversationStore
from groundwire_gateway.db.scratch import ScratchDatabase
from groundwire_gateway.errors import (
    FRAMEWORK_CODES,
    QuotaExceeded,
    RateLimited,
    TokenBudgetExceeded,
    TooManyInflight,
    error_body,
    error_response,
)
from groundwire_gateway.keystore import DatabaseKeyStore
from groundwire_gateway.limits import Limiter
from groundwire_gateway.metrics import GatewayMetrics
from groundwire_gateway.routes import (
    admin,
    chat,
    completions,
    conversations,
    document_view,
    jobs,
    keys,
    search,
    sync,
    system,
)
from groundwire_gateway.settings import GatewaySettings
from groundwire_gateway.state import GatewayState, UpstreamApi
from groundwire_gateway.upstream import Upstream

log = logging.getLogger("groundwire.gateway")
tracer = trace.get_tracer("groundwire.gateway")

VERSION = "0.1.0"
# A caller's request id is echoed into logs, headers and trace attributes: only a
# plain token passes (no spaces, quotes or '=' that could forge log fields).
REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
RATE_LIMIT_MODE_HEADER = b"x-ratelimit-mode"
# Swagger UI and ReDoc served from this gateway (the files ship in the fastapi-offline
# wheel, MIT; Swagger UI itself is Apache-2.0, ReDoc MIT): /docs works offline and
# loads nothing from a CDN.
DOCS_ASSETS = Path(fastapi_offline.__file__).resolve().parent / "static"
DOCS_ASSETS_URL = "/docs-assets"
LIMIT_REJECTIONS = (RateLimited, QuotaExceeded, TokenBudgetExceeded, TooManyInflight)
UPLOAD_SUFFIX = "/files"
# Schemas only referenced from hand-written parts of the document (the SSE payloads).
EXTRA_SCHEMAS: tuple[type[BaseModel], ...] = (
    models.RetrievalEvent,
    models.DeltaEvent,
    models.ResetEvent,
    models.CitationsEvent,
    models.StagesEvent,
    models.DoneEvent,
    models.ErrorEvent,
    models.ChatCompletionChunk,
    models.ErrorResponse,
)


def route_label(scope: Scope) -> str:
    """The route template (bounded label cardinality), or "unmatched"."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


def logged_path(scope: Scope) -> str:
    """The path as sent (still percent-encoded), for logs: a decoded path may hold
    spaces or newlines that would forge log fields or lines."""
    raw = scope.get("raw_path")
    return raw.decode("latin-1") if isinstance(raw, bytes) else str(scope.get("path", ""))


def safe_request_id(incoming: str) -> str | None:
    """The caller's request id when it is a plain token (``[A-Za-z0-9._-]{1,128}``),
    else None (a new id is generated)."""
    return incoming if REQUEST_ID.fullmatch(incoming) else None


class RequestContextMiddleware:
    """Per request: a request id (the caller's if it is a plain token, or a new one),
    the deadline, a span, the body size limit and read deadline, the limits mode
    header, and the request metrics — before any route runs."""

    def __init__(
        self,
        app: ASGIApp,
        settings: GatewaySettings,
        metrics: GatewayMetrics,
        limiter: Limiter,
    ) -> None:
        self._app = app
        self._settings = settings
        self._metrics = metrics
        self._limiter = limiter

    def _timeout_s(self, path: str) -> float:
        if path.startswith("/v1/chat") or path == "/mcp":  # the MCP `ask` tool is a chat
            return self._settings.chat_timeout_s
        if path.startswith("/v1/admin/"):
            return self._settings.admin_timeout_s
        return self._settings.request_timeout_s

    def _body_limit(self, path: str) -> int:
        if path.startswith("/v1/admin/") and path.endswith(UPLOAD_SUFFIX):
            return self._settings.max_upload_bytes
        return self._settings.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        rid = safe_request_id(headers.get(REQUEST_ID_HEADER, ""))
        path: str = scope.get("path", "")
        # identity_scope: the caller's identity, bound by the route's auth dependency,
        # ends with the request (never leaks into the next one on this task)
        with request_scope(rid, self._timeout_s(path)) as request_id, identity_scope(None):
            status = 0

            async def send_with_id(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                    message.setdefault("headers", [])
                    message["headers"].append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                    # where limits are decided now: "local" means Redis is down and
                    # this replica counts alone (policy open)
                    message["headers"].append((RATE_LIMIT_MODE_HEADER, self._limiter.mode.encode()))
                await send(message)

            method = scope.get("method", "")
            name = f"{method} {path}"
            logged = f"{method} {logged_path(scope)}"
            started = time.perf_counter()
            limit = self._body_limit(path)
            length = headers.get("content-length", "0")
            try:
                if length.isdigit() and int(length) > limit:
                    response = JSONResponse(
                        error_body(
                            "payload_too_large",
                            f"the body has {length} bytes; the limit is {limit}",
                        ),
                        status_code=413,
                    )
                    await response(scope, receive, send_with_id)
                    return
                received = 0
                body_done = False
                body_deadline = asyncio.get_running_loop().time() + self._settings.body_timeout_s

                async def limited_receive() -> Message:
                    # a chunked body has no content-length: count what actually arrives
                    nonlocal received, body_done
                    if body_done:  # waiting for a disconnect: no deadline
                        return await receive()
                    try:
                        async with asyncio.timeout_at(body_deadline):
                            message = await receive()
                    except TimeoutError:
                        # a body trickling in holds a worker and a socket: cut it off
                        raise StarletteHTTPException(
                            408,
                            "the request body did not arrive within "
                            f"{self._settings.body_timeout_s:g} s",
                            headers={"Connection": "close"},
                        ) from None
                    if message["type"] == "http.request":
                        received += len(message.get("body", b""))
                        body_done = not message.get("more_body", False)
                        if received > limit:
                            raise StarletteHTTPException(
                                413, f"the body exceeds the limit of {limit} bytes"
                            )
                    else:
                        body_done = True
                    return message

                with tracer.start_as_current_span(name, kind=trace.SpanKind.SERVER) as span:
                    span.set_attribute("groundwire.request_id", request_id)
                    try:
                        await self._app(scope, limited_receive, send_with_id)
                    except Exception:
                        # Here, not in Starlette's outermost handler, so that the 500 still
                        # carries the request id; the traceback goes to the log only.
                        log.exception("unhandled error on %s", logged)
                        if status == 0:
                            response = JSONResponse(
                                error_body("internal", "internal error"), status_code=500
                            )
                            await response(scope, receive, send_with_id)
                    finally:
                        span.set_attribute("http.response.status_code", status)
            finally:
                elapsed = time.perf_counter() - started
                route = route_label(scope)
                self._metrics.requests.labels(route, method, str(status)).inc()
                self._metrics.latency.labels(route, method).observe(elapsed)
                log.info("%s %d %.1fms", logged, status, elapsed * 1e3)


def _allowed_methods(app: Any, scope: Scope) -> list[str]:
    """Every method some route serves at this path (Starlette's own 405 names only
    the first route that matched the path)."""
    methods: set[str] = set()
    for route in app.router.routes:
        route_methods = getattr(route, "methods", None)
        if route_methods and route.matches(scope)[0] != Match.NONE:
            methods |= route_methods
    return sorted(methods)


def _validation_details(error: RequestValidationError) -> list[dict[str, Any]]:
    # Only where and what: never echo the input back (it may be 100 KB).
    return [
        {"loc": [str(p) for p in e.get("loc", ())], "message": e.get("msg", "invalid")}
        for e in error.errors()
    ]


class GatewayApp(FastAPI):
    """FastAPI with the SSE payload schemas added to the generated OpenAPI document."""

    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema:
            return self.openapi_schema
        schema = get_openapi(
            title=self.title,
            version=self.version,
            summary=self.summary,
            description=self.description,
            routes=self.routes,
        )
        _, extra = models_json_schema(
            [(m, "serialization") for m in EXTRA_SCHEMAS],
            ref_template="#/components/schemas/{model}",
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for name, definition in extra.get("$defs", {}).items():
            components.setdefault(name, definition)
        self.openapi_schema = schema
        return schema


DESCRIPTION = """\
Grounded, cited answers and ranked search over your documents.

**Errors** are always JSON: `{"error": {"code", "message", "request_id", "dependency"?}}`.
**Limits** (chat and search, in this order, before any model work): a sliding-window
rate limit per client (IP or API key), a daily quota per tenant (callers without an
API key share one of their own), a per-tenant daily token budget (chat input and
answer, approximate: 4 characters per token; search query and the LLM tokens of its
analysis and listwise calls), and a cap on chats in flight; a
refusal is 429 with `Retry-After` and a code (`rate_limited`, `quota_exceeded`,
`token_budget_exceeded`, `too_many_inflight`). Rejected requests count against nothing.
**API keys**: `Authorization: Bearer <key>` or `X-API-Key`; required on `/v1/admin/*`.
**X-RateLimit-Mode** on every response: `shared` (Redis), `local` (Redis down: limits
per replica), `unavailable` (Redis down, policy closed), `in_process` (no Redis).
"""


def create_app(
    settings: GatewaySettings,
    upstream: UpstreamApi | None = None,
    limiter: Limiter | None = None,
) -> FastAPI:
    """The gateway app; ``upstream`` and ``limiter`` are injectable for tests."""
    if (token := settings.service_token) is not None:  # the gateway's channels carry it
        set_process_token(token.get_secret_value())
    up: UpstreamApi = upstream or Upstream(settings)
    metrics = GatewayMetrics()
    # the system of record (tenants, keys, audit, daily counters): opened, not connected
    scratch = None if settings.database_url.get_secret_value() else ScratchDatabase()
    engine = create_engine(scratch.url if scratch else settings.database_url.get_secret_value())
    sessions = session_factory(engine)
    key_store = DatabaseKeyStore(sessions, settings.key_cache_s)
    auditor = Auditor(metrics.audit_events, sessions)
    limits = limiter or Limiter(settings, on_redis_failure=metrics.redis_failures.inc)
    ledger = DailyLedger(sessions)
    limits.keep_daily(ledger)
    state = GatewayState(
        settings=settings,
        upstream=up,
        limiter=limits,
        catalog=Catalog(partial(up.list_collections, counts=False), settings.collection_cache_s),
        auth=Authenticator(settings, key_store, auditor),
        metrics=metrics,
        sessions=sessions,
        conversations=ConversationStore(sessions, settings.conversation_retention_days),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await prepare(engine, MIGRATIONS, migrate=settings.migrate_on_start)
        await up.start()
        await limits.start()
        ledger.start(limits)
        auditor.start()
        try:
            yield
        finally:
            await ledger.stop()
            await limits.stop()
            await up.stop()
            await auditor.stop()
            await key_store.close()
            await engine.dispose()
            if scratch is not None:
                scratch.remove()

    app = GatewayApp(
        title="Groundwire",
        version=VERSION,
        summary="Grounded, cited answers and ranked search over your documents.",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served below from local assets, not a CDN
        redoc_url=None,
    )
    app.state.gateway = state

    @app.exception_handler(GroundwireError)
    async def _groundwire_error(request: Request, error: GroundwireError) -> JSONResponse:
        route = route_label(request.scope)
        metrics.errors.labels(route, error.code).inc()
        if isinstance(error, LIMIT_REJECTIONS):
            metrics.rejections.labels(error.code).inc()
        if error.code in ("unauthenticated", "permission_denied"):  # the audit trail
            state.auth.audit.denied(getattr(request.state, "principal", None), route, error.code)
        if error.code in ("unavailable", "deadline_exceeded", "backend_failure"):
            log.warning(
                "%s %s -> %s (%s)",
                request.method,
                logged_path(request.scope),
                error.code,
                error.dependency or "-",
            )
        return error_response(error)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        metrics.errors.labels(route_label(request.scope), "invalid_input").inc()
        details = _validation_details(error)
        first = details[0] if details else {"loc": [], "message": "invalid request"}
        where = ".".join(p for p in first["loc"] if p != "body") or "body"
        return JSONResponse(
            error_body("invalid_input", f"{where}: {first['message']}", details=details),
            status_code=422,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> JSONResponse:
        status, message = error.status_code, str(error.detail)
        headers = dict(getattr(error, "headers", None) or {})
        if status == 400:  # a body that is not even decodable: invalid input like the rest
            status, message = 422, f"body: {message}"
        if status == 405:
            headers["Allow"] = ", ".join(_allowed_methods(request.app, request.scope))
        code = FRAMEWORK_CODES.get(status, "invalid_input" if status == 422 else "http_error")
        metrics.errors.labels(route_label(request.scope), code).inc()
        return JSONResponse(error_body(code, message), status_code=status, headers=headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        metrics.errors.labels(route_label(request.scope), "internal").inc()
        log.exception("unhandled error on %s %s", request.method, logged_path(request.scope))
        return JSONResponse(error_body("internal", "internal error"), status_code=500)

    app.include_router(chat.router(state))
    app.include_router(completions.router(state))
    app.include_router(conversations.router(state))
    app.include_router(search.router(state))
    app.include_router(document_view.router(state))
    app.include_router(admin.router(state))
    app.include_router(keys.router(state))
    app.include_router(sync.router(state))
    app.include_router(jobs.router(state))
    app.include_router(system.router(state))
    mcp.mount(app, state)
    app.mount("/static", StaticFiles(directory=system.WEB_DIR), name="static")
    _add_docs(app)
    app.add_middleware(RequestContextMiddleware, settings=settings, metrics=metrics, limiter=limits)
    return app


def _add_docs(app: FastAPI) -> None:
    """Swagger UI at /docs and ReDoc at /redoc, their scripts and styles served from
    this gateway (FastAPI's own pages load them from a CDN: blank offline)."""
    app.mount(DOCS_ASSETS_URL, StaticFiles(directory=DOCS_ASSETS), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{DOCS_ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS_ASSETS_URL}/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{DOCS_ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{DOCS_ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )
