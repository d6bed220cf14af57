"""The system of record's logical dump (`groundwire backup`'s records) restores across
databases: rows taken on SQLite land in PostgreSQL, and the restored database keeps
working — a new audit event after the restore does not collide with a restored id."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from groundwire_cli.records import OWNERS, dump, load
from groundwire_core.database import create_engine, session_factory, upgrade
from groundwire_core.errors import InvalidInput
from groundwire_gateway.db.audit import AuditEvent, add_events, recent_events
from tests.postgres_server import PostgresServer

GATEWAY = next(o for o in OWNERS if o.name == "gateway")


def _event(n: int) -> AuditEvent:
    return AuditEvent(time.time(), "key.create", "acme", f"k{n:07d}", "/v1/admin/keys", "ok")


async def _write(url: str, events: list[AuditEvent]) -> None:
    engine = create_engine(url)
    try:
        async with session_factory(engine)() as session, session.begin():
            await add_events(session, events)
    finally:
        await engine.dispose()


async def _read(url: str) -> list[AuditEvent]:
    engine = create_engine(url)
    try:
        async with session_factory(engine)() as session:
            return await recent_events(session, limit=100)
    finally:
        await engine.dispose()


async def test_a_sqlite_dump_restores_into_postgresql_and_keeps_writing(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    source = f"sqlite:///{tmp_path / 'source.sqlite3'}"
    engine = create_engine(source)
    await upgrade(engine, GATEWAY.migrations)
    await engine.dispose()
    await _write(source, [_event(n) for n in range(3)])
    folder = tmp_path / "records"
    folder.mkdir()
    dumped = await dump(GATEWAY, source, folder)
    assert dumped["rows"]["gateway_audit_events"] == 3

    target = postgres_server.fresh_database()
    restored = await load(GATEWAY, target, folder, dumped["revision"])
    assert restored["gateway_audit_events"] == 3
    await _write(target, [_event(99)])  # the sequence was moved past the restored ids
    events = await _read(target)
    assert [e.key_id for e in events] == ["k0000099", "k0000002", "k0000001", "k0000000"]

    with pytest.raises(InvalidInput, match="already holds"):
        await load(GATEWAY, target, folder, dumped["revision"])
    with pytest.raises(InvalidInput, match="newer than this version"):
        await load(GATEWAY, postgres_server.fresh_database(), folder, "g9999")
