"""Daily counters in the system of record: the durable copy of each tenant's daily
quota use and token spend (the limiter decides in Redis, or in process, and adds what
it admitted here every few seconds; after a Redis restart it is re-seeded from here).
Rate-limit windows and chat slots are not kept: losing them is harmless."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import BigInteger, Integer, String, case, delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Mapped, mapped_column

from groundwire_core.database import AsyncSession
from groundwire_gateway.db.base import Base


class DailyCounterRow(Base):
    __tablename__ = "gateway_daily_counters"

    day: Mapped[int] = mapped_column(Integer, primary_key=True)
    """Days since the Unix epoch (UTC), as the limiter counts them."""
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    """``quota`` (requests of a quota bucket) or ``tokens`` (a tenant's tokens)."""
    bucket: Mapped[str] = mapped_column(String(100), primary_key=True)
    """``tenant:<name>`` / ``anonymous`` for quota; the tenant's name for tokens."""
    used: Mapped[int] = mapped_column(BigInteger, nullable=False)


CounterKey = tuple[str, str]
"""(kind, bucket)."""


async def add_counts(session: AsyncSession, day: int, deltas: Mapping[CounterKey, int]) -> None:
    """Adds each delta to its counter of ``day`` (creating it), atomically per row:
    replicas adding at once never lose an addition."""
    if not deltas:
        return
    dialect = session.bind.dialect.name if session.bind is not None else "sqlite"
    make = pg_insert if dialect == "postgresql" else sqlite_insert
    for (kind, bucket), delta in sorted(deltas.items()):  # a fixed order: no deadlocks
        # a settlement returns what an admission reserved (a negative delta): a counter
        # never goes below zero, even when the reserve was counted the day before
        stmt = make(DailyCounterRow).values(
            day=day, kind=kind, bucket=bucket[:100], used=max(delta, 0)
        )
        added = DailyCounterRow.used + delta
        stmt = stmt.on_conflict_do_update(
            index_elements=["day", "kind", "bucket"],
            set_={"used": case((added < 0, 0), else_=added)},
        )
        await session.execute(stmt)


async def counts(session: AsyncSession, day: int) -> dict[CounterKey, int]:
    """Every counter of ``day``."""
    rows = await session.execute(
        select(DailyCounterRow.kind, DailyCounterRow.bucket, DailyCounterRow.used).where(
            DailyCounterRow.day == day
        )
    )
    return {(kind, bucket): int(used) for kind, bucket, used in rows}


async def prune(session: AsyncSession, before_day: int) -> None:
    """Drops the counters of days before ``before_day``."""
    await session.execute(delete(DailyCounterRow).where(DailyCounterRow.day < before_day))
