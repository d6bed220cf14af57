"""The Lua scripts on a real redis-server give the same decisions as the in-process
counters (congruence, as qdrant-client checks its local mode against the server),
take their clock from Redis, and expire leases on their own."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import BlockingConnectionPool, Redis

from groundwire_gateway.limits import Ask, LocalCounters, RedisCounters


@pytest.fixture
async def store(redis_server: Any) -> AsyncIterator[RedisCounters]:
    pool = BlockingConnectionPool.from_url(redis_server.url, max_connections=8, timeout=2)
    client = Redis(connection_pool=pool)
    try:
        yield RedisCounters(client, "test")
    finally:
        await client.aclose(close_connection_pool=True)


def _ask(client: str = "ip:a", tenant: str = "t", **limits: Any) -> Ask:
    limits = {"rate": 0, "quota": 0, **limits}
    return Ask(client=client, tenant=tenant, kind="chat", window_s=60.0, **limits)


SCENARIO: list[tuple[str, dict[str, Any]]] = [
    # rate 3 per client, quota 7 site-wide, 100 tokens per tenant, 2 slots
    *[("admit", {"client": "ip:a", "rate": 3, "quota": 7}) for _ in range(5)],
    *[("admit", {"client": "ip:b", "rate": 3, "quota": 7}) for _ in range(2)],
    ("admit", {"client": "ip:c", "rate": 3, "quota": 7, "tokens": 60, "budget": 100}),
    ("admit", {"client": "ip:d", "rate": 3, "quota": 7, "tokens": 60, "budget": 100}),
    (
        "admit",
        {"client": "ip:d", "tenant": "u", "rate": 3, "quota": 7, "tokens": 60, "budget": 100},
    ),
    ("admit", {"client": "ip:e", "rate": 3, "quota": 7}),
    ("admit", {"client": "ip:f", "rate": 3, "quota": 7}),
    ("admit", {"client": "ip:g", "rate": 3, "quota": 7}),
    ("admit", {"client": "ip:h", "slots": 2, "lease_ttl_s": 30, "member": "m1"}),
    ("admit", {"client": "ip:h", "slots": 2, "lease_ttl_s": 30, "member": "m2"}),
    ("admit", {"client": "ip:h", "slots": 2, "lease_ttl_s": 30, "member": "m3"}),
    ("release", {"member": "m1"}),
    ("admit", {"client": "ip:h", "slots": 2, "lease_ttl_s": 30, "member": "m4"}),
    ("charge", {"tenant": "u", "tokens": 30}),
    ("admit", {"client": "ip:i", "tenant": "u", "tokens": 20, "budget": 100}),
    ("admit", {"client": "ip:i", "tenant": "u", "tokens": 1, "budget": 100}),
]


async def _play(counters: Any) -> list[tuple[bool, str]]:
    out = []
    for op, args in SCENARIO:
        if op == "admit":
            verdict = await counters.admit(_ask(**args))
            out.append((verdict.admitted, verdict.reason))
        elif op == "release":
            await counters.release(args["member"])
        else:
            await counters.charge(args["tenant"], args["tokens"])
    return out


async def test_redis_scripts_decide_like_the_in_process_counters(store: RedisCounters) -> None:
    local = await _play(LocalCounters())
    remote = await _play(store)
    assert remote == local
    # and the scenario exercises every outcome
    assert {reason for _, reason in local} == {
        "ok",
        "rate_limited",
        "quota_exceeded",
        "token_budget_exceeded",
        "too_many_inflight",
    }


async def test_retry_after_comes_from_redis_time(store: RedisCounters) -> None:
    for _ in range(2):
        assert (await store.admit(_ask(rate=2))).admitted
    started = time.time()
    await asyncio.sleep(0.3)
    refused = await store.admit(_ask(rate=2))
    assert refused.reason == "rate_limited"
    assert 59.0 <= refused.retry_after_s + (time.time() - started) <= 60.5
    quota = await store.admit(_ask(client="ip:z", quota=2))
    assert quota.admitted
    assert (await store.admit(_ask(client="ip:y", quota=2))).admitted
    before = 86_400 - time.time() % 86_400  # seconds to midnight UTC, read around the call
    over = await store.admit(_ask(client="ip:x", quota=2))
    after = 86_400 - time.time() % 86_400
    assert over.reason == "quota_exceeded"
    # the quota resets at midnight UTC, not in a minute or a day: the retry is bracketed
    # by the clock read before and after the refusal (whole seconds), however long it took
    assert after - 1 <= over.retry_after_s <= before + 1


async def test_leases_of_a_dead_replica_expire(store: RedisCounters) -> None:
    assert (await store.admit(_ask(slots=1, lease_ttl_s=0.3))).admitted
    assert (await store.admit(_ask(slots=1, lease_ttl_s=0.3))).reason == "too_many_inflight"
    await asyncio.sleep(0.4)  # never released: the holder "died"
    assert (await store.admit(_ask(slots=1, lease_ttl_s=0.3))).admitted


async def test_concurrent_admissions_are_atomic(store: RedisCounters) -> None:
    verdicts = await asyncio.gather(*(store.admit(_ask(rate=25, quota=30)) for _ in range(100)))
    assert sum(v.admitted for v in verdicts) == 25
