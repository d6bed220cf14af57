"""Audit events: admin actions and refused requests, one structured record each.

Each event is one line on the ``groundwire.audit`` logger whose message is a JSON
object — ``event``, ``tenant``, ``key_id``, ``route``, ``outcome``, ``request_id`` and
an optional ``detail`` — so it parses the same under text or JSON logging, and it is
counted in ``groundwire_gateway_audit_events{event,outcome}``. A key never appears: the
key id is its public part, and ``detail`` carries names (a collection, a revoked key's
id), never a secret.

With the system of record (``sessions``) each event is also a row of
``gateway_audit_events`` (``db/audit.py``), so the trail outlives the log's rotation
and any Redis restart. :meth:`Auditor.record` is called on the request path and never
waits for the database: events queue in memory and one writer task inserts them in
batches, usually within milliseconds. While the database is unreachable they wait
(retried every second, at most ``max_pending``, the oldest dropped beyond that and
counted in the log); :meth:`Auditor.stop` writes what is left. What a crash of the
gateway can lose is the events of its last moments; the log line is written first.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque

from prometheus_client import Counter
from sqlalchemy.exc import SQLAlchemyError

from groundwire_core.context import current_request_id
from groundwire_core.database import SessionFactory
from groundwire_gateway.db import audit as rows

log = logging.getLogger("groundwire.audit")
RETRY_S = 1.0
BATCH = 500
STOP_WAIT_S = 5.0


class Auditor:
    """Writes audit events and counts them in ``counter`` (labels: event, outcome)."""

    def __init__(
        self,
        counter: Counter | None = None,
        sessions: SessionFactory | None = None,
        max_pending: int = 10_000,
    ) -> None:
        self._counter = counter
        self._sessions = sessions
        self._pending: deque[rows.AuditEvent] = deque()
        self._max_pending = max_pending
        self._dropped = 0
        self._writer: asyncio.Task[None] | None = None
        self._running = False

    def record(
        self,
        event: str,
        *,
        tenant: str | None,
        key_id: str | None,
        route: str,
        outcome: str,
        detail: str = "",
    ) -> None:
        """One event: ``event`` names what was tried (``key.create``, ``denied``…),
        ``outcome`` how it ended (``ok``, ``unauthenticated``, ``permission_denied``…)."""
        fields = {
            "event": event,
            "tenant": tenant,
            "key_id": key_id,
            "route": route,
            "outcome": outcome,
            "request_id": current_request_id(),
        }
        if detail:
            fields["detail"] = detail
        log.info("%s", json.dumps(fields, sort_keys=True))
        if self._counter is not None:
            self._counter.labels(event, outcome).inc()
        if self._sessions is not None:
            self._queue(
                rows.AuditEvent(
                    time.time(), event, tenant, key_id, route, outcome, fields["request_id"], detail
                )
            )

    def _queue(self, event: rows.AuditEvent) -> None:
        if len(self._pending) >= self._max_pending:
            self._pending.popleft()
            self._dropped += 1
        self._pending.append(event)
        if self._running and (self._writer is None or self._writer.done()):
            self._writer = asyncio.get_running_loop().create_task(self._drain())

    def start(self) -> None:
        """Starts writing rows (the app's start-up, once its tables exist); events
        recorded before wait for it."""
        self._running = True
        if self._sessions is not None and self._pending:
            self._writer = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        """Writes the queued events until none is left; waits out an outage."""
        while self._pending:
            if not await self.flush():
                await asyncio.sleep(RETRY_S)

    async def flush(self) -> bool:
        """Writes what is queued now (in batches); False when the database refused."""
        assert self._sessions is not None
        while self._pending:
            batch = [self._pending[i] for i in range(min(BATCH, len(self._pending)))]
            try:
                async with self._sessions() as session, session.begin():
                    await rows.add_events(session, batch)
            except (SQLAlchemyError, OSError) as error:
                log.warning(
                    "audit events not stored yet (%d waiting): %s",
                    len(self._pending),
                    type(error).__name__,
                )
                return False
            for _ in batch:
                self._pending.popleft()
        if self._dropped:
            log.error("%d audit events dropped: the database was unreachable", self._dropped)
            self._dropped = 0
        return True

    async def stop(self) -> None:
        """Writes the events still queued (one try) and stops the writer."""
        self._running = False
        writer, self._writer = self._writer, None
        if writer is not None:
            await asyncio.wait({writer}, timeout=STOP_WAIT_S)  # a batch in flight lands
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer
        if self._sessions is not None and self._pending:
            await self.flush()

    def denied(self, principal: object | None, route: str, outcome: str) -> None:
        """A refused request (401 / 403); ``principal`` is the caller when it was
        identified (a 403), else None."""
        self.record(
            "denied",
            tenant=getattr(principal, "tenant", None),
            key_id=getattr(principal, "key_id", None),
            route=route,
            outcome=outcome,
        )
