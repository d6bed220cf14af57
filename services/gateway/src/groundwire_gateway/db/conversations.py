"""Conversations, answers and feedback: the only code that reads or writes their tables.

Who may read a conversation is one rule, :meth:`Reader.clause`, applied inside every
query that returns conversation rows (a row another caller may not read is never
loaded, so "not yours" and "does not exist" are the same answer):

- the operator reads every tenant's;
- a caller with an end-user token reads its own (same tenant, same end user);
- a caller with an API key and no end-user token reads its tenant's;
- a caller with neither (no key required) reads what was asked from its own client
  address without a key or a token.

Retention: rows older than ``retention_days`` are deleted by :meth:`ConversationStore.prune`
(at most once an hour, after a write); ``retention_days = 0`` stores nothing at all.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from sqlalchemy import ColumnElement, and_, delete, func, select, true
from sqlalchemy.exc import SQLAlchemyError

from groundwire_core.database import AsyncSession, SessionFactory
from groundwire_core.errors import Unavailable
from groundwire_gateway.db.conversation_tables import AnswerRow, ConversationRow, FeedbackRow

log = logging.getLogger("groundwire.gateway.conversations")

Rating = Literal["up", "down"]
SECONDS_PER_DAY = 86_400
PRUNE_EVERY_S = 3_600.0
TITLE_CHARS = 200
KEY_CHARS = 200
COMMENTS_PER_ENTRY = 5
ANSWERS_PER_ENTRY = 5
EVIDENCE_STATUSES = ("supported", "quoted")
"""Citation statuses that count as evidence (similar/unrelated are relevance only)."""
_SPACE = re.compile(r"\s+")


def question_key(question: str) -> str:
    """What the report groups questions by: case, spacing and end punctuation ignored."""
    return _SPACE.sub(" ", question).strip().rstrip("?!.;: ").casefold()[:KEY_CHARS]


@dataclass(frozen=True)
class Reader:
    """Who asks to read (or rate) conversations: from the request's principal."""

    tenant: str
    key_id: str = ""
    """The API key's id; empty without a key."""
    end_user: str | None = None
    """The verified end user; None without an end-user token."""
    client: str = ""
    """The client address (``ip:…``): what an anonymous caller's conversations are by."""
    everyone: bool = False
    """The operator: every tenant's conversations."""

    @property
    def anonymous(self) -> bool:
        return not self.key_id and self.end_user is None

    def owner(self, collection: str) -> dict[str, str]:
        """The owner columns of a conversation this caller starts."""
        return {
            "tenant": self.tenant,
            "end_user": self.end_user or "",
            "key_id": self.key_id,
            "client": self.client if self.anonymous else "",
            "collection": collection,
        }

    @property
    def rater(self) -> str:
        """The identity one rating per answer is kept for."""
        who = self.client if self.anonymous else ""
        return f"{self.tenant}|{self.key_id}|{self.end_user or ''}|{who}"[:512]

    def clause(self) -> ColumnElement[bool]:
        """The SQL condition on ConversationRow of what this caller may read."""
        if self.everyone:
            return true()
        same_tenant = ConversationRow.tenant == self.tenant
        if self.end_user is not None:
            return and_(same_tenant, ConversationRow.end_user == self.end_user)
        if self.key_id:
            return same_tenant
        return and_(
            same_tenant,
            ConversationRow.key_id == "",
            ConversationRow.end_user == "",
            ConversationRow.client == self.client,
        )


@dataclass(frozen=True)
class Turn:
    """One answer to record (built by the gateway when a chat ends)."""

    answer_id: str
    conversation_id: str
    collection: str
    via: str
    """chat, completions or mcp."""
    question: str
    answer: str
    mode: str
    sources: list[dict[str, Any]]
    citations: list[dict[str, Any]]
    withheld: list[dict[str, Any]]
    stages: list[dict[str, Any]]
    latency_ms: float
    created_at: float

    @property
    def supported(self) -> int:
        """Citations with evidence: supported (judged by meaning) or quoted (verbatim)."""
        return sum(1 for c in self.citations if c.get("status") in EVIDENCE_STATUSES)

    @property
    def low_evidence(self) -> bool:
        """An answer (not a decline) with no citation that has evidence, or with a
        sentence withheld."""
        return self.mode != "declined" and (self.supported == 0 or bool(self.withheld))


@dataclass(frozen=True)
class ConversationRecord:
    id: str
    tenant: str
    end_user: str
    collection: str
    title: str
    created_at: float
    updated_at: float
    turns: int = 0


@dataclass(frozen=True)
class AnswerRecord:
    id: str
    conversation_id: str
    collection: str
    via: str
    question: str
    answer: str
    mode: str
    sources: list[dict[str, Any]]
    citations: list[dict[str, Any]]
    withheld: list[dict[str, Any]]
    stages: list[dict[str, Any]]
    low_evidence: bool
    latency_ms: float
    created_at: float
    rating: str | None = None
    """This reader's own rating of it, if any."""


@dataclass(frozen=True)
class FeedbackRecord:
    answer_id: str
    rating: str
    comment: str
    created_at: float


@dataclass(frozen=True)
class ReportEntry:
    question: str
    count: int
    last_at: float
    answer_ids: list[str] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Report:
    collection: str
    answers: int
    rated_up: int
    rated_down: int
    most_asked: list[ReportEntry]
    declined: list[ReportEntry]
    low_evidence: list[ReportEntry]
    marked_wrong: list[ReportEntry]


# --- queries (each takes a session; the caller owns the transaction) ---------------------


async def record_turn(session: AsyncSession, reader: Reader, turn: Turn) -> None:
    """Adds one answer, creating its conversation on the first (owned by ``reader``)."""
    conversation = await session.get(ConversationRow, turn.conversation_id)
    if conversation is None:
        session.add(
            ConversationRow(
                id=turn.conversation_id,
                title=_SPACE.sub(" ", turn.question).strip()[:TITLE_CHARS],
                created_at=turn.created_at,
                updated_at=turn.created_at,
                **reader.owner(turn.collection),
            )
        )
        await session.flush()
    else:
        conversation.updated_at = max(conversation.updated_at, turn.created_at)
    session.add(
        AnswerRow(
            id=turn.answer_id,
            conversation_id=turn.conversation_id,
            tenant=conversation.tenant if conversation is not None else reader.tenant,
            collection=turn.collection,
            via=turn.via,
            question=turn.question,
            question_key=question_key(turn.question),
            answer=turn.answer,
            mode=turn.mode,
            sources=turn.sources,
            citations=turn.citations,
            withheld=turn.withheld,
            stages=turn.stages,
            supported=turn.supported,
            low_evidence=turn.low_evidence,
            latency_ms=turn.latency_ms,
            created_at=turn.created_at,
        )
    )


def _conversation(row: ConversationRow, turns: int = 0) -> ConversationRecord:
    return ConversationRecord(
        id=row.id,
        tenant=row.tenant,
        end_user=row.end_user,
        collection=row.collection,
        title=row.title,
        created_at=row.created_at,
        updated_at=row.updated_at,
        turns=turns,
    )


async def find_conversation(
    session: AsyncSession, reader: Reader, conversation_id: str
) -> ConversationRecord | None:
    """The conversation if it exists and ``reader`` may read it, else None."""
    row = (
        await session.execute(
            select(ConversationRow).where(ConversationRow.id == conversation_id, reader.clause())
        )
    ).scalar_one_or_none()
    return _conversation(row) if row is not None else None


async def list_conversations(
    session: AsyncSession, reader: Reader, *, collection: str | None = None, limit: int = 50
) -> list[ConversationRecord]:
    """The reader's conversations, most recently updated first, with their turn counts."""
    turns = (
        select(AnswerRow.conversation_id, func.count(AnswerRow.id).label("n"))
        .group_by(AnswerRow.conversation_id)
        .subquery()
    )
    query = (
        select(ConversationRow, func.coalesce(turns.c.n, 0))
        .outerjoin(turns, turns.c.conversation_id == ConversationRow.id)
        .where(reader.clause())
        .order_by(ConversationRow.updated_at.desc(), ConversationRow.id)
        .limit(limit)
    )
    if collection is not None:
        query = query.where(ConversationRow.collection == collection)
    return [_conversation(row, int(n)) for row, n in (await session.execute(query)).all()]


async def conversation_answers(
    session: AsyncSession, reader: Reader, conversation_id: str
) -> tuple[ConversationRecord, list[AnswerRecord]] | None:
    """A conversation the reader may read and its answers in order (with the reader's
    own ratings), or None."""
    found = await find_conversation(session, reader, conversation_id)
    if found is None:
        return None
    rows = (
        await session.execute(
            select(AnswerRow)
            .where(AnswerRow.conversation_id == conversation_id)
            .order_by(AnswerRow.created_at, AnswerRow.id)
        )
    ).scalars()
    answers = list(rows)
    ratings: dict[str, str] = {}
    if answers:
        ratings = {
            answer_id: rating
            for answer_id, rating in (
                await session.execute(
                    select(FeedbackRow.answer_id, FeedbackRow.rating).where(
                        FeedbackRow.answer_id.in_([a.id for a in answers]),
                        FeedbackRow.rater == reader.rater,
                    )
                )
            ).all()
        }
    records = [
        AnswerRecord(
            id=a.id,
            conversation_id=a.conversation_id,
            collection=a.collection,
            via=a.via,
            question=a.question,
            answer=a.answer,
            mode=a.mode,
            sources=a.sources,
            citations=a.citations,
            withheld=a.withheld,
            stages=a.stages,
            low_evidence=a.low_evidence,
            latency_ms=a.latency_ms,
            created_at=a.created_at,
            rating=ratings.get(a.id),
        )
        for a in answers
    ]
    return replace(found, turns=len(records)), records


async def rate(
    session: AsyncSession,
    reader: Reader,
    answer_id: str,
    rating: Rating,
    comment: str,
    now: float,
) -> FeedbackRecord | None:
    """Records (or replaces) the reader's rating of an answer it may read; None when the
    answer does not exist or its conversation is not the reader's."""
    owner = (
        await session.execute(
            select(ConversationRow.tenant)
            .join(AnswerRow, AnswerRow.conversation_id == ConversationRow.id)
            .where(AnswerRow.id == answer_id, reader.clause())
        )
    ).scalar_one_or_none()
    if owner is None:
        return None
    existing = (
        await session.execute(
            select(FeedbackRow).where(
                FeedbackRow.answer_id == answer_id, FeedbackRow.rater == reader.rater
            )
        )
    ).scalar_one_or_none()
    if existing is None:
        session.add(
            FeedbackRow(
                answer_id=answer_id,
                tenant=owner,
                rater=reader.rater,
                rating=rating,
                comment=comment,
                created_at=now,
            )
        )
    else:
        existing.rating, existing.comment, existing.created_at = rating, comment, now
    return FeedbackRecord(answer_id, rating, comment, now)


async def report(
    session: AsyncSession, collection: str, tenant: str | None, *, limit: int = 20
) -> Report:
    """What a docs team should read next about ``collection``: the most-asked questions,
    the declined ones, the low-evidence ones and the ones rated down, each grouped by
    question with counts. ``tenant`` None = every tenant's answers (the operator)."""
    scope = [AnswerRow.collection == collection]
    if tenant is not None:
        scope.append(AnswerRow.tenant == tenant)

    async def grouped(*extra: ColumnElement[bool]) -> list[ReportEntry]:
        rows = await session.execute(
            select(
                AnswerRow.question_key,
                func.count(AnswerRow.id),
                func.max(AnswerRow.created_at),
                func.max(AnswerRow.question),
            )
            .where(*scope, *extra)
            .group_by(AnswerRow.question_key)
            .order_by(func.count(AnswerRow.id).desc(), func.max(AnswerRow.created_at).desc())
            .limit(limit)
        )
        return [ReportEntry(q, int(n), float(last)) for _, n, last, q in rows.all()]

    total = (await session.execute(select(func.count(AnswerRow.id)).where(*scope))).scalar_one()
    ratings = dict(
        (
            await session.execute(
                select(FeedbackRow.rating, func.count(FeedbackRow.answer_id))
                .join(AnswerRow, AnswerRow.id == FeedbackRow.answer_id)
                .where(*scope)
                .group_by(FeedbackRow.rating)
            )
        ).all()
    )
    down = [*scope, FeedbackRow.rating == "down"]
    wrong_rows = (
        await session.execute(
            select(
                AnswerRow.question_key,
                func.count(FeedbackRow.answer_id),
                func.max(FeedbackRow.created_at),
                func.max(AnswerRow.question),
            )
            .join(AnswerRow, AnswerRow.id == FeedbackRow.answer_id)
            .where(*down)
            .group_by(AnswerRow.question_key)
            .order_by(
                func.count(FeedbackRow.answer_id).desc(), func.max(FeedbackRow.created_at).desc()
            )
            .limit(limit)
        )
    ).all()
    keys = [key for key, *_ in wrong_rows]
    details: dict[str, tuple[list[str], list[str]]] = {key: ([], []) for key in keys}
    if keys:
        for key, answer_id, comment in (
            await session.execute(
                select(AnswerRow.question_key, FeedbackRow.answer_id, FeedbackRow.comment)
                .join(AnswerRow, AnswerRow.id == FeedbackRow.answer_id)
                .where(*down, AnswerRow.question_key.in_(keys))
                .order_by(FeedbackRow.created_at.desc(), FeedbackRow.rater)
            )
        ).all():
            answer_ids, comments = details[key]
            if answer_id not in answer_ids and len(answer_ids) < ANSWERS_PER_ENTRY:
                answer_ids.append(answer_id)
            if comment and len(comments) < COMMENTS_PER_ENTRY:
                comments.append(comment)
    return Report(
        collection=collection,
        answers=int(total),
        rated_up=int(ratings.get("up", 0)),
        rated_down=int(ratings.get("down", 0)),
        most_asked=await grouped(),
        declined=await grouped(AnswerRow.mode == "declined"),
        low_evidence=await grouped(AnswerRow.low_evidence.is_(True), AnswerRow.mode != "declined"),
        marked_wrong=[
            ReportEntry(q, int(n), float(last), *details[key]) for key, n, last, q in wrong_rows
        ],
    )


async def prune(session: AsyncSession, before: float) -> int:
    """Deletes answers (and their feedback) created before ``before`` and conversations
    not updated since; returns how many answers went."""
    old = select(AnswerRow.id).where(AnswerRow.created_at < before)
    await session.execute(delete(FeedbackRow).where(FeedbackRow.answer_id.in_(old)))
    gone = await session.execute(delete(AnswerRow).where(AnswerRow.created_at < before))
    await session.execute(delete(ConversationRow).where(ConversationRow.updated_at < before))
    return int(getattr(gone, "rowcount", 0) or 0)


# --- the store the gateway holds --------------------------------------------------------


class ConversationStore:
    """The conversations repository over one session factory, with the retention.

    Reads raise Unavailable (dependency ``database``) when the database fails;
    :meth:`record` never raises: a chat's answer is already sent when it is stored.
    """

    def __init__(
        self,
        sessions: SessionFactory,
        retention_days: int,
        *,
        clock: Callable[[], float] = time.time,
        prune_every_s: float = PRUNE_EVERY_S,
    ) -> None:
        self._sessions = sessions
        self.retention_days = retention_days
        self._clock = clock
        self._prune_every_s = prune_every_s
        self._pruned_at: float | None = None

    @property
    def enabled(self) -> bool:
        """Whether answers are stored at all (retention 0 = off)."""
        return self.retention_days > 0

    def now(self) -> float:
        return self._clock()

    async def record(self, reader: Reader, turn: Turn) -> bool:
        """Stores one answer; False (and a log line) when it could not."""
        if not self.enabled:
            return False
        try:
            async with self._sessions() as session, session.begin():
                await record_turn(session, reader, turn)
        except Exception:  # the answer was already sent: whatever failed, log it
            log.exception("the answer %s was not stored", turn.answer_id)
            return False
        await self.prune_if_due()
        return True

    async def prune_if_due(self) -> int:
        now = self._clock()
        if self._pruned_at is not None and now - self._pruned_at < self._prune_every_s:
            return 0
        self._pruned_at = now
        try:
            return await self.prune()
        except Unavailable:
            log.exception("old conversations were not pruned")
            return 0

    async def prune(self) -> int:
        """Deletes what is older than the retention; returns the answers deleted."""
        if not self.enabled:
            return 0
        before = self._clock() - self.retention_days * SECONDS_PER_DAY
        async with self._unit() as session:
            return await prune(session, before)

    @asynccontextmanager
    async def _unit(self) -> AsyncIterator[AsyncSession]:
        """One transaction; a database failure becomes Unavailable (dependency database)."""
        try:
            async with self._sessions() as session, session.begin():
                yield session
        except (SQLAlchemyError, OSError) as exc:
            raise _unavailable(exc) from exc

    async def owns(self, reader: Reader, conversation_id: str) -> bool:
        async with self._unit() as session:
            return await find_conversation(session, reader, conversation_id) is not None

    async def conversations(
        self, reader: Reader, *, collection: str | None = None, limit: int = 50
    ) -> list[ConversationRecord]:
        async with self._unit() as session:
            return await list_conversations(session, reader, collection=collection, limit=limit)

    async def conversation(
        self, reader: Reader, conversation_id: str
    ) -> tuple[ConversationRecord, list[AnswerRecord]] | None:
        async with self._unit() as session:
            return await conversation_answers(session, reader, conversation_id)

    async def rate(
        self, reader: Reader, answer_id: str, rating: Rating, comment: str
    ) -> FeedbackRecord | None:
        async with self._unit() as session:
            return await rate(session, reader, answer_id, rating, comment, self._clock())

    async def report(self, collection: str, tenant: str | None, *, limit: int = 20) -> Report:
        async with self._unit() as session:
            return await report(session, collection, tenant, limit=limit)


def _unavailable(exc: BaseException) -> Unavailable:
    return Unavailable(f"the system of record failed ({type(exc).__name__})", dependency="database")
