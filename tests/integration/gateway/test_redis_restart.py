"""Acceptance: Redis restarted (same port, empty) under two gateway processes with
policy ``open``. Within 2 s of Redis answering again, bursts of 100 requests against
a limit of 30 admit exactly 30: the replicas are back on the shared counters by
themselves, whether their pooled connections went stale in a quick restart or the
replicas ran on local counters during a longer outage. While Redis is down every
response says so (``x-ratelimit-mode: local`` and a ``limits`` stage)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import httpx

LIMIT = 30
BURST = 100
RECOVERY_S = 2.0
KEYS = [f"burst-key-{n}-0123456789" for n in range(6)]


async def _burst(urls: list[str], key: str) -> list[httpx.Response]:
    """BURST concurrent searches with one API key (one rate window), alternating
    between the replicas."""
    limits = httpx.Limits(max_connections=BURST, max_keepalive_connections=BURST)
    headers = {"authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(limits=limits, timeout=30, headers=headers) as client:
        start = asyncio.Event()

        async def one(i: int) -> httpx.Response:
            await start.wait()
            return await client.post(f"{urls[i % len(urls)]}/v1/search", json={"query": f"q{i}"})

        tasks = [asyncio.create_task(one(i)) for i in range(BURST)]
        await asyncio.sleep(0)
        start.set()
        return await asyncio.gather(*tasks)


def _admitted_exactly_the_limit(urls: list[str], key: str) -> None:
    responses = asyncio.run(_burst(urls, key))
    statuses = Counter(r.status_code for r in responses)
    assert statuses == {200: LIMIT, 429: BURST - LIMIT}, statuses
    assert {r.headers["x-ratelimit-mode"] for r in responses} == {"shared"}
    for r in responses:
        if r.status_code == 200:
            assert "limits" not in [s["name"] for s in r.json()["stages"]]


def _wait_for_recovery(redis_server: Any) -> None:
    """Starts Redis again and returns RECOVERY_S after it first answers PING."""
    redis_server.start()  # returns once PING answers
    answered = time.monotonic()
    time.sleep(max(0.0, answered + RECOVERY_S - time.monotonic()))


def test_limits_are_shared_again_within_two_seconds_of_a_redis_restart(
    gateways: Any, fake_upstream: Any, redis_server: Any
) -> None:
    replicas = gateways.start(
        2,
        **fake_upstream.env(),
        REDIS_URL=redis_server.url,
        REDIS_FAILURE_POLICY="open",
        SEARCH_RATE_LIMIT_PER_MIN=str(LIMIT),
        API_KEYS=",".join(f"t{n}:{key}" for n, key in enumerate(KEYS)),
        DAILY_QUOTA="0",
        TOKEN_BUDGET_PER_DAY="0",
        REDIS_MAX_CONNECTIONS="16",
    )
    urls = [r.url for r in replicas]
    _admitted_exactly_the_limit(urls, KEYS[0])  # the pools hold open connections now

    # 1. A quick restart with no traffic meanwhile: every pooled connection is stale.
    redis_server.stop()
    _wait_for_recovery(redis_server)
    _admitted_exactly_the_limit(urls, KEYS[1])

    # 2. A longer outage with traffic: the replicas count alone (fail open), and say so.
    redis_server.stop()
    responses = asyncio.run(_burst(urls, KEYS[2]))
    statuses = Counter(r.status_code for r in responses)
    assert statuses == {200: 2 * LIMIT, 429: BURST - 2 * LIMIT}, statuses  # per replica
    assert {r.headers["x-ratelimit-mode"] for r in responses} == {"local"}
    # an admitted search reports it in its stages too (a refused one is an error body)
    admitted = next(r for r in responses if r.status_code == 200)
    limits = next(s for s in admitted.json()["stages"] if s["name"] == "limits")
    assert limits["fallback"] and limits["dependency"] == "redis"
    _wait_for_recovery(redis_server)
    for key in KEYS[3:5]:
        _admitted_exactly_the_limit(urls, key)
    for url in urls:
        health = httpx.get(f"{url}/v1/health", timeout=10).json()
        assert health["limits"]["state"] == "ok"
