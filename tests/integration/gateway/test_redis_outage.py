"""Acceptance: Redis stopped mid-run. One gateway runs policy ``open`` (keeps serving
with per-replica limits, health degraded), one ``closed`` (503 naming redis, health
down); neither ever answers 500; both recover when Redis is back."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import httpx

CHAT = {"messages": [{"role": "user", "content": "how do I install it"}]}
LIMIT = 5


def _traffic(url: str) -> list[httpx.Response]:
    """One request to every kind of route."""
    with httpx.Client(base_url=url, timeout=10) as client:
        return [
            client.post("/v1/search", json={"query": "install"}),
            client.post("/v1/chat", json=CHAT),
            client.post("/v1/chat/completions", json={"model": "groundwire", **CHAT}),
            client.get("/v1/models"),
            client.get("/v1/health"),
            client.get("/healthz"),
            client.get("/metrics"),
        ]


def _health(url: str) -> tuple[int, dict[str, Any]]:
    reply = httpx.get(f"{url}/v1/health", timeout=10)
    return reply.status_code, reply.json()


def test_redis_outage_follows_the_configured_policy(
    gateways: Any, fake_upstream: Any, redis_server: Any, read_metric: Any
) -> None:
    common = {
        **fake_upstream.env(),
        "REDIS_URL": redis_server.url,
        "SEARCH_RATE_LIMIT_PER_MIN": str(LIMIT),
        "RATE_LIMIT_PER_MIN": "100",
        "REDIS_RETRY_S": "0.5",
        "HEALTH_CACHE_S": "0",  # each health call looks again (no 1 s staleness)
    }
    (open_gw,) = gateways.start(**common, REDIS_FAILURE_POLICY="open")
    (closed_gw,) = gateways.start(**common, REDIS_FAILURE_POLICY="closed")
    for gw in (open_gw, closed_gw):
        status, body = _health(gw.url)
        assert status == 200 and body["status"] == "ok"
        assert body["dependencies"]["redis"]["status"] == "serving"
        assert body["limits"]["state"] == "ok"
        assert httpx.post(f"{gw.url}/v1/search", json={"query": "q"}).status_code == 200

    # Redis goes away while requests are in flight.
    seen: list[int] = []
    stop = threading.Event()

    def hammer(url: str) -> None:
        with httpx.Client(base_url=url, timeout=10) as client:
            while not stop.is_set():
                seen.append(client.post("/v1/chat", json=CHAT).status_code)
                seen.append(client.get("/v1/health").status_code)

    threads = [threading.Thread(target=hammer, args=(gw.url,)) for gw in (open_gw, closed_gw)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    redis_server.stop()
    time.sleep(0.6)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert not [s for s in seen if s >= 500 and s != 503], Counter(seen)
    assert 200 in seen and 503 in seen, Counter(seen)  # before, and the closed one after

    # policy open: serving, limits still enforced (in process, per replica), loud health
    status, body = _health(open_gw.url)
    assert status == 200 and body["status"] == "degraded"
    assert body["dependencies"]["redis"]["status"] == "not_serving"
    assert body["limits"]["state"] == "fail_open"
    assert "REDIS DOWN" in body["limits"]["message"]
    codes = [
        httpx.post(f"{open_gw.url}/v1/search", json={"query": "q"}).status_code
        for _ in range(LIMIT + 1)
    ]
    assert codes == [200] * LIMIT + [429]
    assert read_metric(open_gw.url, "groundwire_gateway_redis_failures_total") >= 1

    # policy closed: 503 naming redis, health down
    refused = httpx.post(f"{closed_gw.url}/v1/search", json={"query": "q"})
    assert refused.status_code == 503
    assert refused.json()["error"]["dependency"] == "redis"
    status, body = _health(closed_gw.url)
    assert status == 503 and body["status"] == "down"
    assert body["limits"]["state"] == "fail_closed"

    # nothing anywhere answers 500 while Redis is down
    for gw in (open_gw, closed_gw):
        for reply in _traffic(gw.url):
            assert reply.status_code < 500 or reply.status_code == 503, (
                reply.request.url,
                reply.status_code,
                reply.text,
            )
            assert "Traceback" not in reply.text

    # Redis is back (empty: it kept nothing): both recover on their own
    redis_server.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if httpx.post(f"{closed_gw.url}/v1/search", json={"query": "q"}).status_code == 200:
            break
        time.sleep(0.2)
    for gw in (open_gw, closed_gw):
        status, body = _health(gw.url)
        assert status == 200 and body["limits"]["state"] == "ok", body
