"""Audit events: admin actions and refused requests, one structured record each.

Each event is one line on the ``groundwire.audit`` logger whose message is a JSON
object — ``event``, ``tenant``, ``key_id``, ``route``, ``outcome``, ``request_id`` and
an optional ``detail`` — so it parses the same under text or JSON logging, and it is
counted in ``groundwire_gateway_audit_events{event,outcome}``. A key never appears: the
key id is its public part, and ``detail`` carries names (a collection, a revoked key's
id), never a secret.
"""

from __future__ import annotations

import json
import logging

from prometheus_client import Counter

from groundwire_core.context import current_request_id

log = logging.getLogger("groundwire.audit")


class Auditor:
    """Writes audit events and counts them in ``counter`` (labels: event, outcome)."""

    def __init__(self, counter: Counter | None = None) -> None:
        self._counter = counter

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
