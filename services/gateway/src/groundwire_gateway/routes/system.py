"""Health, metrics and the web page."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from fastapi import APIRouter, Response
from fastapi.responses import FileResponse, JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from groundwire_gateway import models
from groundwire_gateway.state import GatewayState

WEB_DIR = Path(__file__).resolve().parent.parent / "web"
REQUIRED = ("orchestrator", "retriever", "embedder")
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


def router(state: GatewayState) -> APIRouter:
    api = APIRouter()
    settings = state.settings
    limiter = state.limiter

    @api.get("/healthz", summary="Liveness of the gateway process itself.")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @api.get(
        "/v1/health",
        response_model=models.HealthResponse,
        responses={503: {"model": models.HealthResponse, "description": "Down."}},
        summary="Health of the gateway and of each dependency, Redis included.",
    )
    async def health() -> JSONResponse:
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
        body = models.HealthResponse(status=status, dependencies=deps, limits=limits)
        return JSONResponse(body.model_dump(), status_code=503 if status == "down" else 200)

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
