"""The gateway's tables on SQLite and a real PostgreSQL: tenants and keys (digests
only, revocation kept as a row), audit events, durable daily counters; the migration
creates exactly what the table modules declare."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from groundwire_core.database import create_engine, session_factory, upgrade
from groundwire_gateway.db import audit, counters, keys, tables
from groundwire_gateway.db.base import MIGRATIONS, Base


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    await upgrade(engine, MIGRATIONS)
    try:
        yield engine
    finally:
        await engine.dispose()


def _key(
    key_id: str,
    tenant: str,
    digest: str,
    *,
    role: str = "read",
    collections: frozenset[str] | None = None,
    created_at: float | None = None,
    name: str = "",
) -> keys.KeyRecord:
    when = time.time() if created_at is None else created_at
    return keys.KeyRecord(key_id, tenant, role, collections, digest, when, name)


async def test_the_migration_matches_the_table_modules(engine: AsyncEngine) -> None:
    assert tables.__all__  # every module registered on Base

    mine = {"gateway_tenants", "gateway_api_keys", "gateway_audit_events", "gateway_daily_counters"}

    def only_mine(obj: object, name: str | None, kind: str, *_: object) -> bool:
        table = name if kind == "table" else getattr(getattr(obj, "table", None), "name", None)
        return table in mine

    def diff(connection: Connection) -> list[object]:
        context = MigrationContext.configure(
            connection,
            opts={
                "version_table": MIGRATIONS.version_table,
                "compare_type": True,
                "include_object": only_mine,
            },
        )
        return list(compare_metadata(context, Base.metadata))

    async with engine.connect() as conn:
        assert await conn.run_sync(diff) == []


async def test_keys_and_tenants(engine: AsyncEngine) -> None:
    sessions = session_factory(engine)
    async with sessions() as s, s.begin():
        await keys.add_key(s, _key("0000000a", "acme", "d" * 64, role="admin", created_at=1.0))
        await keys.add_key(
            s, _key("0000000b", "acme", "e" * 64, collections=frozenset({"b", "a"}), created_at=2.0)
        )
        await keys.add_key(s, _key("0000000c", "globex", "f" * 64, name="ci", created_at=3.0))
    async with sessions() as s:
        with pytest.raises(keys.KeyIdTaken):
            await keys.add_key(s, _key("0000000a", "acme", "0" * 64))
        await s.rollback()
        assert await keys.tenants(s) == ["acme", "globex"]
    async with sessions() as s:
        found = await keys.find_key(s, "e" * 64)
        assert found is not None and found.collections == frozenset({"a", "b"})
        assert found.tenant == "acme" and found.role == "read"
        assert [k.key_id for k in await keys.list_keys(s, "acme")] == ["0000000a", "0000000b"]
        assert [k.key_id for k in await keys.list_keys(s)] == ["0000000a", "0000000b", "0000000c"]
    async with sessions() as s, s.begin():
        assert await keys.revoke_key(s, "0000000c", tenant="acme") is None  # not acme's
        revoked = await keys.revoke_key(s, "0000000c", tenant="globex")
        assert revoked is not None and revoked.revoked_at is not None
        assert await keys.revoke_key(s, "0000000c") is None  # already revoked
    async with sessions() as s:
        assert await keys.find_key(s, "f" * 64) is None
        assert [k.key_id for k in await keys.list_keys(s)] == ["0000000a", "0000000b"]
        assert await keys.tenants(s) == ["acme", "globex"]  # the tenant stays


async def test_tenant_created_by_two_writers_at_once(engine: AsyncEngine) -> None:
    sessions = session_factory(engine)

    async def add(i: int) -> None:
        async with sessions() as s, s.begin():
            await keys.add_key(s, _key(f"{i:08x}", "initech", f"{i:064x}"))

    await asyncio.gather(*(add(i) for i in range(4)))
    async with sessions() as s:
        assert await keys.tenants(s) == ["initech"]
        assert len(await keys.list_keys(s, "initech")) == 4


async def test_audit_events(engine: AsyncEngine) -> None:
    sessions = session_factory(engine)
    events = [
        audit.AuditEvent(1.0, "key.create", "acme", "static:ab", "/v1/admin/keys", "ok", "r1", "x"),
        audit.AuditEvent(2.0, "denied", None, None, "/v1/search", "unauthenticated"),
        audit.AuditEvent(3.0, "key.revoke", "acme", "0000000a", "/v1/admin/keys/x", "not_found"),
    ]
    async with sessions() as s, s.begin():
        await audit.add_events(s, events)
        await audit.add_events(s, [])
    async with sessions() as s:
        assert await audit.recent_events(s) == events[::-1]
        assert [e.event for e in await audit.recent_events(s, "acme", limit=1)] == ["key.revoke"]


async def test_daily_counters_add_up_across_writers(engine: AsyncEngine) -> None:
    sessions = session_factory(engine)

    async def add(delta: int) -> None:
        async with sessions() as s, s.begin():
            await counters.add_counts(
                s, 20_000, {("quota", "tenant:acme"): delta, ("tokens", "acme"): 10 * delta}
            )

    await asyncio.gather(*(add(d) for d in (1, 2, 3, 4)))
    async with sessions() as s, s.begin():
        await counters.add_counts(s, 19_999, {("quota", "anonymous"): 7})
    async with sessions() as s:
        assert await counters.counts(s, 20_000) == {
            ("quota", "tenant:acme"): 10,
            ("tokens", "acme"): 100,
        }
    # a settlement (negative) larger than the day's count, or on a day with none (its
    # reserve was counted the day before), leaves the counter at zero, never below
    async with sessions() as s, s.begin():
        await counters.add_counts(s, 20_000, {("tokens", "acme"): -150})
        await counters.add_counts(s, 20_001, {("tokens", "acme"): -40})
    async with sessions() as s:
        assert (await counters.counts(s, 20_000))[("tokens", "acme")] == 0
        assert await counters.counts(s, 20_001) == {("tokens", "acme"): 0}
    async with sessions() as s, s.begin():
        await counters.prune(s, 20_000)
    async with sessions() as s:
        assert await counters.counts(s, 19_999) == {}
        assert await counters.counts(s, 20_000) != {}
