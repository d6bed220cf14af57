"""Audit events in the system of record: one row per admin action or refused request
(what ``groundwire_gateway.audit`` also logs as a line and counts as a metric)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import BigInteger, Float, Index, Integer, String, insert, select
from sqlalchemy.orm import Mapped, mapped_column

from groundwire_core.database import AsyncSession
from groundwire_gateway.db.base import Base

# SQLite assigns row ids only to INTEGER PRIMARY KEY; PostgreSQL gets a bigint identity
_ID = BigInteger().with_variant(Integer(), "sqlite")


class AuditRow(Base):
    __tablename__ = "gateway_audit_events"
    __table_args__ = (Index("ix_gateway_audit_events_tenant_at", "tenant", "at"),)

    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    at: Mapped[float] = mapped_column(Float, nullable=False)
    """Unix time."""
    event: Mapped[str] = mapped_column(String(64), nullable=False)
    tenant: Mapped[str | None] = mapped_column(String(64), nullable=True)
    key_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    route: Mapped[str] = mapped_column(String(200), nullable=False)
    outcome: Mapped[str] = mapped_column(String(64), nullable=False)
    request_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    detail: Mapped[str] = mapped_column(String(500), nullable=False, default="")


@dataclass(frozen=True)
class AuditEvent:
    at: float
    event: str
    tenant: str | None
    key_id: str | None
    route: str
    outcome: str
    request_id: str | None = None
    detail: str = ""


def _clip(value: str | None, size: int) -> str | None:
    return value[:size] if value is not None else None


async def add_events(session: AsyncSession, events: Sequence[AuditEvent]) -> None:
    """Stores ``events`` (one insert for the batch)."""
    if not events:
        return
    await session.execute(
        insert(AuditRow),
        [
            {
                "at": e.at,
                "event": e.event[:64],
                "tenant": _clip(e.tenant, 64),
                "key_id": _clip(e.key_id, 32),
                "route": e.route[:200],
                "outcome": e.outcome[:64],
                "request_id": _clip(e.request_id, 128),
                "detail": e.detail[:500],
            }
            for e in events
        ],
    )


async def recent_events(
    session: AsyncSession, tenant: str | None = None, limit: int = 100
) -> list[AuditEvent]:
    """The newest ``limit`` events (of ``tenant`` when given), newest first."""
    query = select(AuditRow)
    if tenant is not None:
        query = query.where(AuditRow.tenant == tenant)
    rows = await session.scalars(query.order_by(AuditRow.id.desc()).limit(limit))
    return [
        AuditEvent(r.at, r.event, r.tenant, r.key_id, r.route, r.outcome, r.request_id, r.detail)
        for r in rows
    ]
