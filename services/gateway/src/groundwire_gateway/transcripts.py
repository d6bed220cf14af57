"""Each answer recorded as it ends, and the callers' view of the stored ones.

A chat learns its answer id and conversation id when admitted (:func:`begin`: a
conversation id the caller sent must be one it may read, else 404 before any work),
sends them in its ``done`` event, and is written by ``ChatSession.close`` after the
last event has gone out: storing never delays an answer, and a failed write is logged,
never raised (the answer was already sent). Who may read what is
``db.conversations.Reader``'s one rule, derived here from the request's principal.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from dataclasses import dataclass

from groundwire_core.errors import NotFound, Unavailable
from groundwire_gateway import models
from groundwire_gateway.auth import Principal
from groundwire_gateway.db.conversations import ConversationStore, Reader, Turn
from groundwire_gateway.state import GatewayState

log = logging.getLogger("groundwire.gateway.transcripts")

def store_of(state: GatewayState) -> ConversationStore | None:
    """The app's conversations store (over its system of record), or None without one."""
    return state.conversations


MAX_END_USER_CHARS = 200
"""Longer end-user ids (a token's claim has no bound) are kept as their SHA-256."""


def _end_user_id(user: str) -> str:
    if len(user) <= MAX_END_USER_CHARS:
        return user
    return "sha256:" + hashlib.sha256(user.encode()).hexdigest()


def reader_of(principal: Principal) -> Reader:
    """The conversations reader a request's principal is."""
    return Reader(
        tenant=principal.tenant,
        key_id=principal.key_id or "",
        end_user=_end_user_id(principal.end_user.user) if principal.end_user is not None else None,
        client=principal.client,
        everyone=principal.operator,
    )


def new_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Recording:
    """What a chat will be stored as, decided at admission."""

    store: ConversationStore
    reader: Reader
    answer_id: str
    conversation_id: str
    collection: str
    via: str
    question: str
    started: float
    """time.perf_counter() at admission: the latency runs from here to the done event."""

    def turn(
        self,
        answer: str,
        mode: str,
        citations: models.CitationsEvent | None,
        stages: list[models.StageOut],
        latency_ms: float,
    ) -> Turn:
        return Turn(
            answer_id=self.answer_id,
            conversation_id=self.conversation_id,
            collection=self.collection,
            via=self.via,
            question=self.question,
            answer=answer,
            mode=mode,
            sources=[s.model_dump(mode="json") for s in citations.sources] if citations else [],
            citations=[c.model_dump(mode="json") for c in citations.citations] if citations else [],
            withheld=[w.model_dump(mode="json") for w in citations.withheld] if citations else [],
            stages=[s.model_dump(mode="json") for s in stages],
            latency_ms=round(latency_ms, 1),
            created_at=self.store.now(),
        )


async def begin(
    store: ConversationStore | None,
    principal: Principal,
    collection: str,
    question: str,
    *,
    via: str,
    conversation_id: str | None = None,
) -> Recording | None:
    """The recording of a chat about to start; None when nothing is stored (retention
    0, or the database cannot check ``conversation_id``). Raises NotFound for a
    ``conversation_id`` the caller may not read (as a missing one)."""
    if store is None or not store.enabled:
        return None
    reader = reader_of(principal)
    if conversation_id is not None:
        try:
            owned = await store.owns(reader, conversation_id)
        except Unavailable:
            # the answer matters more than its record: answer, unrecorded
            log.exception("conversation %s not checked: this answer is not stored", conversation_id)
            return None
        if not owned:
            raise NotFound("conversation not found")
    return Recording(
        store=store,
        reader=reader,
        answer_id=new_id(),
        conversation_id=conversation_id or new_id(),
        collection=collection,
        via=via,
        question=question,
        started=time.perf_counter(),
    )
