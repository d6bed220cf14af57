"""The gateway's durable state on SQLite and a real PostgreSQL, below the HTTP layer:
daily counters outlive a restart of a gateway with in-process counters (the ledger
seeds a fresh limiter), audit events become rows (and wait out an unreachable
database), a revoked key leaves every replica's cache within ``key_cache_s``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from groundwire_core.database import create_engine, session_factory, upgrade
from groundwire_gateway.audit import Auditor
from groundwire_gateway.daily import DailyLedger
from groundwire_gateway.db import audit, counters
from groundwire_gateway.db.base import MIGRATIONS
from groundwire_gateway.errors import QuotaExceeded, TokenBudgetExceeded
from groundwire_gateway.keystore import DatabaseKeyStore, digest_of, new_key
from groundwire_gateway.limits import Limiter
from groundwire_gateway.settings import GatewaySettings

NOON = 20_000 * 86_400 + 43_200.0  # a fixed day


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    await upgrade(engine, MIGRATIONS)
    try:
        yield engine
    finally:
        await engine.dispose()


def settings() -> GatewaySettings:
    return GatewaySettings(
        daily_quota=5,
        token_budget_per_day=1_000,
        search_rate_limit_per_min=0,
        rate_limit_per_min=0,
        max_inflight_chats=0,
    )


async def started(engine: AsyncEngine) -> tuple[Limiter, DailyLedger]:
    """A gateway's limiter (in process: no Redis) and ledger, as the app starts them."""
    limiter = Limiter(settings(), clock=lambda: NOON)
    ledger = DailyLedger(session_factory(engine), clock=lambda: NOON)
    limiter.keep_daily(ledger)
    await limiter.start()
    await ledger.tick(limiter)  # the first tick seeds the in-process counters
    return limiter, ledger


async def test_daily_counts_outlive_a_gateway_restart(engine: AsyncEngine) -> None:
    limiter, ledger = await started(engine)
    for _ in range(3):
        ticket = await limiter.admit(limiter.ask_for("search", "key:acme:k1", "acme", tokens=100))
        await limiter.release(ticket, answer_tokens=200)
    await ledger.stop()  # a clean stop writes what is left
    async with session_factory(engine)() as s:
        assert await counters.counts(s, 20_000) == {
            ("quota", "tenant:acme"): 3,
            ("tokens", "acme"): 900,
        }

    # a new process: counters in memory start empty, the ledger seeds them
    limiter, ledger = await started(engine)
    ask = limiter.ask_for("search", "key:acme:k1", "acme", tokens=50)
    await limiter.admit(ask)  # 900 + 50 <= 1000
    with pytest.raises(TokenBudgetExceeded):
        await limiter.admit(limiter.ask_for("search", "key:acme:k1", "acme", tokens=60))
    await limiter.admit(limiter.ask_for("search", "key:acme:k1", "acme", tokens=0))
    with pytest.raises(QuotaExceeded):  # 3 before the restart + 2 after = 5
        await limiter.admit(limiter.ask_for("search", "key:acme:k1", "acme", tokens=0))
    await ledger.stop()
    async with session_factory(engine)() as s:
        assert (await counters.counts(s, 20_000))[("quota", "tenant:acme")] == 5


async def test_audit_events_become_rows_and_wait_for_the_database(engine: AsyncEngine) -> None:
    sessions = session_factory(engine)
    auditor = Auditor(sessions=sessions)
    auditor.record("key.create", tenant="acme", key_id="static:ab", route="/k", outcome="ok")
    auditor.start()  # events recorded before the start wait for it
    auditor.denied(None, "/v1/search", "unauthenticated")

    async def stored() -> list[audit.AuditEvent]:
        async with sessions() as s:
            return await audit.recent_events(s)

    for _ in range(400):
        if len(await stored()) == 2:
            break
        await asyncio.sleep(0.05)
    events = await stored()
    assert [(e.event, e.outcome) for e in events] == [
        ("denied", "unauthenticated"),
        ("key.create", "ok"),
    ]
    await auditor.stop()

    # a database that cannot be reached: the events wait (bounded), nothing raises
    broken = create_engine("postgresql://u:p@127.0.0.1:9/none")
    offline = Auditor(sessions=session_factory(broken), max_pending=2)
    offline.start()
    for n in range(3):
        offline.record("key.list", tenant="acme", key_id=None, route="/k", outcome=str(n))
    assert await offline.flush() is False
    await offline.stop()
    await broken.dispose()


async def test_a_revoked_key_leaves_every_replica_within_the_cache_time(
    engine: AsyncEngine,
) -> None:
    now = [0.0]
    replicas = [
        DatabaseKeyStore(session_factory(engine), cache_s=2.0, clock=lambda: now[0])
        for _ in range(2)
    ]
    key, record = new_key("acme", "read", None)
    await replicas[0].add(record)
    for replica in replicas:  # both look it up (and cache it)
        assert await replica.find(digest_of(key)) == record
    assert await replicas[0].revoke(record.key_id) == record
    assert await replicas[0].find(digest_of(key)) is None, "the revoking replica at once"
    now[0] = 1.9
    assert await replicas[1].find(digest_of(key)) == record, "cached: within the bound"
    now[0] = 2.0
    assert await replicas[1].find(digest_of(key)) is None, "past the bound: refused"
