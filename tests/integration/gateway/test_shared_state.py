"""Acceptance (#29 line 1 and 3 for keys, #31 defects 16 and 22): TWO gateway processes
share one system of record (a real PostgreSQL, then one SQLite file) and one real
redis-server (no persistence, as the manifests used to run it).

- a key created through gateway A works on gateway B;
- Redis is stopped and restarted: every key still works on both, and the tenant's
  daily quota is not reset (the gateways seed Redis back from the database);
- a key revoked through A is refused by A at once and by B within ``key_cache_s``
  (polled with a generous timeout; the measured delay is printed);
- the key creations and the revocation are audit rows in the database."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis
from sqlalchemy import text

from groundwire_core.database import create_engine, session_factory
from groundwire_gateway.db import counters
from tests.integration.gateway.conftest import GatewayProcess, Gateways
from tests.redis_server import RedisServer

OPERATOR = "operator-key-0123456789"
QUOTA = 10  # searches per tenant per UTC day
KEY_CACHE_S = 2.0
SEEDED = "gw:{limits}:seeded"
POLL_S = 0.05
GENEROUS_S = 60.0


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def search(url: str, key: str) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/search", json={"query": "how to install"}, headers=bearer(key), timeout=30
    )


def models_status(url: str, key: str) -> int:
    """A route that needs a valid key and spends no quota."""
    return httpx.get(f"{url}/v1/models", headers=bearer(key), timeout=30).status_code


def sql(url: str, query: str) -> list[Any]:
    async def run() -> list[Any]:
        engine = create_engine(url)
        try:
            async with engine.connect() as conn:
                return list(await conn.execute(text(query)))
        finally:
            await engine.dispose()

    return asyncio.run(run())


def quota_row(url: str) -> tuple[int, int]:
    """(requests, tokens) of tenant acme today in the system of record."""
    day = int(time.time() // 86_400)

    async def run() -> dict[counters.CounterKey, int]:
        engine = create_engine(url)
        try:
            async with session_factory(engine)() as session:
                found: dict[counters.CounterKey, int] = await counters.counts(session, day)
                return found
        finally:
            await engine.dispose()

    found = asyncio.run(run())
    return found.get(("quota", "tenant:acme"), 0), found.get(("tokens", "acme"), 0)


def wait_for(check: Any, what: str, timeout_s: float = GENEROUS_S) -> float:
    """Polls ``check`` until true; the seconds it took. Fails after ``timeout_s``."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout_s, f"not within {timeout_s} s: {what}"
        time.sleep(POLL_S)
    return time.monotonic() - started


@pytest.fixture
def two_gateways(
    gateways: Gateways, fake_upstream: Any, redis_server: RedisServer, database_url: str
) -> Iterator[list[GatewayProcess]]:
    settings = {
        **fake_upstream.env(),
        "REDIS_URL": redis_server.url,
        "DATABASE_URL": database_url,
        "ADMIN_API_KEYS": f"ops:{OPERATOR}",
        "DAILY_QUOTA": str(QUOTA),
        "SEARCH_RATE_LIMIT_PER_MIN": "0",
        "KEY_CACHE_S": str(KEY_CACHE_S),
    }
    # one after the other: two processes migrating one SQLite file at once race
    # (PostgreSQL's upgrade takes an advisory lock; see the report)
    started = gateways.start(1, **settings) + gateways.start(1, **settings)
    try:
        yield started
    finally:
        for gateway in started:
            gateway.process.send_signal(signal.SIGTERM)
        for gateway in started:
            try:
                gateway.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                gateway.process.kill()
                gateway.process.wait()


def test_keys_quotas_and_revocation_are_shared_and_outlive_redis(
    two_gateways: list[GatewayProcess], redis_server: RedisServer, database_url: str
) -> None:
    a, b = two_gateways
    made = []
    for role in ("write", "read"):
        created = httpx.post(
            f"{a.url}/v1/admin/keys",
            json={"tenant": "acme", "role": role, "name": f"{role} key"},
            headers=bearer(OPERATOR),
            timeout=30,
        )
        assert created.status_code == 201, created.text
        made.append(created.json())
    writer, reader = made[0]["key"], made[1]["key"]

    # created through A, working on B (and A) at once
    for url in (b.url, a.url):
        for key in (writer, reader):
            assert search(url, key).status_code == 200
    listed = httpx.get(f"{b.url}/v1/admin/keys", headers=bearer(OPERATOR), timeout=30).json()
    assert {k["key_id"] for k in listed["keys"]} == {m["key_id"] for m in made}

    # the four searches reach the system of record (each replica writes every second)
    wait_for(lambda: quota_row(database_url)[0] == 4, "4 searches counted in the database")
    tokens_before = quota_row(database_url)[1]
    assert tokens_before > 0

    # Redis restarts empty (no persistence): the gateways seed it back from the database
    redis_server.stop()
    redis_server.start()
    r = redis.Redis.from_url(redis_server.url)
    try:
        wait_for(lambda: bool(r.exists(SEEDED)), "Redis seeded again")
        assert int(r.hget("gw:{limits}:quota:tenant:acme", "used") or 0) == 4
        assert int(r.hget("gw:{limits}:tokens:acme", "used") or 0) >= tokens_before
    finally:
        r.close()
    for url in (a.url, b.url):  # every key still works on both: 4 more searches
        for key in (writer, reader):
            reply = search(url, key)
            assert reply.status_code == 200, reply.text
    # the quota was not reset: 2 more of 10 are admitted, then quota_exceeded
    statuses = [search((a.url, b.url)[i % 2], writer).status_code for i in range(5)]
    assert statuses == [200, 200, 429, 429, 429], statuses
    refused = search(b.url, reader)
    assert refused.json()["error"]["code"] == "quota_exceeded"

    # revoked through A: refused by A at once, by B within key_cache_s
    assert models_status(b.url, reader) == 200  # B has it cached now
    gone = httpx.delete(
        f"{a.url}/v1/admin/keys/{made[1]['key_id']}", headers=bearer(OPERATOR), timeout=30
    )
    assert gone.status_code == 204
    revoked_at = time.monotonic()
    assert models_status(a.url, reader) == 401
    wait_for(lambda: models_status(b.url, reader) == 401, "B refuses the revoked key")
    delay = time.monotonic() - revoked_at
    print(f"\nrevoked on A, refused by B after {delay:.2f} s (bound: key_cache_s={KEY_CACHE_S})")
    assert models_status(b.url, writer) == 200, "the other key still works"

    # the admin actions are rows of the audit trail
    def audited() -> set[str]:
        rows = sql(database_url, "SELECT event, outcome FROM gateway_audit_events")
        return {f"{event}:{outcome}" for event, outcome in rows}

    wait_for(lambda: {"key.create:ok", "key.revoke:ok"} <= audited(), "audit rows")
    tenants = sql(database_url, "SELECT name FROM gateway_tenants")
    assert [t[0] for t in tenants] == ["acme"]
