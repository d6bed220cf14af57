"""The system of record's plumbing on SQLite and a real PostgreSQL: engines from URLs,
migrations recorded per service, a service refusing a schema that is behind."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import text

from groundwire_core.database import (
    create_engine,
    current_revision,
    head_revision,
    masked,
    prepare,
    upgrade,
)
from groundwire_core.errors import InvalidInput, Unavailable
from groundwire_gateway.db.base import MIGRATIONS as GATEWAY
from groundwire_retriever.db.base import MIGRATIONS as RETRIEVER


async def test_each_service_migrates_to_its_own_head_in_one_database(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        with pytest.raises(Unavailable, match="db upgrade"):
            await prepare(engine, GATEWAY, migrate=False)
        await asyncio.gather(upgrade(engine, GATEWAY), upgrade(engine, RETRIEVER))
        assert await current_revision(engine, GATEWAY) == head_revision(GATEWAY)
        assert await current_revision(engine, RETRIEVER) == head_revision(RETRIEVER)
        await upgrade(engine, GATEWAY)  # again: a no-op
        await prepare(engine, GATEWAY, migrate=False)
        async with engine.connect() as conn:
            tables = {
                row[0]
                for row in await conn.execute(
                    text(
                        "SELECT name FROM sqlite_master WHERE type='table'"
                        if engine.dialect.name == "sqlite"
                        else "SELECT tablename FROM pg_tables WHERE schemaname='public'"
                    )
                )
            }
        assert {"alembic_version_gateway", "alembic_version_retriever"} <= tables
    finally:
        await engine.dispose()


async def test_replicas_upgrading_together_do_not_race(database_url: str) -> None:
    engines = [create_engine(database_url) for _ in range(3)]
    try:
        await asyncio.gather(*(upgrade(e, GATEWAY) for e in engines))
        assert await current_revision(engines[0], GATEWAY) == head_revision(GATEWAY)
    finally:
        for engine in engines:
            await engine.dispose()


def test_urls_are_checked_and_masked() -> None:
    with pytest.raises(InvalidInput, match="unsupported database"):
        create_engine("mysql://u:p@h/db")
    shown = masked("postgresql://groundwire:s3cret@db:5432/gw")
    assert "s3cret" not in shown and "db:5432/gw" in shown


async def test_an_unreachable_database_is_unavailable_not_a_crash() -> None:
    engine = create_engine("postgresql://u:p@127.0.0.1:9/none")
    try:
        with pytest.raises(Unavailable) as caught:
            await prepare(engine, GATEWAY, migrate=True)
        assert "p@" not in caught.value.message
    finally:
        await engine.dispose()


def test_groundwire_db_upgrade_migrates_every_service(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from groundwire_cli.__main__ import main as groundwire

    with pytest.raises(SystemExit) as done:
        groundwire(
            [
                "db",
                "upgrade",
                "--run-dir",
                str(tmp_path / "run"),
                "--gateway-db",
                database_url,
                "--retriever-db",
                database_url,
            ]
        )
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert f"gateway: {masked(database_url)} at {head_revision(GATEWAY)}" in out
    assert f"retriever: {masked(database_url)} at {head_revision(RETRIEVER)}" in out
    assert "groundwire-test" not in out  # the PostgreSQL password is masked


def test_processes_upgrading_one_sqlite_file_together_do_not_race(tmp_path: Path) -> None:
    """Two embedded gateways starting on one file: each migrates at start."""
    import os
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'shared.sqlite3'}"
    env = {**os.environ, "GROUNDWIRE_GATEWAY_DATABASE_URL": url}
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "groundwire_gateway.db", "upgrade"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for _ in range(4)
    ]
    outputs = [run.communicate(timeout=120)[0].decode() for run in runs]
    assert [run.returncode for run in runs] == [0] * 4, outputs
    assert all(f"gateway at {head_revision(GATEWAY)}" in out for out in outputs), outputs
