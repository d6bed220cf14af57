"""Conversations, answers and feedback on SQLite and a real PostgreSQL: who reads what,
ratings, the report's groupings, retention, and the upgrade from revision g0001 keeping
its rows (issue 29, acceptance 6)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from groundwire_cli import records
from groundwire_core.database import (
    create_engine,
    current_revision,
    head_revision,
    session_factory,
    upgrade,
)
from groundwire_core.errors import Unavailable
from groundwire_gateway.db import audit, keys
from groundwire_gateway.db.base import MIGRATIONS, Base
from groundwire_gateway.db.conversations import ConversationStore, Reader, Turn, question_key

ALICE = Reader("acme", key_id="k-acme", end_user="alice")
BOB = Reader("acme", key_id="k-acme", end_user="bob")
ACME_APP = Reader("acme", key_id="k-acme")  # the tenant's key, no end user
GLOBEX = Reader("globex", key_id="k-globex")
ANON_HERE = Reader("public", client="ip:10.0.0.1")
ANON_THERE = Reader("public", client="ip:10.0.0.2")
OPERATOR = Reader("ops", key_id="static:ops", everyone=True)

SUPPORTED = [{"number": 1, "sentence": "Use pip [1].", "status": "supported", "support": 0.9}]
SOURCES = [{"number": 1, "source_id": "install.md", "title": "Install", "text": "pip install"}]


def turn(
    answer_id: str,
    conversation_id: str,
    question: str = "How do I install it?",
    *,
    mode: str = "generated",
    citations: list[dict[str, object]] | None = None,
    withheld: list[dict[str, object]] | None = None,
    at: float = 1_000.0,
    collection: str = "docs",
) -> Turn:
    return Turn(
        answer_id=answer_id,
        conversation_id=conversation_id,
        collection=collection,
        via="chat",
        question=question,
        answer="Run pip install groundwire [1].",
        mode=mode,
        sources=SOURCES,
        citations=SUPPORTED if citations is None else citations,
        withheld=withheld or [],
        stages=[{"name": "retrieval", "ms": 3.0, "fallback": False}],
        latency_ms=42.5,
        created_at=at,
    )


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    await upgrade(engine, MIGRATIONS)
    try:
        yield engine
    finally:
        await engine.dispose()


def store_on(engine: AsyncEngine, clock: Clock, retention_days: int = 30) -> ConversationStore:
    return ConversationStore(session_factory(engine), retention_days, clock=clock)


async def test_the_migration_matches_the_conversation_tables(engine: AsyncEngine) -> None:
    mine = {"gateway_conversations", "gateway_answers", "gateway_feedback"}

    def only_mine(obj: object, name: str | None, kind: str, *_: object) -> bool:
        table = name if kind == "table" else getattr(getattr(obj, "table", None), "name", None)
        return table in mine

    def diff(connection: Connection) -> list[object]:
        context = MigrationContext.configure(
            connection,
            opts={
                "version_table": MIGRATIONS.version_table,
                "compare_type": True,
                "include_object": only_mine,
            },
        )
        return list(compare_metadata(context, Base.metadata))

    async with engine.connect() as conn:
        assert await conn.run_sync(diff) == []


async def test_each_caller_reads_only_what_the_rule_gives_it(engine: AsyncEngine) -> None:
    store = store_on(engine, Clock(1_000.0))
    assert await store.record(ALICE, turn("a1", "c-alice"))
    assert await store.record(ALICE, turn("a2", "c-alice", "And on Windows?", at=1_001.0))
    assert await store.record(BOB, turn("b1", "c-bob", at=1_002.0))
    assert await store.record(GLOBEX, turn("g1", "c-globex", at=1_003.0))
    assert await store.record(ANON_HERE, turn("p1", "c-anon", at=1_004.0))

    async def ids(reader: Reader) -> list[str]:
        return [c.id for c in await store.conversations(reader)]

    assert await ids(ALICE) == ["c-alice"]
    assert await ids(BOB) == ["c-bob"]
    assert await ids(ACME_APP) == ["c-bob", "c-alice"]  # newest first
    assert await ids(GLOBEX) == ["c-globex"]
    assert await ids(ANON_HERE) == ["c-anon"]
    assert await ids(ANON_THERE) == []
    assert await ids(OPERATOR) == ["c-anon", "c-globex", "c-bob", "c-alice"]
    listed = (await store.conversations(ALICE))[0]
    assert (listed.turns, listed.title, listed.updated_at) == (2, "How do I install it?", 1_001.0)

    found = await store.conversation(ALICE, "c-alice")
    assert found is not None
    conversation, answers = found
    assert [a.id for a in answers] == ["a1", "a2"] and conversation.turns == 2
    assert answers[0].citations == SUPPORTED and answers[0].sources == SOURCES
    assert answers[0].latency_ms == 42.5 and answers[0].stages[0]["name"] == "retrieval"
    for outsider in (BOB, GLOBEX, ANON_HERE, Reader("globex", key_id="k2", end_user="alice")):
        assert await store.conversation(outsider, "c-alice") is None
        assert not await store.owns(outsider, "c-alice")
    assert await store.owns(ACME_APP, "c-alice")


async def test_ratings_are_one_per_rater_and_only_on_readable_answers(engine: AsyncEngine) -> None:
    store = store_on(engine, Clock(2_000.0))
    await store.record(ALICE, turn("a1", "c1"))
    assert await store.rate(BOB, "a1", "down", "not mine") is None
    assert await store.rate(GLOBEX, "a1", "down", "") is None
    assert await store.rate(ALICE, "missing", "down", "") is None
    first = await store.rate(ALICE, "a1", "up", "")
    assert first is not None and first.rating == "up"
    await store.rate(ALICE, "a1", "down", "the flag is --user")  # changes her mind
    await store.rate(ACME_APP, "a1", "down", "")
    found = await store.conversation(ALICE, "c1")
    assert found is not None and found[1][0].rating == "down"
    report = await store.report("docs", "acme")
    assert (report.rated_up, report.rated_down) == (0, 2)
    assert report.marked_wrong[0].answer_ids == ["a1"]
    assert report.marked_wrong[0].comments == ["the flag is --user"]


async def test_the_report_groups_questions_per_collection_and_tenant(engine: AsyncEngine) -> None:
    store = store_on(engine, Clock(3_000.0))
    await store.record(ALICE, turn("a1", "c1", "How do I install it?", at=1.0))
    await store.record(BOB, turn("a2", "c2", "how do I  install it", at=2.0))
    await store.record(BOB, turn("a3", "c2", "What is the meaning of life?", mode="declined"))
    await store.record(
        ALICE, turn("a4", "c1", "Does it run on ARM?", citations=[], mode="extractive", at=4.0)
    )
    await store.record(
        ALICE,
        turn("a5", "c1", "Which ports?", withheld=[{"sentence": "Port 80.", "numbers": [2]}]),
    )
    await store.record(GLOBEX, turn("g1", "cg", "How do I install it?"))
    await store.record(ALICE, turn("o1", "c3", "How do I install it?", collection="other"))
    await store.rate(ALICE, "a4", "down", "it does")

    report = await store.report("docs", "acme")
    assert report.answers == 5
    assert (
        report.most_asked[0].question.lower().startswith("how do i"),
        report.most_asked[0].count,
    ) == (
        True,
        2,
    )
    assert [(e.question, e.count) for e in report.declined] == [("What is the meaning of life?", 1)]
    assert sorted(e.question for e in report.low_evidence) == [
        "Does it run on ARM?",
        "Which ports?",
    ]
    assert [(e.question, e.count, e.answer_ids) for e in report.marked_wrong] == [
        ("Does it run on ARM?", 1, ["a4"])
    ]
    everyone = await store.report("docs", None)
    assert everyone.answers == 6 and everyone.most_asked[0].count == 3
    assert (await store.report("docs", "globex")).answers == 1
    assert question_key(" How do I\tinstall it?? ") == "how do i install it"


async def test_retention_prunes_old_rows_and_zero_stores_nothing(engine: AsyncEngine) -> None:
    clock = Clock(100 * 86_400.0)
    then = store_on(engine, Clock(clock.now - 31 * 86_400), retention_days=30)
    await then.record(ALICE, turn("old", "c-old", at=clock.now - 31 * 86_400))
    assert await then.rate(ALICE, "old", "down", "") is not None
    store = store_on(engine, clock, retention_days=30)
    await store.record(ALICE, turn("new", "c-new", at=clock.now - 86_400))  # prunes, once
    assert [c.id for c in await store.conversations(ALICE)] == ["c-new"]
    assert (await store.report("docs", "acme")).rated_down == 0
    await then.record(ALICE, turn("old2", "c-old", at=clock.now - 40 * 86_400))
    assert await store.prune_if_due() == 0  # not due again within the hour
    assert await store.prune() == 1

    off = store_on(engine, clock, retention_days=0)
    assert not off.enabled
    assert not await off.record(ALICE, turn("never", "c-never", at=clock.now))
    assert await store.conversation(ALICE, "c-never") is None


async def test_a_failing_database_is_unavailable_to_readers_and_logged_for_writers(
    database_url: str,
) -> None:
    engine = create_engine(database_url)  # never migrated: the tables are missing
    try:
        store = store_on(engine, Clock(1.0))
        assert not await store.record(ALICE, turn("a1", "c1"))
        with pytest.raises(Unavailable) as caught:
            await store.conversations(ALICE)
        assert caught.value.dependency == "database"
    finally:
        await engine.dispose()


async def test_upgrading_from_g0001_keeps_its_rows(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        await upgrade(engine, MIGRATIONS, "g0001")
        assert await current_revision(engine, MIGRATIONS) == "g0001"
        sessions = session_factory(engine)
        event = audit.AuditEvent(6.0, "key_created", "acme", "0000abcd", "/v1/admin/keys", "ok")
        record = keys.KeyRecord("0000abcd", "acme", "admin", frozenset({"docs"}), "d" * 64, 5.0)
        async with sessions() as s, s.begin():
            await keys.add_key(s, record)
            await audit.add_events(s, [event])

        await upgrade(engine, MIGRATIONS)
        assert await current_revision(engine, MIGRATIONS) == head_revision(MIGRATIONS) == "g0002"
        async with sessions() as s:
            kept = await keys.find_key(s, "d" * 64)
            audited = await audit.recent_events(s, "acme")
        assert kept == record
        assert audited == [event]
        store = store_on(engine, Clock(time.time()))
        assert await store.record(ALICE, turn("a1", "c1", at=time.time()))
        assert await store.rate(ALICE, "a1", "down", "") is not None
        assert [c.id for c in await store.conversations(ALICE)] == ["c1"]
    finally:
        await engine.dispose()


async def test_a_backup_restores_conversations_and_takes_new_ratings(
    engine: AsyncEngine, database_url: str, tmp_path: Path
) -> None:
    store = store_on(engine, Clock(time.time()))
    await store.record(ALICE, turn("a1", "c1", at=time.time()))
    await store.rate(ALICE, "a1", "down", "wrong flag")
    (gateway,) = [o for o in records.OWNERS if o.name == "gateway"]
    dumped = tmp_path / "dump"
    dumped.mkdir()
    taken = await records.dump(gateway, database_url, dumped)
    assert taken["rows"]["gateway_feedback"] == 1
    restored_url = f"sqlite:///{tmp_path / 'restored.sqlite3'}"
    await records.load(gateway, restored_url, dumped, taken["revision"])
    restored = create_engine(restored_url)
    try:
        again = store_on(restored, Clock(time.time()))
        found = await again.conversation(ALICE, "c1")
        assert found is not None and found[1][0].rating == "down"
        assert await again.rate(ACME_APP, "a1", "down", "") is not None  # no key collides
        report = await again.report("docs", "acme")
        assert report.rated_down == 2 and report.marked_wrong[0].comments == ["wrong flag"]
    finally:
        await restored.dispose()
