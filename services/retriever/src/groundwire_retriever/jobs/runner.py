"""The job runner: any replica queues, claims, runs, reports and cancels any job.

Jobs live in the system of record (``db.jobs``), never in this process's memory, so
every replica answers ``GetJob``, ``WatchJob``, ``ListJobs`` and ``CancelJob`` for every
job the same way. Each replica polls for queued jobs every ``poll_s`` (and at once when
it queued one itself) and claims one with a row lock; only the oldest queued job of a
collection with no running job anywhere can be claimed, so jobs of one collection run
one at a time in the order they were started, while jobs of different collections run
side by side (up to ``workers`` per replica). A job writes through
``RetrieverCore.ingest``, which replaces each source atomically, so searches go on.

A running job's worker beats every ``heartbeat_s`` (each document also beats); every
replica's reaper fails a running job whose last beat is older than ``stale_after_s``
(at least three beats), with what its report says was applied: a job whose worker was
killed reads ``failed`` within ``stale_after_s + poll_s`` of its last beat, never
``running`` forever. A worker that finds its job reaped (a long stall) stops at its
next document without writing any more of the report.

Cancelling sets a flag in the job's row; the worker, on whichever replica, reads it
with each document it records and each beat, and stops at the next document boundary,
so the sources already switched stay and the one in flight is dropped unwritten.

Any exception in a worker fails its job with the reason and frees the collection's
queue; if even that write fails (the database is down or its disk full), the job's
beat stops with it and the reaper fails it once the database answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from groundwire_core.errors import (
    GroundwireError,
    InsufficientStorage,
    InvalidInput,
    NotFound,
    Overloaded,
    Unavailable,
)
from groundwire_core.identity import Identity, identity_scope
from groundwire_core.outbound import OutboundPolicy
from groundwire_retriever.db.jobs import Claimed, JobTables, input_bytes
from groundwire_retriever.domain import CollectionSpec
from groundwire_retriever.ingest.pipeline import DocumentInput
from groundwire_retriever.jobs import sync_kind
from groundwire_retriever.jobs.model import Job, JobCounts, JobDocument, JobKind, JobState
from groundwire_retriever.service import IngestSummary, RetrieverCore
from groundwire_retriever.store.disk import RETRY_AFTER_S
from groundwire_retriever.store.validation import validate_collection_name
from groundwire_retriever.sync import SyncDefinition, SyncProgress, check_definition, run_sync

log = logging.getLogger("groundwire.retriever.jobs")

STOP_GRACE_S = 10.0
"""How long ``stop`` waits for running jobs to reach a document boundary."""
MAX_LIST = 1000
KEEP_FINISHED = 1000
"""Finished jobs kept (with their reports); older ones are forgotten at start."""
WRITTEN = ("ingested", "updated")
OWNER_OF_NEW = CollectionSpec(name="-", dense_dims=1).tenant
"""The owner of a job that creates its collection: the tenant such a collection gets."""


@dataclass(frozen=True)
class JobPolicy:
    """How replicas share the jobs (``RetrieverSettings.job_*``)."""

    poll_s: float = 1.0
    heartbeat_s: float = 5.0
    stale_after_s: float = 30.0
    workers: int = 4
    max_jobs_per_tenant: int = 20
    max_bytes_per_tenant: int = 256 << 20


@dataclass
class _Held:
    """A job this process runs: its counts and flags as the worker knows them."""

    job: Job
    options: dict[str, Any]
    cancel: bool = False
    lost: bool = False
    """The job is no longer this worker's (reaped after a stall)."""
    interrupted: bool = False
    beats: asyncio.Task[None] | None = field(default=None, repr=False)
    ended: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    """Set when the job ends: its beat stops between beats, never inside one (a
    cancelled beat could leave its transaction, and SQLite's write lock, to the GC)."""

    def stop_requested(self) -> bool:
        return self.cancel or self.lost or self.interrupted


class JobRunner:
    """Starts, runs, reports and cancels jobs; errors are GroundwireErrors."""

    def __init__(
        self,
        core: RetrieverCore,
        tables: JobTables,
        *,
        sync_roots: Sequence[Path] = (),
        policy: JobPolicy | None = None,
        outbound: OutboundPolicy | None = None,
    ) -> None:
        self._core = core
        self._tables = tables
        self._sync_roots = tuple(sync_roots)  # folders a sync job may read
        self._outbound = outbound  # website syncs fetch under the operator's policy
        self._policy = policy or JobPolicy()
        self.worker = f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        """This process's name in the rows of the jobs it runs."""
        self._held: dict[str, _Held] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Forgets finished jobs past ``KEEP_FINISHED`` and starts claiming and reaping.
        Raises Unavailable when the database does not answer."""
        await self._tables.prune(KEEP_FINISHED)
        self._loop = asyncio.create_task(self._serve(), name="jobs:poll")

    async def stop(self) -> None:
        """Stops claiming; running jobs stop at their next document (reported failed:
        interrupted). Queued jobs stay queued for any replica."""
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)
            self._loop = None
        for held in self._held.values():
            held.interrupted = True
        tasks = list(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=STOP_GRACE_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    # --- the API ------------------------------------------------------------------------

    async def start_ingest(
        self,
        collection: str,
        documents: Sequence[DocumentInput],
        *,
        create: bool = False,
        full_reindex: bool = False,
    ) -> Job:
        """Queues an ingest of ``documents`` (kept in the database until it ends) and
        returns the queued job. Raises InvalidInput for a bad name, NotFound when the
        collection is missing and ``create`` is false, InsufficientStorage while the
        data disk refuses writes, Overloaded when the owner's queue is at its cap."""
        validate_collection_name(collection)
        self._check_storage()
        owner = await self._owner(collection, create=create)
        await self._check_caps(owner, input_bytes(documents))
        job = _new_job(collection, JobKind.INGEST, owner)
        options = {"create_collection": create, "full_reindex": full_reindex}
        await self._tables.create(job, owner, options, documents)
        self._wake.set()
        return job

    async def start_sync(self, collection: str, definition: SyncDefinition) -> Job:
        """Queues a sync of ``collection`` with ``definition``'s source set and returns
        the queued job. Raises InvalidInput for a bad name or a definition that cannot
        run (checked now, not when it starts), InsufficientStorage while the data disk
        refuses writes, Overloaded when the owner's queue is at its cap."""
        validate_collection_name(collection)
        check_definition(
            definition,
            self._sync_roots,
            **({"max_bytes_limit": self._outbound.max_bytes} if self._outbound else {}),
        )
        self._check_storage()
        owner = await self._owner(collection, create=True)  # a sync creates its collection
        await self._check_caps(owner, 0)
        job = _new_job(collection, JobKind.SYNC, owner)
        await self._tables.create(job, owner, {"definition": definition.as_dict()})
        self._wake.set()
        return job

    async def get(self, job_id: str, tenant: str = "") -> Job:
        """The job now, with its per-document report; ``tenant``: only a job it owns.
        Raises NotFound."""
        return await self._tables.get(job_id, tenant)

    async def recent(self, collection: str = "", limit: int = 100, tenant: str = "") -> list[Job]:
        """Jobs newest first, without reports. Raises InvalidInput for a bad limit."""
        if not 1 <= limit <= MAX_LIST:
            raise InvalidInput(f"limit must be between 1 and {MAX_LIST}")
        return await self._tables.recent(collection, limit, tenant)

    async def watch(self, job_id: str, tenant: str = "") -> AsyncGenerator[Job, None]:
        """The job now, then at each change of its state, counts or cancel flag (read
        from the database every ``poll_s``, whichever replica runs it), ending with the
        job in a final state with its report. Raises NotFound, and Unavailable once
        the database has not answered for ``stale_after_s``."""
        last: Job | None = None
        failures = 0
        while True:
            try:
                job = await self._tables.progress(job_id, tenant)
            except Unavailable:
                # a database blip does not end the stream: it is read again, until
                # it has been away for the reaper's bound
                failures += 1
                if failures * self._policy.poll_s > self._policy.stale_after_s:
                    raise
                await asyncio.sleep(self._policy.poll_s)
                continue
            failures = 0
            if job.state.final:
                yield await self._tables.get(job_id, tenant)
                return
            seen = (job.state, job.counts, job.cancel_requested)
            if last is None or seen != (last.state, last.counts, last.cancel_requested):
                last = job
                yield job
            await asyncio.sleep(self._policy.poll_s)

    async def cancel(self, job_id: str, tenant: str = "") -> Job:
        """Cancels the job: a queued one at once, a running one at its next document
        boundary on whichever replica runs it (the answer then says cancel_requested).
        ``tenant``: only a job it owns. Raises NotFound."""
        job = await self._tables.cancel(job_id, tenant, time.time(), "cancelled before it started")
        held = self._held.get(job_id)
        if held is not None and job.cancel_requested:
            held.cancel = True  # here: no need to wait for the next beat
        return job

    # --- checks -------------------------------------------------------------------------

    def _check_storage(self) -> None:
        warning = self._core.storage_warning()
        if warning:  # refused now, as an Ingest call is, rather than failed later
            raise InsufficientStorage(warning, retry_after_s=RETRY_AFTER_S)

    async def _owner(self, collection: str, *, create: bool) -> str:
        """The tenant a new job of ``collection`` belongs to: the collection's. Raises
        NotFound for a missing collection unless the job may create it."""
        try:
            return (await self._core.spec(collection)).tenant or OWNER_OF_NEW
        except NotFound:
            if not create:
                raise
            return OWNER_OF_NEW

    async def _check_caps(self, owner: str, size: int) -> None:
        """Overloaded when the owner's unfinished jobs would pass either cap."""
        p = self._policy
        pending = await self._tables.pending(owner)
        if pending.jobs + 1 > p.max_jobs_per_tenant:
            raise Overloaded(
                f"this tenant has {pending.jobs} unfinished jobs, the most it may queue "
                f"({p.max_jobs_per_tenant}): wait for some to end",
                retry_after_s=max(p.poll_s, 5.0),
            )
        if pending.input_bytes + size > p.max_bytes_per_tenant:
            raise Overloaded(
                f"this tenant's queued jobs hold {pending.input_bytes} bytes; with this one "
                f"({size}) they would pass its cap ({p.max_bytes_per_tenant}): wait for "
                "some to end",
                retry_after_s=max(p.poll_s, 5.0),
            )

    # --- claiming, beating, reaping -------------------------------------------------------

    async def _serve(self) -> None:
        """Every ``poll_s`` (or when woken): fail stale jobs, claim what fits."""
        while True:
            try:
                await self._reap()
                while len(self._held) < self._policy.workers:
                    claimed = await self._tables.claim(self.worker, time.time())
                    if claimed is None:
                        break
                    self._spawn(claimed)
            except GroundwireError as error:  # the database away: try again next round
                log.warning("jobs: %s", error.message)
            except Exception:
                log.exception("jobs: the poll failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._policy.poll_s)
            self._wake.clear()

    async def _reap(self) -> None:
        before = time.time() - self._policy.stale_after_s
        for job in await self._tables.stale(before):
            reason = (
                f"failed: its worker ({job.worker}) stopped (no heartbeat for "
                f"{self._policy.stale_after_s:g} s); the {job.counts.done} documents in its "
                "report are as it lists them, the one in flight was rolled back"
            )
            if await self._tables.reap(job.id, before, reason, time.time()):
                log.warning("job %s: %s", job.id, reason)

    def _spawn(self, claimed: Claimed) -> None:
        held = _Held(claimed.job, claimed.options)
        self._held[held.job.id] = held
        task = asyncio.create_task(self._run(held), name=f"jobs:{held.job.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _beat(self, held: _Held) -> None:
        while not held.lost:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(held.ended.wait(), self._policy.heartbeat_s)
            if held.ended.is_set():
                return
            try:
                flag = await self._tables.beat(held.job.id, self.worker, time.time())
            except GroundwireError as error:
                log.warning("job %s: heartbeat: %s", held.job.id, error.message)
                continue
            if flag is None:
                held.lost = True
            else:
                held.cancel = held.cancel or flag

    # --- running ------------------------------------------------------------------------

    async def _run(self, held: _Held) -> None:
        job = held.job
        held.beats = asyncio.create_task(self._beat(held), name=f"jobs:{job.id}:beat")
        state, error = JobState.FAILED, ""
        try:
            # The job acts as the retriever itself for its owner: it reads and writes
            # the collection whole (a sync's stored side is never a caller's view).
            with identity_scope(Identity(tenant=job.tenant, unrestricted=True)):
                if job.kind is JobKind.SYNC:
                    state, error = await self._run_sync(held)
                else:
                    state, error = await self._run_ingest(held)
        except asyncio.CancelledError:
            await self._end(held, JobState.FAILED, _interrupted(held.job, False))
            raise
        except GroundwireError as exc:
            state, error = JobState.FAILED, exc.message
        except Exception as exc:  # the job fails with its reason; the queue goes on
            log.exception("job %s failed", job.id)
            state, error = JobState.FAILED, f"failed: {_reason(exc)}"
        await self._end(held, state, error)

    async def _end(self, held: _Held, state: JobState, error: str) -> None:
        """Writes the job's end and frees its slot (and with it the collection)."""
        held.ended.set()
        if held.beats is not None:
            # the beat in flight (one short write) finishes before the end is written
            with contextlib.suppress(Exception):
                await asyncio.shield(held.beats)
        job = held.job
        try:
            if held.lost:
                log.warning("job %s: reaped while it ran; its end is not recorded", job.id)
            elif not await self._finish(held, state, error):
                log.warning("job %s: no longer this worker's; its end is not recorded", job.id)
            else:
                log.info(
                    "job %s (%s, %s): %s %s", job.id, job.kind.value, job.collection,
                    state.value, error,
                )  # fmt: skip
        except GroundwireError as failure:
            # its beat has stopped: the reaper (on any replica) fails it once the
            # database answers again
            log.error("job %s: its end (%s) cannot be recorded: %s", job.id, state.value,
                      failure.message)  # fmt: skip
        finally:
            self._held.pop(job.id, None)
            self._wake.set()

    async def _finish(self, held: _Held, state: JobState, error: str) -> bool:
        """Records the job's end, trying again every beat while the database refuses
        (a full disk being cleared) and the job is still this worker's: it ends with
        its own reason if the database recovers before the reaper's bound. Raises the
        last Unavailable when it never did."""
        job = held.job
        tries = max(1, int(self._policy.stale_after_s / self._policy.heartbeat_s))
        for attempt in range(tries):
            try:
                return await self._tables.finish(
                    job.id, self.worker, state, error, time.time(), job.counts, job.delta
                )
            except GroundwireError as failure:
                if attempt + 1 == tries:
                    raise
                log.warning("job %s: recording its end: %s (again in %g s)", job.id,
                            failure.message, self._policy.heartbeat_s)  # fmt: skip
                await asyncio.sleep(self._policy.heartbeat_s)
        return False

    async def _run_ingest(self, held: _Held) -> tuple[JobState, str]:
        job = held.job
        documents = await self._tables.inputs(job.id)
        full_reindex = bool(held.options.get("full_reindex"))
        held.job = replace(job, counts=replace(job.counts, total=len(documents)))
        await self._save(held, None)
        events = self._core.ingest(
            job.collection,
            documents,
            create=bool(held.options.get("create_collection")),
            full_reindex=full_reindex,
            cancelled=held.stop_requested,
        )
        summary: IngestSummary | None = None
        async with contextlib.aclosing(events):
            async for item in events:
                if isinstance(item, IngestSummary):
                    summary = item
                    continue
                o = item.outcome
                await self._record(
                    held,
                    JobDocument(o.source_id, o.status, o.chunks, o.reason),
                    written=o.status in WRITTEN,
                )
        if summary is None or not summary.cancelled:
            return JobState.SUCCEEDED, ""
        if held.interrupted or held.lost:
            return JobState.FAILED, _interrupted(held.job, full_reindex)
        if full_reindex:
            return JobState.CANCELLED, "cancelled: the re-index was discarded, nothing switched"
        return JobState.CANCELLED, "cancelled: the documents listed were applied, no others"

    async def _run_sync(self, held: _Held) -> tuple[JobState, str]:
        job = held.job
        definition = SyncDefinition.from_dict(held.options["definition"])

        async def progress(tick: SyncProgress) -> None:
            source = tick.source
            if tick.phase == "scan" and source.outcome not in sync_kind.FINAL_AT_SCAN:
                return  # to be applied: reported when it is
            counts = held.job.counts
            if tick.phase == "apply" and tick.done == 1:  # the scan is over: the rest known
                held.job = replace(held.job, counts=replace(counts, total=counts.done + tick.total))
            elif tick.phase == "scan":
                held.job = replace(held.job, counts=replace(counts, total=counts.done + 1))
            doc = sync_kind.job_document(source)
            await self._record(held, doc, written=source.outcome in sync_kind.WRITTEN)

        report = await run_sync(
            self._core,
            job.collection,
            definition,
            progress=progress,
            cancelled=held.stop_requested,
            folder_roots=self._sync_roots,
            outbound=self._outbound,
        )
        held.job = replace(
            held.job,
            delta=report.delta,
            counts=replace(held.job.counts, total=held.job.counts.done),
        )
        if report.cancelled and (held.interrupted or held.lost):
            return JobState.FAILED, _interrupted(held.job, False)
        if report.cancelled:
            return JobState.CANCELLED, (
                "cancelled: the sources listed were applied; deletions wait for the next sync"
            )
        if not report.complete:
            return JobState.SUCCEEDED, (
                "the crawl stopped early (its page limit, or a transient error): stored "
                "pages it did not see were kept"
            )
        return JobState.SUCCEEDED, ""

    async def _record(self, held: _Held, doc: JobDocument, *, written: bool) -> None:
        # the counts move on only with the document's row: a refused write (a full
        # disk) leaves them as stored, so the job's end never counts a document its
        # report does not list
        before = held.job
        held.job = replace(before, counts=before.counts.add(doc, written=written))
        try:
            await self._save(held, doc)
        except GroundwireError:
            held.job = before
            raise

    async def _save(self, held: _Held, doc: JobDocument | None) -> None:
        """Writes the counts (and ``doc``) and reads the cancel flag back."""
        if held.lost:
            return
        flag = await self._tables.record(
            held.job.id, self.worker, held.job.counts, doc, time.time()
        )
        if flag is None:
            held.lost = True
        else:
            held.cancel = held.cancel or flag


def _new_job(collection: str, kind: JobKind, owner: str) -> Job:
    return Job(
        id=uuid.uuid4().hex,
        collection=collection,
        kind=kind,
        state=JobState.QUEUED,
        created_at=time.time(),
        counts=JobCounts(),
        tenant=owner,
    )


def _reason(exc: BaseException) -> str:
    """What failed, without internals: an OS error's description (e.g. "No space left
    on device"), else the exception's kind (details are in the retriever's log)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{type(exc).__name__} (see the retriever's log)"


def _interrupted(job: Job, full_reindex: bool) -> str:
    if full_reindex:
        return "interrupted: the retriever stopped during the re-index; it was discarded"
    return (
        "interrupted: the retriever stopped while the job ran; the "
        f"{job.counts.done} documents in its report are as it lists them, the one in "
        "flight was rolled back"
    )
