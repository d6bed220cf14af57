"""Daily quota use and token spend that outlive Redis and the gateway: the durable
copy of the limiter's daily counters, kept in the system of record.

The limiter still decides every admission in one place (a Redis script, or in
process): that keeps the decision atomic and off the database. This ledger notes what
each admission consumed and every token charge, and adds it to the day's rows of
``gateway_daily_counters`` every ``flush_s`` (one upsert per counter; replicas add,
never overwrite). When the limiter's counters are gone — a Redis restarted without
persistence, or a gateway started with in-process counters — the ledger seeds them
back with today's totals from the database (``used = max(what is there, the row)``).

Bounds: a gateway that crashes loses at most its last ``flush_s`` of additions to
the rows; after a Redis restart, admissions decided before the next tick (at most
``flush_s`` later) counted from zero, so a tenant may exceed its quota by that much
traffic once. Rate-limit windows and chat slots are not kept: losing them is harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Protocol

from sqlalchemy.exc import SQLAlchemyError

from groundwire_core.database import SessionFactory
from groundwire_gateway.db import counters as rows
from groundwire_gateway.limits import DAY_S, Ask

log = logging.getLogger("groundwire.gateway.daily")
KEEP_DAYS = 7
"""Rows older than this many days are pruned (once a day per replica)."""


class Seedable(Protocol):
    """The limiter's side: whether its counters need seeding, and the seeding."""

    async def counters_lost(self) -> bool: ...

    async def restore_daily(self, day: int, counts: dict[rows.CounterKey, int]) -> None: ...


class DailyLedger:
    """Notes admissions and charges (no I/O on the request path) and writes them."""

    def __init__(
        self,
        sessions: SessionFactory,
        flush_s: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._sessions = sessions
        self._flush_s = flush_s
        self._clock = clock
        self._pending: dict[tuple[int, str, str], int] = {}
        self._task: asyncio.Task[None] | None = None
        self._pruned_day = -1

    def _day(self) -> int:
        return int(self._clock() // DAY_S)

    def _add(self, kind: str, bucket: str, amount: int) -> None:
        if amount:
            key = (self._day(), kind, bucket)
            self._pending[key] = self._pending.get(key, 0) + amount

    def admitted(self, ask: Ask) -> None:
        """What an admission consumed (the same rules as the counters)."""
        if ask.quota > 0:
            self._add("quota", ask.quota_bucket, 1)
        if ask.budget > 0:
            self._add("tokens", ask.tenant, ask.tokens)

    def charged(self, tenant: str, tokens: int) -> None:
        """Tokens charged after an admission (a chat's answer, a search's LLM calls)."""
        self._add("tokens", tenant, tokens)

    async def flush(self) -> None:
        """Adds the noted amounts to the rows; on failure they stay for the next try.
        Raises SQLAlchemyError or OSError when the database refused."""
        if not self._pending and self._pruned_day == self._day():
            return  # nothing to write: no database round trip
        pending, self._pending = self._pending, {}
        by_day: dict[int, dict[rows.CounterKey, int]] = {}
        for (day, kind, bucket), amount in pending.items():
            by_day.setdefault(day, {})[(kind, bucket)] = amount
        try:
            async with self._sessions() as session, session.begin():
                for day, deltas in sorted(by_day.items()):
                    await rows.add_counts(session, day, deltas)
                today = self._day()
                if today != self._pruned_day:
                    await rows.prune(session, today - KEEP_DAYS)
                    self._pruned_day = today
        except BaseException:
            for key, amount in pending.items():  # kept: added next time
                self._pending[key] = self._pending.get(key, 0) + amount
            raise

    async def today(self) -> tuple[int, dict[rows.CounterKey, int]]:
        """Today's totals in the database (this replica's unwritten ones not included)."""
        day = self._day()
        async with self._sessions() as session:
            return day, await rows.counts(session, day)

    async def tick(self, limiter: Seedable) -> None:
        """One round: write what was noted, then seed the limiter if it lost its counters."""
        await self.flush()
        if await limiter.counters_lost():
            day, counts = await self.today()
            await limiter.restore_daily(day, counts)
            log.info("daily counters seeded from the system of record (%d)", len(counts))

    def start(self, limiter: Seedable) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(limiter))

    async def _run(self, limiter: Seedable) -> None:
        while True:
            try:
                await self.tick(limiter)
            except (SQLAlchemyError, OSError) as error:
                log.warning("daily counters not written yet: %s", type(error).__name__)
            await asyncio.sleep(self._flush_s)

    async def stop(self) -> None:
        """Stops the loop and writes what is left (one try)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        with contextlib.suppress(SQLAlchemyError, OSError):
            await self.flush()
