"""Tenants and API keys in the system of record: the repository of both tables.

A key is stored by its SHA-256 digest only (see ``keystore``): the digest is the
lookup index, the key id (8 hex characters) its public name. A revoked key keeps its
row with ``revoked_at`` set (who had which key, and until when, stays answerable);
every lookup and listing skips it. A tenant row exists for every tenant that was
given a key, created by the first key creation that names it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import JSON, Float, ForeignKey, Index, String, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from groundwire_core.database import AsyncSession
from groundwire_gateway.db.base import Base


class TenantRow(Base):
    __tablename__ = "gateway_tenants"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[float] = mapped_column(Float, nullable=False)
    """Unix time."""


class ApiKeyRow(Base):
    __tablename__ = "gateway_api_keys"
    __table_args__ = (Index("ix_gateway_api_keys_tenant", "tenant"),)

    key_id: Mapped[str] = mapped_column(String(8), primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)
    tenant: Mapped[str] = mapped_column(
        String(64), ForeignKey("gateway_tenants.name"), nullable=False
    )
    role: Mapped[str] = mapped_column(String(8), nullable=False)
    collections: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    """The collections the key is limited to (sorted); NULL = all of its tenant's."""
    name: Mapped[str] = mapped_column(String(100), nullable=False, default="")
    created_at: Mapped[float] = mapped_column(Float, nullable=False)
    revoked_at: Mapped[float | None] = mapped_column(Float, nullable=True)


@dataclass(frozen=True)
class KeyRecord:
    """One stored key, as the rest of the gateway sees it (never the key itself)."""

    key_id: str
    tenant: str
    role: str
    collections: frozenset[str] | None
    digest: str
    created_at: float
    name: str = ""
    revoked_at: float | None = None


class KeyIdTaken(Exception):
    """Another key already has this key id (32 random bits: rare; make a new key)."""


def _record(row: ApiKeyRow) -> KeyRecord:
    cols = frozenset(row.collections) if row.collections is not None else None
    return KeyRecord(
        row.key_id,
        row.tenant,
        row.role,
        cols,
        row.digest,
        row.created_at,
        row.name,
        row.revoked_at,
    )


async def ensure_tenant(session: AsyncSession, name: str) -> None:
    """Creates the tenant's row unless it exists (two writers at once: one inserts,
    the other's insert does nothing)."""
    dialect = session.bind.dialect.name if session.bind is not None else "sqlite"
    make = pg_insert if dialect == "postgresql" else sqlite_insert
    await session.execute(
        make(TenantRow)
        .values(name=name, created_at=time.time())
        .on_conflict_do_nothing(index_elements=["name"])
    )


async def tenants(session: AsyncSession) -> list[str]:
    """Every tenant's name, sorted."""
    return list((await session.scalars(select(TenantRow.name).order_by(TenantRow.name))).all())


async def add_key(session: AsyncSession, record: KeyRecord) -> None:
    """Stores a new key (and its tenant's row). Raises KeyIdTaken when its key id is in
    use (the transaction is then to be rolled back: make another key and try again).
    No savepoint: SQLite's driver does not keep them reliably."""
    await ensure_tenant(session, record.tenant)
    cols = sorted(record.collections) if record.collections is not None else None
    if await session.get(ApiKeyRow, record.key_id) is not None:
        raise KeyIdTaken(record.key_id)
    try:
        session.add(
            ApiKeyRow(
                key_id=record.key_id,
                digest=record.digest,
                tenant=record.tenant,
                role=record.role,
                collections=cols,
                name=record.name,
                created_at=record.created_at,
                revoked_at=None,
            )
        )
        await session.flush()
    except IntegrityError as error:  # inserted meanwhile by another replica
        raise KeyIdTaken(record.key_id) from error


async def find_key(session: AsyncSession, digest: str) -> KeyRecord | None:
    """The live (not revoked) key with this digest, or None."""
    row = await session.scalar(
        select(ApiKeyRow).where(ApiKeyRow.digest == digest, ApiKeyRow.revoked_at.is_(None))
    )
    return _record(row) if row is not None else None


async def list_keys(session: AsyncSession, tenant: str | None = None) -> list[KeyRecord]:
    """The live keys of ``tenant`` (None = every tenant), oldest first."""
    query = select(ApiKeyRow).where(ApiKeyRow.revoked_at.is_(None))
    if tenant is not None:
        query = query.where(ApiKeyRow.tenant == tenant)
    rows = await session.scalars(query.order_by(ApiKeyRow.created_at, ApiKeyRow.key_id))
    return [_record(r) for r in rows]


async def revoke_key(
    session: AsyncSession, key_id: str, tenant: str | None = None
) -> KeyRecord | None:
    """Marks the live key ``key_id`` revoked (only if it belongs to ``tenant`` when
    given); the revoked record, or None when there was no such live key."""
    query = select(ApiKeyRow).where(ApiKeyRow.key_id == key_id, ApiKeyRow.revoked_at.is_(None))
    if tenant is not None:
        query = query.where(ApiKeyRow.tenant == tenant)
    row = await session.scalar(query)
    if row is None:
        return None
    now = time.time()
    # a guarded update: of two replicas revoking at once, one reports the revocation
    done = await session.execute(
        update(ApiKeyRow)
        .where(ApiKeyRow.key_id == key_id, ApiKeyRow.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    if getattr(done, "rowcount", 1) == 0:
        return None
    row.revoked_at = now
    return _record(row)
