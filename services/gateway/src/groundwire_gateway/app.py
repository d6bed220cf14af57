"""The gateway's ASGI app: routes, validation at the edge, errors mapped once."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from opentelemetry import trace
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from groundwire_core.context import REQUEST_ID_HEADER, current_request_id, request_scope
from groundwire_core.errors import GroundwireError
from groundwire_gateway import models
from groundwire_gateway.errors import error_body, error_response
from groundwire_gateway.settings import GatewaySettings
from groundwire_gateway.upstream import Upstream

log = logging.getLogger("groundwire.gateway")
tracer = trace.get_tracer("groundwire.gateway")

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": models.ErrorResponse} for code in (404, 413, 422, 429, 500, 502, 503, 504)
}


class RequestContextMiddleware:
    """Per request: a request id (the caller's or a new one), the deadline, a span,
    and the body size limit — before any route runs."""

    def __init__(self, app: ASGIApp, settings: GatewaySettings) -> None:
        self._app = app
        self._settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        incoming = headers.get(REQUEST_ID_HEADER, "")
        rid = incoming if 0 < len(incoming) <= 64 and incoming.isprintable() else None
        with request_scope(rid, self._settings.request_timeout_s) as request_id:
            status = 0

            async def send_with_id(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                    message.setdefault("headers", [])
                    message["headers"].append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                await send(message)

            limit = self._settings.max_body_bytes
            length = headers.get("content-length", "0")
            if length.isdigit() and int(length) > limit:
                response = JSONResponse(
                    error_body(
                        "payload_too_large", f"the body has {length} bytes; the limit is {limit}"
                    ),
                    status_code=413,
                )
                await response(scope, receive, send_with_id)
                return
            received = 0

            async def limited_receive() -> Message:
                # a chunked body has no content-length: count what actually arrives
                nonlocal received
                message = await receive()
                if message["type"] == "http.request":
                    received += len(message.get("body", b""))
                    if received > limit:
                        raise StarletteHTTPException(
                            413, f"the body exceeds the limit of {limit} bytes"
                        )
                return message

            name = f"{scope.get('method', '')} {scope.get('path', '')}"
            started = time.perf_counter()
            with tracer.start_as_current_span(name, kind=trace.SpanKind.SERVER) as span:
                span.set_attribute("groundwire.request_id", request_id)
                try:
                    await self._app(scope, limited_receive, send_with_id)
                except Exception:
                    # Here, not in Starlette's outermost handler, so that the 500 still
                    # carries the request id; the traceback goes to the log only.
                    log.exception("unhandled error on %s", name)
                    if status == 0:
                        response = JSONResponse(
                            error_body("internal", "internal error"), status_code=500
                        )
                        await response(scope, receive, send_with_id)
                finally:
                    span.set_attribute("http.response.status_code", status)
                    log.info("%s %d %.1fms", name, status, (time.perf_counter() - started) * 1e3)


def _validation_details(error: RequestValidationError) -> list[dict[str, Any]]:
    # Only where and what: never echo the input back (it may be 100 KB).
    return [
        {"loc": [str(p) for p in e.get("loc", ())], "message": e.get("msg", "invalid")}
        for e in error.errors()
    ]


def create_app(settings: GatewaySettings, upstream: Upstream | None = None) -> FastAPI:
    """The gateway app; ``upstream`` is injectable for tests of the HTTP layer."""
    up = upstream or Upstream(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await up.start()
        try:
            yield
        finally:
            await up.stop()

    app = FastAPI(
        title="Groundwire",
        version="0.1.0",
        summary="Grounded, cited answers and ranked search over your documents.",
        lifespan=lifespan,
    )

    @app.exception_handler(GroundwireError)
    async def _groundwire_error(request: Request, error: GroundwireError) -> JSONResponse:
        if error.code in ("unavailable", "deadline_exceeded", "backend_failure"):
            log.warning(
                "%s %s -> %s (%s)",
                request.method,
                request.url.path,
                error.code,
                error.dependency or "-",
            )
        return error_response(error)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        details = _validation_details(error)
        first = details[0] if details else {"loc": [], "message": "invalid request"}
        where = ".".join(p for p in first["loc"] if p != "body") or "body"
        return JSONResponse(
            error_body("invalid_input", f"{where}: {first['message']}", details=details),
            status_code=422,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(
            error.status_code, "http_error"
        )
        return JSONResponse(
            error_body(code, str(error.detail)),
            status_code=error.status_code,
            headers=getattr(error, "headers", None),
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return JSONResponse(error_body("internal", "internal error"), status_code=500)

    @app.post(
        "/v1/search",
        response_model=models.SearchResponse,
        responses=ERROR_RESPONSES,
        summary="Ranked search results with sources, scores and a stage report.",
    )
    async def search(body: models.SearchBody) -> models.SearchResponse:
        collection = body.collection or settings.default_collection
        results, stages = await up.search(body, collection)
        return models.SearchResponse(
            collection=collection,
            results=results,
            stages=stages,
            request_id=current_request_id(),
        )

    @app.get("/healthz", summary="Liveness of the gateway process itself.")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(
        "/v1/health",
        response_model=models.HealthResponse,
        responses={503: {"model": models.HealthResponse}},
        summary="Health of the gateway and of each dependency.",
    )
    async def health() -> JSONResponse:
        deps = await up.health()
        required = ("orchestrator", "retriever", "embedder")
        if any(deps.get(n) is None or deps[n].status != "serving" for n in required):
            status = "down"
        elif any(d.status == "not_serving" for d in deps.values()):
            status = "degraded"
        else:
            status = "ok"
        body = models.HealthResponse(status=status, dependencies=deps)
        return JSONResponse(body.model_dump(), status_code=503 if status == "down" else 200)

    app.add_middleware(RequestContextMiddleware, settings=settings)
    return app
