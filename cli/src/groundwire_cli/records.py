"""The system of record from the command line: migrations, and a portable dump of its rows.

``groundwire db upgrade`` runs every service's migrations (the gateway's and the
retriever's) against their database URLs, once per deploy. The dump behind
``groundwire backup`` is logical — one JSON-lines file per table, read through each
service's own ``MetaData`` — so a backup taken on SQLite restores into PostgreSQL and
back, and a backup taken at an older schema revision is restored at that revision and
then migrated forward (rows go through the same migrations a live database would).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Integer, MetaData, Table, func, insert, select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

import groundwire_gateway.db.tables  # noqa: F401  (registers every table on the metadata)
import groundwire_retriever.db.tables  # noqa: F401
from groundwire_core.database import (
    Migrations,
    create_engine,
    current_revision,
    masked,
    upgrade,
)
from groundwire_core.errors import InvalidInput
from groundwire_gateway.db.base import MIGRATIONS as GATEWAY_MIGRATIONS
from groundwire_gateway.db.base import Base as GatewayBase
from groundwire_retriever.db.base import MIGRATIONS as RETRIEVER_MIGRATIONS
from groundwire_retriever.db.base import Base as RetrieverBase

BATCH = 500


@dataclass(frozen=True)
class Owner:
    """A service that owns tables in the system of record."""

    name: str
    metadata: MetaData
    migrations: Migrations


OWNERS = (
    Owner("gateway", GatewayBase.metadata, GATEWAY_MIGRATIONS),
    Owner("retriever", RetrieverBase.metadata, RETRIEVER_MIGRATIONS),
)


async def upgrade_all(urls: dict[str, str]) -> list[str]:
    """Upgrades each service's tables at its URL; a line per service."""
    lines = []
    for owner in OWNERS:
        engine = create_engine(urls[owner.name])
        try:
            await upgrade(engine, owner.migrations)
            revision = await current_revision(engine, owner.migrations)
        finally:
            await engine.dispose()
        lines.append(f"{owner.name}: {masked(urls[owner.name])} at {revision}")
    return lines


def _encode(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$b64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dt.datetime):
        return {"$dt": value.isoformat()}
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and len(value) == 1:
        if "$b64" in value:
            return base64.b64decode(value["$b64"])
        if "$dt" in value:
            return dt.datetime.fromisoformat(value["$dt"])
    return value


async def _rows(engine: AsyncEngine, table: Table) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        result = await conn.execute(select(table))
        return [{k: _encode(v) for k, v in row._mapping.items()} for row in result]


async def dump(owner: Owner, url: str, out: Path) -> dict[str, Any]:
    """Writes every table of ``owner`` at ``url`` to ``out/<table>.jsonl`` (``out``
    exists); the revision and row counts."""
    engine = create_engine(url)
    counts: dict[str, int] = {}
    try:
        revision = await current_revision(engine, owner.migrations)
        for table in owner.metadata.sorted_tables:
            rows = await _rows(engine, table)
            path = out / f"{table.name}.jsonl"
            with path.open("w", encoding="utf-8") as lines:
                for row in rows:
                    lines.write(json.dumps(row, sort_keys=True) + "\n")
            path.chmod(0o600)
            counts[table.name] = len(rows)
    finally:
        await engine.dispose()
    return {"revision": revision, "rows": counts}


def _read(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            yield {k: _decode(v) for k, v in json.loads(line).items()}


async def load(owner: Owner, url: str, source: Path, revision: str | None) -> dict[str, int]:
    """Restores ``owner``'s tables from ``source`` into an empty database at ``url``:
    migrates it to head, then inserts the rows (columns a newer schema added take their
    defaults). Raises InvalidInput when the dump's ``revision`` is unknown to this
    version or the target already holds rows of this service."""
    if revision is not None and not _known(owner.migrations, revision):
        raise InvalidInput(
            f"the backup's {owner.name} schema revision {revision!r} is newer than this "
            "version knows: restore it with the version that took it"
        )
    engine = create_engine(url)
    counts: dict[str, int] = {}
    try:
        await upgrade(engine, owner.migrations)
        async with engine.begin() as conn:
            for table in owner.metadata.sorted_tables:
                held = (await conn.execute(select(func.count()).select_from(table))).scalar()
                if held:
                    raise InvalidInput(
                        f"the {owner.name}'s table {table.name!r} already holds {held} "
                        "row(s): restore into an empty database"
                    )
            for table in owner.metadata.sorted_tables:
                batch: list[dict[str, Any]] = []
                counts[table.name] = 0
                for row in _read(source / f"{table.name}.jsonl"):
                    batch.append({k: v for k, v in row.items() if k in table.c})
                    if len(batch) >= BATCH:
                        await conn.execute(insert(table), batch)
                        counts[table.name] += len(batch)
                        batch = []
                if batch:
                    await conn.execute(insert(table), batch)
                    counts[table.name] += len(batch)
                if engine.dialect.name == "postgresql" and counts[table.name]:
                    await _advance_sequences(conn, table)
    finally:
        await engine.dispose()
    return counts


async def _advance_sequences(conn: AsyncConnection, table: Table) -> None:
    """Moves the sequence behind each auto-increment column past the restored rows:
    rows inserted with their ids leave PostgreSQL's sequence at its start, and the next
    row written would collide with a restored one (SQLite takes max(rowid) + 1 itself)."""
    for column in table.primary_key.columns:
        if column.autoincrement is True or (
            column.autoincrement == "auto" and isinstance(column.type, Integer)
        ):
            await conn.execute(
                text(
                    "SELECT setval(pg_get_serial_sequence(:table, :column), "
                    f"(SELECT max({column.name}) FROM {table.name}))"
                ),
                {"table": table.name, "column": column.name},
            )


def _known(migrations: Migrations, revision: str) -> bool:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", migrations.script_location)
    return any(s.revision == revision for s in ScriptDirectory.from_config(config).walk_revisions())
