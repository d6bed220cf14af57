"""The system of record's plumbing: an async engine from a URL, and the migration runner.

Control-plane state (tenants, keys, audit, conversations, feedback, jobs, sync
definitions) lives in one relational database: PostgreSQL in compose and Kubernetes,
SQLite in the embedded default, the same SQLAlchemy 2 code and the same Alembic
migrations on both. Each service owns its tables, its ``MetaData`` and its migrations
folder, and records its schema revision in its own version table
(``alembic_version_<service>``), so two services may share one database without
reading each other's rows. This module only turns a URL into an engine and runs a
service's migrations; no table is defined here.

Drivers: asyncpg (Apache-2.0) for PostgreSQL and aiosqlite (MIT) for SQLite: both
async, so a key lookup on the request path never blocks the event loop, and both
permissively licensed (psycopg is LGPL).

Migrations run once per deploy (``groundwire db upgrade``, a Kubernetes Job, compose's
one-shot ``migrate`` service) or, where ``migrate_on_start`` is set (the embedded
default), when a service starts. On PostgreSQL the upgrade holds a transaction-level
advisory lock, so replicas that start together upgrade one after the other instead of
racing; SQLite serialises writers by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import sys
import weakref
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.engine.url import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlalchemy.ext.asyncio import AsyncSession as AsyncSession  # re-exported for services
from sqlalchemy.pool import NullPool, StaticPool

from groundwire_core.errors import GroundwireError, InvalidInput, Unavailable

SQLITE_BUSY_TIMEOUT_S = 30.0
"""How long a SQLite writer waits for another's lock (two embedded processes may share
one file) before the call fails."""


def async_url(url: str) -> URL:
    """``url`` with an async driver: ``postgresql://`` -> asyncpg, ``sqlite://`` ->
    aiosqlite (an explicit driver is kept). Raises InvalidInput for another database."""
    try:
        parsed = make_url(url)
    except (SQLAlchemyError, ValueError):
        raise InvalidInput("the database URL cannot be parsed") from None
    backend = parsed.get_backend_name()
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+asyncpg")
    if backend == "sqlite":
        return parsed.set(drivername="sqlite+aiosqlite")
    raise InvalidInput(f"unsupported database {backend!r}: use postgresql:// or sqlite://")


def sqlite_url(path: Path | str) -> str:
    """The URL of a SQLite file (the embedded default's system of record)."""
    return f"sqlite:///{Path(path).resolve()}"


def masked(url: str) -> str:
    """``url`` with its password hidden, for logs and ``config show``."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (SQLAlchemyError, ValueError):
        return "<unparsable database URL>"


def is_postgres(engine: AsyncEngine) -> bool:
    return engine.dialect.name == "postgresql"


def create_engine(url: str, *, pool_size: int = 5) -> AsyncEngine:
    """An async engine for ``url``. A SQLite file's folder is created (0700) and the
    file kept private (0600); constructing opens no connection."""
    parsed = async_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:"):
            # one shared connection: each new in-memory connection would be a new,
            # empty database (a throw-away store: tests, a gateway without a URL)
            engine = create_async_engine(
                parsed.set(database=":memory:"),
                poolclass=StaticPool,
                connect_args={"check_same_thread": False},
            )
            event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
            return engine
        if database:
            path = Path(database)
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            path.touch(mode=0o600, exist_ok=True)
            path.chmod(0o600)
        engine = create_async_engine(
            parsed,
            # one connection per use: aiosqlite runs each on its own thread, and a
            # pooled SQLite connection would pin a lock across awaits
            poolclass=NullPool,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S},
        )
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(
        parsed, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True
    )


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL: readers never wait for the writer; foreign keys are off by default in SQLite
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
    cursor.close()


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions for one unit of work each (``async with factory() as s, s.begin():``);
    objects stay readable after commit."""
    return async_sessionmaker(engine, expire_on_commit=False)


@dataclass(frozen=True)
class Migrations:
    """Where a service's migrations live and where its revision is recorded."""

    script_location: str
    """Alembic's ``package:folder`` form, e.g. ``groundwire_gateway.state:migrations``."""
    version_table: str
    """e.g. ``alembic_version_gateway``: one per service, so services share a database."""

    @property
    def lock_key(self) -> int:
        """The advisory lock this service's upgrade holds on PostgreSQL (a stable
        signed 64-bit number from the version table's name)."""
        digest = hashlib.sha256(self.version_table.encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)


def _alembic_config(migrations: Migrations, connection: Connection) -> Any:
    from alembic.config import Config  # alembic is needed only to migrate

    config = Config()
    config.set_main_option("script_location", migrations.script_location)
    config.attributes["connection"] = connection
    config.attributes["version_table"] = migrations.version_table
    return config


_ALEMBIC_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)


def _alembic_lock() -> asyncio.Lock:
    """One migration at a time per event loop: Alembic keeps its running context in a
    module global, so two upgrades interleaving on one loop would clobber each other."""
    loop = asyncio.get_running_loop()
    lock = _ALEMBIC_LOCKS.get(loop)
    if lock is None:
        lock = _ALEMBIC_LOCKS[loop] = asyncio.Lock()
    return lock


@contextlib.asynccontextmanager
async def _sqlite_file_lock(engine: AsyncEngine) -> AsyncIterator[None]:
    """On a SQLite file: an exclusive lock on ``<file>.migrate-lock`` for the upgrade.
    Two processes starting on one file (two embedded gateways) would otherwise both
    read "no revision" and both create the tables; SQLite's own lock is taken only at
    the first write, after that read. PostgreSQL has its advisory lock instead."""
    database = engine.url.database or ""
    if engine.dialect.name != "sqlite" or database in ("", ":memory:"):
        yield
        return
    fd = os.open(f"{database}.migrate-lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


async def upgrade(engine: AsyncEngine, migrations: Migrations, revision: str = "head") -> None:
    """Upgrades the service's tables to ``revision``; a no-op when already there.
    Raises Unavailable when the database cannot be reached or the upgrade fails."""
    from alembic import command

    def run(connection: Connection) -> None:
        command.upgrade(_alembic_config(migrations, connection), revision)

    try:
        async with _alembic_lock(), _sqlite_file_lock(engine), engine.begin() as conn:
            if is_postgres(engine):
                # replicas starting together: the second waits here, then finds head
                await conn.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": migrations.lock_key}
                )
            await conn.run_sync(run)
    except (SQLAlchemyError, OSError) as exc:
        raise Unavailable(
            f"cannot migrate the system of record ({type(exc).__name__})", dependency="database"
        ) from exc


async def current_revision(engine: AsyncEngine, migrations: Migrations) -> str | None:
    """The revision the database is at for this service (None = never migrated)."""
    from alembic.runtime.migration import MigrationContext

    def read(connection: Connection) -> str | None:
        context = MigrationContext.configure(
            connection, opts={"version_table": migrations.version_table}
        )
        rev: str | None = context.get_current_revision()
        return rev

    async with engine.connect() as conn:
        return await conn.run_sync(read)


def head_revision(migrations: Migrations) -> str | None:
    """The newest revision of the service's migrations folder."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", migrations.script_location)
    head: str | None = ScriptDirectory.from_config(config).get_current_head()
    return head


async def prepare(engine: AsyncEngine, migrations: Migrations, *, migrate: bool) -> None:
    """At a service's start: upgrades (``migrate``) or checks that the schema is at
    head. Raises Unavailable with what to run when it is behind or unreachable."""
    if migrate:
        await upgrade(engine, migrations)
        return
    try:
        current = await current_revision(engine, migrations)
    except (SQLAlchemyError, OSError) as exc:
        raise Unavailable(
            f"the system of record cannot be reached ({type(exc).__name__})",
            dependency="database",
        ) from exc
    head = head_revision(migrations)
    if current != head:
        raise Unavailable(
            f"the system of record is at revision {current or 'none'}, this version needs "
            f"{head}: run `groundwire db upgrade` (or the deployment's migrate job)",
            dependency="database",
        )


def run_migrations_online(target_metadata: Any) -> None:
    """The body of every service's Alembic ``env.py``: migrate over the connection
    ``upgrade`` passed in, recording the revision in the service's own table.
    ``render_as_batch`` lets the same migrations alter tables on SQLite."""
    from alembic import context

    config = context.config
    connection = config.attributes["connection"]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        version_table=config.attributes["version_table"],
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


SessionFactory = async_sessionmaker[AsyncSession]


async def _migrate_command(command: str, url: str, migrations: Migrations, service: str) -> str:
    engine = create_engine(url)
    try:
        if command == "upgrade":
            await upgrade(engine, migrations)
        return f"{masked(url)}: {service} at {await current_revision(engine, migrations)}"
    finally:
        await engine.dispose()


def migrate_main(argv: Sequence[str], *, url: str, migrations: Migrations, service: str) -> int:
    """``python -m groundwire_<service>.db [upgrade|current]`` (a deploy's migrate job):
    prints the revision reached; 2 for bad usage or no URL, 1 when it fails."""
    command = argv[0] if argv else "upgrade"
    if command not in ("upgrade", "current"):
        print(f"usage: python -m groundwire_{service}.db [upgrade|current]", file=sys.stderr)
        return 2
    if not url:
        print(f"GROUNDWIRE_{service.upper()}_DATABASE_URL is not set", file=sys.stderr)
        return 2
    try:
        print(asyncio.run(_migrate_command(command, url, migrations, service)))
    except GroundwireError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    return 0
