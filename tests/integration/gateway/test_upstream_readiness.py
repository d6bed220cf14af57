"""/v1/health asks each gRPC upstream for its own service's health name (its
readiness), not the process-wide one: a retriever whose Qdrant is away says
NOT_SERVING there while its "" stays SERVING."""

from __future__ import annotations

from typing import Any

import httpx
from grpc_health.v1 import health_pb2

RETRIEVER = "groundwire.retriever.v1.RetrieverService"


def test_a_retriever_that_is_not_ready_makes_the_gateway_down(
    gateways: Any, fake_upstream: Any, redis_server: Any
) -> None:
    # no health cache: each call below must see the change made just before it
    (gw,) = gateways.start(**fake_upstream.env(), REDIS_URL=redis_server.url, HEALTH_CACHE_S="0")
    assert httpx.get(f"{gw.url}/v1/health", timeout=10).json()["status"] == "ok"
    fake_upstream.health.set(RETRIEVER, health_pb2.HealthCheckResponse.NOT_SERVING)
    try:
        reply = httpx.get(f"{gw.url}/v1/health", timeout=10)
        body = reply.json()
        assert reply.status_code == 503 and body["status"] == "down"
        assert body["dependencies"]["retriever"]["status"] == "not_serving"
        assert body["dependencies"]["orchestrator"]["status"] == "serving"
    finally:
        fake_upstream.health.set(RETRIEVER, health_pb2.HealthCheckResponse.SERVING)
    assert httpx.get(f"{gw.url}/v1/health", timeout=10).json()["status"] == "ok"
