"""Ingest and sync jobs in the system of record: the repository of the job tables.

Three tables, one family:

- ``retriever_jobs``: a job's owner (tenant), collection, kind, state, times, counts,
  error, sync delta, options, and while it runs the worker holding it and that worker's
  last heartbeat. At most one job of a collection is ``running`` at a time across every
  replica: a partial unique index enforces it, whatever a claim's query decides.
- ``retriever_job_documents``: a job's report, one row per document as it is done
  (committed with the job's counts in one transaction, so after a kill the report lists
  exactly what was applied, at most the one document whose switch landed just before).
- ``retriever_job_inputs``: a queued ingest job's documents, until the job ends.

Why a queued job's documents live in the database rather than on a volume every replica
mounts: one job's input is bounded by the gateway's upload limit (20 MiB by default) and
the gRPC message limit (64 MiB), and a tenant's queued bytes are capped
(``RetrieverSettings.max_queued_job_bytes_per_tenant``), so the rows stay small next to
what PostgreSQL stores routinely; it needs no ReadWriteMany volume (which most clusters'
default storage class cannot give), it is in the same transaction as the job row (a job
never exists without its documents, nor documents without their job), and the
deployment's one backup of the system of record holds the queue too. The rows are
deleted when the job ends.

A claim is one statement: ``UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED)`` on
PostgreSQL (replicas claiming at once skip each other's rows instead of waiting); SQLite
serialises writers, so the same single-statement UPDATE is atomic there. Only the oldest
queued job of a collection with no running job is a candidate, so jobs of a collection
run in the order they were started.

Only this module speaks SQL for jobs; the runner sees ``Job`` records.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    and_,
    delete,
    exists,
    func,
    select,
    text,
    update,
)
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import Mapped, aliased, mapped_column

from groundwire_core.database import AsyncSession, session_factory
from groundwire_core.errors import NotFound, Unavailable
from groundwire_retriever.db.base import Base
from groundwire_retriever.ingest.pipeline import DocumentInput
from groundwire_retriever.jobs.model import Job, JobCounts, JobDocument, JobKind, JobState
from groundwire_retriever.sync.report import Rename, SyncDelta

QUEUED, RUNNING = JobState.QUEUED.value, JobState.RUNNING.value
FINAL = (JobState.SUCCEEDED.value, JobState.FAILED.value, JobState.CANCELLED.value)

log = logging.getLogger("groundwire.retriever.jobs")


class JobRow(Base):
    __tablename__ = "retriever_jobs"
    __table_args__ = (
        Index("ix_retriever_jobs_collection", "collection", "created_at"),
        Index("ix_retriever_jobs_tenant", "tenant", "state"),
        Index("ix_retriever_jobs_state", "state", "created_at"),
        Index(
            "ux_retriever_jobs_one_running",
            "collection",
            unique=True,
            postgresql_where=text("state = 'running'"),
            sqlite_where=text("state = 'running'"),
        ),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64), nullable=False)
    """The owner: the collection's tenant when the job was started."""
    collection: Mapped[str] = mapped_column(String(255), nullable=False)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    state: Mapped[str] = mapped_column(String(16), nullable=False)
    created_at: Mapped[float] = mapped_column(Float, nullable=False)
    started_at: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    finished_at: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    counts: Mapped[str] = mapped_column(Text, nullable=False)
    """JobCounts as JSON."""
    error: Mapped[str] = mapped_column(Text, nullable=False, default="")
    delta: Mapped[str | None] = mapped_column(Text, nullable=True)
    """A sync job's SyncDelta as JSON (a rename as its pair [old, new])."""
    options: Mapped[str] = mapped_column(Text, nullable=False)
    """JSON: an ingest's create_collection/full_reindex, a sync's definition."""
    input_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    worker: Mapped[str] = mapped_column(String(64), nullable=False, default="")
    """The replica process running it ("" while queued)."""
    heartbeat_at: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)


class JobDocumentRow(Base):
    __tablename__ = "retriever_job_documents"

    job_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("retriever_jobs.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    source_id: Mapped[str] = mapped_column(Text, nullable=False)
    outcome: Mapped[str] = mapped_column(String(16), nullable=False)
    chunks: Mapped[int] = mapped_column(Integer, nullable=False)
    error: Mapped[str] = mapped_column(Text, nullable=False)


class JobInputRow(Base):
    __tablename__ = "retriever_job_inputs"

    job_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("retriever_jobs.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    content: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    fields: Mapped[str] = mapped_column(Text, nullable=False)
    """The DocumentInput's other fields as JSON."""


@dataclass(frozen=True)
class Claimed:
    """A job this worker now holds (state running), with what it runs on."""

    job: Job
    options: dict[str, Any]


@dataclass(frozen=True)
class Pending:
    """A tenant's unfinished jobs (queued and running) and their input bytes."""

    jobs: int
    input_bytes: int


class JobTables:
    """The job tables on one engine; every method is one transaction. Errors of the
    database come out as Unavailable (dependency ``database``)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._sessions = session_factory(engine)

    async def create(
        self,
        job: Job,
        tenant: str,
        options: dict[str, Any],
        documents: Sequence[DocumentInput] = (),
    ) -> None:
        """Records a queued job with its documents."""
        rows = [_input_row(job.id, seq, doc) for seq, doc in enumerate(documents)]
        async with self._unit() as session:
            session.add(
                JobRow(
                    id=job.id,
                    tenant=tenant,
                    collection=job.collection,
                    kind=job.kind.value,
                    state=job.state.value,
                    created_at=job.created_at,
                    started_at=0.0,
                    finished_at=0.0,
                    counts=_counts_json(job.counts),
                    error="",
                    delta=None,
                    options=json.dumps(options),
                    input_bytes=input_bytes(documents),
                    cancel_requested=False,
                    worker="",
                    heartbeat_at=0.0,
                )
            )
            await session.flush()
            session.add_all(rows)

    async def get(self, job_id: str, tenant: str = "") -> Job:
        """The job with its report; ``tenant``: only when it owns it. Raises NotFound."""
        async with self._unit() as session:
            row = await session.get(JobRow, job_id)
            if row is None or (tenant and row.tenant != tenant):
                raise NotFound(f"job {job_id!r} does not exist")
            docs = await session.scalars(
                select(JobDocumentRow)
                .where(JobDocumentRow.job_id == job_id)
                .order_by(JobDocumentRow.seq)
            )
            report = tuple(JobDocument(d.source_id, d.outcome, d.chunks, d.error) for d in docs)
            return _job(row, report)

    async def progress(self, job_id: str, tenant: str = "") -> Job:
        """The job without its report (what a watcher compares). Raises NotFound."""
        async with self._unit() as session:
            row = await session.get(JobRow, job_id)
            if row is None or (tenant and row.tenant != tenant):
                raise NotFound(f"job {job_id!r} does not exist")
            return _job(row, ())

    async def recent(self, collection: str = "", limit: int = 100, tenant: str = "") -> list[Job]:
        """Jobs newest first, without their reports."""
        query = select(JobRow)
        if collection:
            query = query.where(JobRow.collection == collection)
        if tenant:
            query = query.where(JobRow.tenant == tenant)
        query = query.order_by(JobRow.created_at.desc(), JobRow.id.desc()).limit(limit)
        async with self._unit() as session:
            return [_job(r, ()) for r in await session.scalars(query)]

    async def pending(self, tenant: str) -> Pending:
        """The tenant's queued and running jobs and their input bytes (its caps)."""
        query = select(func.count(), func.coalesce(func.sum(JobRow.input_bytes), 0)).where(
            JobRow.tenant == tenant, JobRow.state.in_((QUEUED, RUNNING))
        )
        async with self._unit() as session:
            count, total = (await session.execute(query)).one()
            return Pending(int(count), int(total))

    async def claim(self, worker: str, now: float) -> Claimed | None:
        """Takes a claimable queued job (the oldest queued of its collection, and no job
        of that collection running anywhere; between tenants, the fair share's next) for
        ``worker``; None when there
        is none. On PostgreSQL rows another replica is claiming are skipped, not waited
        for; the one-running index refuses a second running job of a collection."""
        j = aliased(JobRow)
        running = aliased(JobRow)
        older = aliased(JobRow)
        # A fair share between tenants: the tenant running the fewest jobs goes first,
        # then the one served least recently, then the oldest job. One tenant's queue
        # of many collections waits its turn behind another's single job.
        theirs, served = aliased(JobRow), aliased(JobRow)
        tenant_running = (
            select(func.count())
            .where(theirs.tenant == j.tenant, theirs.state == RUNNING)
            .scalar_subquery()
        )
        tenant_served = (
            select(func.coalesce(func.max(served.started_at), 0.0))
            .where(served.tenant == j.tenant)
            .scalar_subquery()
        )
        candidate = (
            select(j.id)
            .where(
                j.state == QUEUED,
                ~exists().where(running.collection == j.collection, running.state == RUNNING),
                ~exists().where(
                    older.collection == j.collection,
                    older.state == QUEUED,
                    (older.created_at < j.created_at)
                    | and_(older.created_at == j.created_at, older.id < j.id),
                ),
            )
            .order_by(tenant_running, tenant_served, j.created_at, j.id)
            .limit(1)
            .with_for_update(skip_locked=True)  # rendered on PostgreSQL only
            .scalar_subquery()
        )
        statement = (
            update(JobRow)
            .where(JobRow.id == candidate, JobRow.state == QUEUED)
            .values(state=RUNNING, worker=worker, started_at=now, heartbeat_at=now)
            .returning(JobRow.id)
            .execution_options(synchronize_session=False)
        )
        try:
            async with self._unit() as session:
                job_id = (await session.execute(statement)).scalar_one_or_none()
                if job_id is None:
                    return None
                row = await session.get(JobRow, job_id)
                assert row is not None
                return Claimed(_job(row, ()), json.loads(row.options))
        except _Conflict:
            return None  # another replica started a job of that collection first

    async def beat(self, job_id: str, worker: str, now: float) -> bool | None:
        """Renews ``worker``'s hold on a running job: its cancel flag, or None when the
        job is no longer this worker's (reaped, or finished elsewhere)."""
        async with self._unit() as session:
            found = await session.execute(
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.worker == worker, JobRow.state == RUNNING)
                .values(heartbeat_at=now)
                .returning(JobRow.cancel_requested)
                .execution_options(synchronize_session=False)
            )
            flag = found.scalar_one_or_none()
            return None if flag is None else bool(flag)

    async def record(
        self,
        job_id: str,
        worker: str,
        counts: JobCounts,
        doc: JobDocument | None,
        now: float,
        delta: SyncDelta | None = None,
    ) -> bool | None:
        """Saves a running job's counts (and delta), appends ``doc`` to its report, and
        renews the heartbeat, in one transaction: the cancel flag, or None when the job
        is no longer this worker's (nothing is written then)."""
        values: dict[str, Any] = {"counts": _counts_json(counts), "heartbeat_at": now}
        if delta is not None:
            values["delta"] = _delta_json(delta)
        async with self._unit() as session:
            found = await session.execute(
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.worker == worker, JobRow.state == RUNNING)
                .values(**values)
                .returning(JobRow.cancel_requested)
                .execution_options(synchronize_session=False)
            )
            flag = found.scalar_one_or_none()
            if flag is None:
                return None
            if doc is not None:
                session.add(
                    JobDocumentRow(
                        job_id=job_id,
                        seq=counts.done - 1,
                        source_id=doc.source_id,
                        outcome=doc.outcome,
                        chunks=doc.chunks,
                        error=doc.error,
                    )
                )
            return bool(flag)

    async def finish(
        self,
        job_id: str,
        worker: str,
        state: JobState,
        error: str,
        now: float,
        counts: JobCounts | None = None,
        delta: SyncDelta | None = None,
    ) -> bool:
        """Ends a running job held by ``worker`` (its input rows dropped); False when it
        was no longer this worker's (the reaper failed it meanwhile)."""
        values: dict[str, Any] = {
            "state": state.value,
            "error": error,
            "finished_at": now,
            "cancel_requested": False,
            "worker": "",
        }
        if counts is not None:
            values["counts"] = _counts_json(counts)
        if delta is not None:
            values["delta"] = _delta_json(delta)
        async with self._unit() as session:
            done = await session.execute(
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.worker == worker, JobRow.state == RUNNING)
                .values(**values)
                .returning(JobRow.id)
                .execution_options(synchronize_session=False)
            )
            if done.scalar_one_or_none() is None:
                return False
            await session.execute(delete(JobInputRow).where(JobInputRow.job_id == job_id))
            return True

    async def cancel(self, job_id: str, tenant: str, now: float, reason: str) -> Job:
        """A queued job ends cancelled at once; a running one gets its cancel flag (its
        worker, on whichever replica, stops at its next document boundary); a finished
        one is left as it is. ``tenant``: only a job it owns. Raises NotFound."""
        async with self._unit() as session:
            row = await session.get(JobRow, job_id, with_for_update=True)
            if row is None or (tenant and row.tenant != tenant):
                raise NotFound(f"job {job_id!r} does not exist")
            if row.state == QUEUED:
                row.state = JobState.CANCELLED.value
                row.finished_at = now
                row.error = reason
                await session.execute(delete(JobInputRow).where(JobInputRow.job_id == job_id))
            elif row.state == RUNNING:
                row.cancel_requested = True
        return await self.get(job_id)

    async def stale(self, before: float) -> list[Job]:
        """Running jobs whose worker's last heartbeat is older than ``before``."""
        query = select(JobRow).where(JobRow.state == RUNNING, JobRow.heartbeat_at < before)
        async with self._unit() as session:
            return [_job(r, ()) for r in await session.scalars(query)]

    async def reap(self, job_id: str, before: float, error: str, now: float) -> bool:
        """Fails a running job whose heartbeat is still older than ``before`` (its
        worker died); False when it beat meanwhile or ended."""
        async with self._unit() as session:
            done = await session.execute(
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.state == RUNNING, JobRow.heartbeat_at < before)
                .values(
                    state=JobState.FAILED.value,
                    error=error,
                    finished_at=now,
                    cancel_requested=False,
                    worker="",
                )
                .returning(JobRow.id)
                .execution_options(synchronize_session=False)
            )
            if done.scalar_one_or_none() is None:
                return False
            await session.execute(delete(JobInputRow).where(JobInputRow.job_id == job_id))
            return True

    async def inputs(self, job_id: str) -> list[DocumentInput]:
        """The documents an ingest job was started with, in order."""
        async with self._unit() as session:
            rows = await session.scalars(
                select(JobInputRow).where(JobInputRow.job_id == job_id).order_by(JobInputRow.seq)
            )
            return [_document(r) for r in rows]

    async def prune(self, keep: int) -> int:
        """Forgets finished jobs past the newest ``keep`` (their reports too); how many."""
        async with self._unit() as session:
            old = list(
                await session.scalars(
                    select(JobRow.id)
                    .where(JobRow.state.in_(FINAL))
                    .order_by(JobRow.created_at.desc(), JobRow.id.desc())
                    .offset(keep)
                )
            )
            for start in range(0, len(old), 500):
                batch = old[start : start + 500]
                await session.execute(
                    delete(JobDocumentRow).where(JobDocumentRow.job_id.in_(batch))
                )
                await session.execute(delete(JobInputRow).where(JobInputRow.job_id.in_(batch)))
                await session.execute(delete(JobRow).where(JobRow.id.in_(batch)))
            return len(old)

    @contextlib.asynccontextmanager
    async def _unit(self) -> AsyncIterator[AsyncSession]:
        """One session in one transaction; a database error as Unavailable, the
        one-running index's refusal as ``_Conflict``."""
        try:
            async with self._sessions() as session, session.begin():
                yield session
        except IntegrityError as exc:
            raise _Conflict() from exc
        except (SQLAlchemyError, OSError) as exc:
            # the driver's own words for the operator's log (never the statement, which
            # carries documents; never to a caller, whose message stays generic)
            cause = getattr(exc, "orig", None) or exc
            log.warning("job store: %s: %s", type(cause).__name__, str(cause)[:200])
            raise Unavailable(
                f"the job store cannot be read or written ({type(exc).__name__})",
                dependency="database",
            ) from exc


class _Conflict(Exception):
    """A unique index refused a write (a claim racing another replica's)."""


def input_bytes(documents: Sequence[DocumentInput]) -> int:
    """What a job's documents take in the queue (contents plus their text fields)."""
    return sum(
        len(d.content) + len(d.source_id) + len(d.title) + len(d.url) + len(d.filename)
        for d in documents
    )


def _input_row(job_id: str, seq: int, doc: DocumentInput) -> JobInputRow:
    fields = asdict(doc)
    del fields["content"]
    fields["access"] = list(doc.access)
    return JobInputRow(job_id=job_id, seq=seq, content=doc.content, fields=json.dumps(fields))


def _document(row: JobInputRow) -> DocumentInput:
    fields = json.loads(row.fields)
    fields["access"] = tuple(fields.get("access", ()))  # JSON has lists only
    return DocumentInput(content=bytes(row.content), **fields)


def _counts_json(counts: JobCounts) -> str:
    return json.dumps(asdict(counts))


def _delta_json(delta: SyncDelta) -> str:
    renamed = [[r.old, r.new] for r in delta.renamed]
    return json.dumps({**asdict(delta), "renamed": renamed})


def _job(row: JobRow, documents: tuple[JobDocument, ...]) -> Job:
    found_delta = None
    if row.delta is not None:
        raw = json.loads(row.delta)
        found_delta = SyncDelta(
            new=tuple(raw["new"]),
            changed=tuple(raw["changed"]),
            unchanged=raw["unchanged"],
            deleted=tuple(raw["deleted"]),
            renamed=tuple(Rename(old, new) for old, new in raw["renamed"]),
        )
    return Job(
        id=row.id,
        collection=row.collection,
        kind=JobKind(row.kind),
        state=JobState(row.state),
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        counts=JobCounts(**json.loads(row.counts)),
        documents=documents,
        error=row.error,
        delta=found_delta,
        cancel_requested=row.cancel_requested,
        tenant=row.tenant,
        worker=row.worker,
        heartbeat_at=row.heartbeat_at,
    )
