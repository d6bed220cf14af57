"""Acceptance: 200 concurrent requests from one client against a limit of 50, spread
over TWO gateway processes sharing one real Redis: exactly 50 admitted, the other
150 refused with 429 and Retry-After; the daily quotas (one bucket for callers
without a key, one per tenant) count only the admitted."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httpx
import redis

LIMIT = 50
BURST = 200
QUOTA = 60  # anonymous callers, together
TENANT_QUOTA = 20
SECOND_CLIENT_KEY = "second-client-key-42"


async def _burst(urls: list[str]) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=BURST, max_keepalive_connections=BURST)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        start = asyncio.Event()

        async def one(i: int) -> httpx.Response:
            await start.wait()
            return await client.post(
                f"{urls[i % len(urls)]}/v1/search", json={"query": f"question {i}"}
            )

        tasks = [asyncio.create_task(one(i)) for i in range(BURST)]
        await asyncio.sleep(0)
        start.set()
        return await asyncio.gather(*tasks)


def test_two_replicas_admit_exactly_the_limit(
    gateways: Any, fake_upstream: Any, redis_server: Any, read_metric: Any
) -> None:
    replicas = gateways.start(
        2,
        **fake_upstream.env(),
        REDIS_URL=redis_server.url,
        SEARCH_RATE_LIMIT_PER_MIN=str(LIMIT),
        ANONYMOUS_DAILY_QUOTA=str(QUOTA),
        DAILY_QUOTA=str(TENANT_QUOTA),
        API_KEYS=f"second:{SECOND_CLIENT_KEY}",
        REDIS_MAX_CONNECTIONS="16",
    )
    urls = [r.url for r in replicas]
    searches_before = fake_upstream.orchestrator.searches

    responses = asyncio.run(_burst(urls))

    statuses = Counter(r.status_code for r in responses)
    assert statuses == {200: LIMIT, 429: BURST - LIMIT}, statuses
    for r in responses:
        if r.status_code == 429:
            assert r.json()["error"]["code"] == "rate_limited"
            assert 1 <= int(r.headers["retry-after"]) <= 60
    assert fake_upstream.orchestrator.searches - searches_before == LIMIT
    # both replicas answered requests; the refusals are in their metrics
    served = Counter(str(r.request.url).rsplit("/v1/", 1)[0] for r in responses)
    assert served == {urls[0]: BURST // 2, urls[1]: BURST // 2}
    rejected = sum(
        read_metric(u, "groundwire_gateway_limit_rejections_total", reason="rate_limited")
        for u in urls
    )
    assert rejected == BURST - LIMIT

    # The anonymous bucket spent only the admitted requests (Redis's own counter) ...
    store = redis.Redis.from_url(redis_server.url)
    assert int(store.hget("gw:{limits}:quota:anonymous", "used") or 0) == LIMIT
    # ... and a tenant (an API key: its own rate window) has a quota of its own.
    headers = {"authorization": f"Bearer {SECOND_CLIENT_KEY}"}
    codes = []
    for i in range(TENANT_QUOTA + 3):
        reply = httpx.post(
            f"{urls[i % 2]}/v1/search", json={"query": "more"}, headers=headers, timeout=10
        )
        codes.append((reply.status_code, reply.json().get("error", {}).get("code")))
    assert codes[:TENANT_QUOTA] == [(200, None)] * TENANT_QUOTA
    assert codes[TENANT_QUOTA:] == [(429, "quota_exceeded")] * 3
    assert int(store.hget("gw:{limits}:quota:tenant:second", "used") or 0) == TENANT_QUOTA
    assert int(store.hget("gw:{limits}:quota:anonymous", "used") or 0) == LIMIT
    store.close()
