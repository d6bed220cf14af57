"""Health, metrics and the web page."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import urlsplit

from fastapi import APIRouter, Request, Response
from fastapi.responses import FileResponse, JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from groundwire_core.errors import GroundwireError
from groundwire_gateway import models
from groundwire_gateway.auth import presented_key
from groundwire_gateway.routes.security import client_ip
from groundwire_gateway.state import GatewayState

WEB_DIR = Path(__file__).resolve().parent.parent / "web"
# Without these nothing is answered (health "down", 503). The embedder is not among
# them: search and chat fall back to BM25 without it (health "degraded"); only ingest
# and the dense and sparse paths need it.
REQUIRED = ("orchestrator", "retriever")
# The page loads nothing but its own files and talks only to this gateway.
PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _redis_target(url: str) -> str:
    """host:port of a Redis URL, never its password."""
    parts = urlsplit(url)
    return f"{parts.hostname or ''}:{parts.port or 6379}"


class HealthCache:
    """The last health result, fresh for ``ttl_s``; concurrent callers of a stale
    cache share one computation (single flight), so a burst of health calls makes at
    most one round of dependency checks."""

    def __init__(
        self,
        compute: Callable[[], Awaitable[models.HealthResponse]],
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._compute = compute
        self._ttl = ttl_s
        self._clock = clock
        self._result: tuple[float, models.HealthResponse] | None = None
        self._inflight: asyncio.Future[models.HealthResponse] | None = None

    async def get(self) -> models.HealthResponse:
        result = self._result
        if result is not None and self._clock() - result[0] < self._ttl:
            return result[1]
        if self._inflight is None:
            self._inflight = asyncio.ensure_future(self._run())
        # shielded: a caller that goes away does not cancel the others' result
        return await asyncio.shield(self._inflight)

    async def _run(self) -> models.HealthResponse:
        try:
            body = await self._compute()
            self._result = (self._clock(), body)
            return body
        finally:
            self._inflight = None


def public_view(body: models.HealthResponse) -> models.HealthResponse:
    """Health without the internal details (addresses, error texts) that only an
    admin key may see: each dependency keeps its status and latency."""
    return models.HealthResponse(
        status=body.status,
        dependencies={
            name: models.DependencyOut(status=d.status, latency_ms=d.latency_ms)
            for name, d in body.dependencies.items()
        },
        limits=body.limits,
    )


async def _is_operator(state: GatewayState, request: Request) -> bool:
    """Whether the request carries one of the operator's admin keys. Any other key —
    a tenant's admin key included: the addresses and the data path are the
    operator's — or none gets the public view (health must answer probes that carry
    no key)."""
    key = presented_key(request.headers.get("authorization"), request.headers.get("x-api-key"))
    if key is None:
        return False
    try:
        principal = await state.auth.admin(key, client_ip(request))
    except GroundwireError:
        return False
    return principal.operator


def router(state: GatewayState) -> APIRouter:
    api = APIRouter()
    settings = state.settings
    limiter = state.limiter

    @api.get("/healthz", summary="Liveness of the gateway process itself.")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    async def check() -> models.HealthResponse:
        deps = await state.upstream.health()
        policy = settings.redis_failure_policy
        if settings.redis_url:
            ok, ms, reason = await limiter.ping()
            deps["redis"] = models.DependencyOut(
                status="serving" if ok else "not_serving",
                target=_redis_target(settings.redis_url),
                latency_ms=ms,
                message=reason,
            )
            if ok:
                limits = models.LimitsOut(backend="redis", policy=policy, state="ok")
            elif policy == "open":
                limits = models.LimitsOut(
                    backend="redis",
                    policy=policy,
                    state="fail_open",
                    message="REDIS DOWN: limits run per replica in process (not shared)",
                )
            else:
                limits = models.LimitsOut(
                    backend="redis",
                    policy=policy,
                    state="fail_closed",
                    message="REDIS DOWN: chat and search answer 503 until it is back",
                )
        else:
            deps["redis"] = models.DependencyOut(
                status="disabled", message="no redis_url: limits run in process"
            )
            limits = models.LimitsOut(backend="in_process", policy=policy, state="ok")
        if limits.state == "fail_closed" or any(
            deps.get(n) is None or deps[n].status != "serving" for n in REQUIRED
        ):
            status = "down"
        elif limits.state == "fail_open" or any(d.status == "not_serving" for d in deps.values()):
            status = "degraded"
        else:
            status = "ok"
        return models.HealthResponse(status=status, dependencies=deps, limits=limits)

    cache = HealthCache(check, settings.health_cache_s)

    @api.get(
        "/v1/health",
        response_model=models.HealthResponse,
        responses={503: {"model": models.HealthResponse, "description": "Down."}},
        summary="Health of the gateway and of each dependency, Redis included; addresses "
        "and error details only with the operator's admin key. Cached briefly.",
    )
    async def health(request: Request) -> JSONResponse:
        body = await cache.get()
        if not await _is_operator(state, request):
            body = public_view(body)
        return JSONResponse(body.model_dump(), status_code=503 if body.status == "down" else 200)

    @api.get(
        "/metrics",
        response_class=Response,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
        summary="Prometheus metrics: requests, errors, latency per route, limit rejections.",
    )
    async def metrics() -> Response:
        return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @api.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(WEB_DIR / "index.html", headers=PAGE_HEADERS)

    return api
