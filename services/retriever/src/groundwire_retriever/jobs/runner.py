"""The job runner: a queue per collection, one job of it at a time, progress to watchers.

Jobs of one collection run in the order they were started, so two ingests never
interleave their documents; jobs of different collections run side by side. A job
writes through ``RetrieverCore.ingest``, which replaces each source atomically, so
searches go on (and see each source old or new) while it runs. Cancelling is
cooperative: ``ingest`` polls the flag before each document and before writing one,
so the sources already switched stay and the one in flight is dropped unwritten.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from groundwire_core.context import current_request_id, request_scope
from groundwire_core.errors import GroundwireError, InsufficientStorage, InvalidInput
from groundwire_retriever.ingest.pipeline import DocumentInput
from groundwire_retriever.jobs import sync_kind
from groundwire_retriever.jobs.model import Job, JobDocument, JobKind, JobState
from groundwire_retriever.jobs.store import JobStore
from groundwire_retriever.service import IngestSummary, RetrieverCore
from groundwire_retriever.store.disk import RETRY_AFTER_S
from groundwire_retriever.store.validation import validate_collection_name
from groundwire_retriever.sync import SyncDefinition, SyncProgress, check_definition, run_sync

log = logging.getLogger("groundwire.retriever.jobs")

STOP_GRACE_S = 10.0
"""How long ``stop`` waits for running jobs to reach a document boundary."""
MAX_LIST = 1000
KEEP_FINISHED = 1000
"""Finished jobs kept (with their reports) across restarts; older ones are forgotten
on start, so the database stays small."""
WRITTEN = ("ingested", "updated")


@dataclass
class _Active:
    """A queued or running job as this process holds it."""

    job: Job
    documents: list[JobDocument] = field(default_factory=list)
    cancel: bool = False
    interrupted: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def stop_requested(self) -> bool:
        return self.cancel or self.interrupted


class JobRunner:
    """Starts, runs, reports and cancels jobs; errors are GroundwireErrors."""

    def __init__(
        self, core: RetrieverCore, store: JobStore, *, sync_roots: Sequence[Path] = ()
    ) -> None:
        self._core = core
        self._store = store
        self._sync_roots = tuple(sync_roots)  # folders a sync job may read
        self._active: dict[str, _Active] = {}
        self._queues: dict[str, deque[str]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}

    async def start(self) -> None:
        """Opens the store (forgetting finished jobs past ``KEEP_FINISHED``); a job a crash
        left running is reported failed with what it applied, and queued jobs are queued
        again in their order. Raises Unavailable."""
        await asyncio.to_thread(self._store.open)
        await asyncio.to_thread(self._store.prune, KEEP_FINISHED)
        for job in await asyncio.to_thread(self._store.unfinished):
            if job.state is JobState.QUEUED:
                self._enqueue(_Active(job))
                continue
            options = await asyncio.to_thread(self._store.options, job.id)
            failed = replace(
                job,
                state=JobState.FAILED,
                finished_at=time.time(),
                error=_interrupted(job, full_reindex=bool(options.get("full_reindex"))),
            )
            await asyncio.to_thread(self._store.save, failed)
            await asyncio.to_thread(self._store.drop_documents, job.id)
            log.warning("job %s: %s", job.id, failed.error)

    async def stop(self) -> None:
        """Stops running jobs at their next document (they are reported failed:
        interrupted); queued jobs stay queued for the next start."""
        for active in self._active.values():
            active.interrupted = True
        workers = list(self._workers.values())
        if workers:
            _, pending = await asyncio.wait(workers, timeout=STOP_GRACE_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        await asyncio.to_thread(self._store.close)

    async def start_ingest(
        self,
        collection: str,
        documents: Sequence[DocumentInput],
        *,
        create: bool = False,
        full_reindex: bool = False,
    ) -> Job:
        """Queues an ingest of ``documents`` (kept on disk until it ends) and returns
        the queued job. Raises InvalidInput for a bad name, NotFound when the collection
        is missing, ``create`` is false and no queued job of it may create it, and
        InsufficientStorage while the data disk refuses writes."""
        validate_collection_name(collection)
        warning = self._core.storage_warning()
        if warning:  # refused now, as an Ingest call is, rather than failed later
            raise InsufficientStorage(warning, retry_after_s=RETRY_AFTER_S)
        if not create and not any(a.job.collection == collection for a in self._active.values()):
            await self._core.spec(collection)
        job = Job(
            id=uuid.uuid4().hex,
            collection=collection,
            kind=JobKind.INGEST,
            state=JobState.QUEUED,
            created_at=time.time(),
        )
        options = {"create_collection": create, "full_reindex": full_reindex}
        await asyncio.to_thread(self._store.create, job, options, documents)
        self._enqueue(_Active(job))
        return job

    async def start_sync(self, collection: str, definition: SyncDefinition) -> Job:
        """Queues a sync of ``collection`` with ``definition``'s source set and returns
        the queued job. Raises InvalidInput for a bad name or a definition that cannot
        run (checked now, not when it starts), InsufficientStorage while the data disk
        refuses writes."""
        validate_collection_name(collection)
        check_definition(definition, self._sync_roots)
        warning = self._core.storage_warning()
        if warning:
            raise InsufficientStorage(warning, retry_after_s=RETRY_AFTER_S)
        job = Job(
            id=uuid.uuid4().hex,
            collection=collection,
            kind=JobKind.SYNC,
            state=JobState.QUEUED,
            created_at=time.time(),
        )
        options = {"definition": definition.as_dict()}
        await asyncio.to_thread(self._store.create, job, options)
        self._enqueue(_Active(job))
        return job

    async def get(self, job_id: str) -> Job:
        """The job now, with its per-document report. Raises NotFound."""
        active = self._active.get(job_id)
        if active is not None:
            return replace(active.job, documents=tuple(active.documents))
        return await asyncio.to_thread(self._store.get, job_id)

    async def recent(self, collection: str = "", limit: int = 100) -> list[Job]:
        """Jobs newest first, without reports. Raises InvalidInput for a bad limit."""
        if not 1 <= limit <= MAX_LIST:
            raise InvalidInput(f"limit must be between 1 and {MAX_LIST}")
        jobs = await asyncio.to_thread(self._store.recent, collection, limit)
        # running jobs' counts move faster than the database is read here: take them live
        return [self._active[j.id].job if j.id in self._active else j for j in jobs]

    async def watch(self, job_id: str) -> AsyncGenerator[Job, None]:
        """The job now, then at each change (without its report), ending with the job
        in a final state (with its report). Raises NotFound."""
        while True:
            active = self._active.get(job_id)
            if active is None:  # final (every unfinished job is active after start)
                yield await asyncio.to_thread(self._store.get, job_id)
                return
            changed = active.changed  # taken before yielding: no change is missed
            yield active.job
            await changed.wait()

    async def cancel(self, job_id: str) -> Job:
        """Cancels the job: a queued one at once, a running one at its next document
        boundary (the answer then says cancel_requested). Raises NotFound."""
        active = self._active.get(job_id)
        if active is None:
            return await asyncio.to_thread(self._store.get, job_id)
        if active.job.state is JobState.QUEUED:
            queue = self._queues.get(active.job.collection)
            if queue is not None and job_id in queue:
                queue.remove(job_id)
            await self._finish(active, JobState.CANCELLED, "cancelled before it started")
            return await self.get(job_id)
        active.cancel = True
        active.job = replace(active.job, cancel_requested=True)
        self._notify(active)
        return await self.get(job_id)

    # --- running ----------------------------------------------------------------------

    def _enqueue(self, active: _Active) -> None:
        name = active.job.collection
        self._active[active.job.id] = active
        self._queues.setdefault(name, deque()).append(active.job.id)
        if name not in self._workers:
            # A job outlives the StartJob call that queued it: the task copies the
            # context, so it must not carry that call's deadline (its request id stays).
            with request_scope(current_request_id(), None):
                self._workers[name] = asyncio.create_task(self._work(name), name=f"jobs:{name}")

    async def _work(self, collection: str) -> None:
        queue = self._queues[collection]
        try:
            while queue:
                active = self._active.get(queue.popleft())
                if active is not None and not active.interrupted:
                    await self._run(active)
        finally:
            del self._workers[collection]
            if not queue:
                self._queues.pop(collection, None)

    async def _run(self, active: _Active) -> None:
        active.job = replace(active.job, state=JobState.RUNNING, started_at=time.time())
        await asyncio.to_thread(self._store.save, active.job)
        self._notify(active)
        try:
            if active.job.kind is JobKind.SYNC:
                state, error = await self._run_sync(active)
            else:
                state, error = await self._run_ingest(active)
        except asyncio.CancelledError:
            await self._finish(active, JobState.FAILED, _interrupted(active.job, False))
            raise
        except GroundwireError as exc:
            state, error = JobState.FAILED, exc.message
        except Exception:  # the job fails, the runner goes on with the next one
            log.exception("job %s failed", active.job.id)
            state, error = JobState.FAILED, "internal error (see the retriever's log)"
        await self._finish(active, state, error)

    async def _run_ingest(self, active: _Active) -> tuple[JobState, str]:
        job = active.job
        options = await asyncio.to_thread(self._store.options, job.id)
        documents = await asyncio.to_thread(self._store.documents, job.id)
        full_reindex = bool(options.get("full_reindex"))
        active.job = replace(job, counts=replace(job.counts, total=len(documents)))
        self._notify(active)
        events = self._core.ingest(
            job.collection,
            documents,
            create=bool(options.get("create_collection")),
            full_reindex=full_reindex,
            cancelled=active.stop_requested,
        )
        summary: IngestSummary | None = None
        async with contextlib.aclosing(events):
            async for item in events:
                if isinstance(item, IngestSummary):
                    summary = item
                    continue
                o = item.outcome
                await self._record(
                    active,
                    JobDocument(o.source_id, o.status, o.chunks, o.reason),
                    written=o.status in WRITTEN,
                )
        if summary is None or not summary.cancelled:
            return JobState.SUCCEEDED, ""
        if active.interrupted:
            return JobState.FAILED, _interrupted(active.job, full_reindex)
        if full_reindex:
            return JobState.CANCELLED, "cancelled: the re-index was discarded, nothing switched"
        return JobState.CANCELLED, "cancelled: the documents listed were applied, no others"

    async def _run_sync(self, active: _Active) -> tuple[JobState, str]:
        job = active.job
        options = await asyncio.to_thread(self._store.options, job.id)
        definition = SyncDefinition.from_dict(options["definition"])

        async def progress(tick: SyncProgress) -> None:
            source = tick.source
            if tick.phase == "scan" and source.outcome not in sync_kind.FINAL_AT_SCAN:
                return  # to be applied: reported when it is
            if tick.phase == "apply" and tick.done == 1:  # the scan is over: the rest known
                total = active.job.counts.done + tick.total
                active.job = replace(active.job, counts=replace(active.job.counts, total=total))
            elif tick.phase == "scan":
                total = active.job.counts.done + 1
                active.job = replace(active.job, counts=replace(active.job.counts, total=total))
            doc = sync_kind.job_document(source)
            await self._record(active, doc, written=source.outcome in sync_kind.WRITTEN)

        report = await run_sync(
            self._core,
            job.collection,
            definition,
            progress=progress,
            cancelled=active.stop_requested,
            folder_roots=self._sync_roots,
        )
        active.job = replace(
            active.job,
            delta=report.delta,
            counts=replace(active.job.counts, total=active.job.counts.done),
        )
        if report.cancelled and active.interrupted:
            return JobState.FAILED, _interrupted(active.job, False)
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

    async def _record(self, active: _Active, doc: JobDocument, *, written: bool) -> None:
        active.documents.append(doc)
        active.job = replace(active.job, counts=active.job.counts.add(doc, written=written))
        await asyncio.to_thread(self._store.add_document, active.job, doc)
        self._notify(active)

    async def _finish(self, active: _Active, state: JobState, error: str) -> None:
        job = replace(
            active.job,
            state=state,
            finished_at=time.time(),
            error=error,
            cancel_requested=False,
        )
        await asyncio.to_thread(self._store.save, job)
        await asyncio.to_thread(self._store.drop_documents, job.id)
        self._active.pop(job.id, None)
        active.job = job
        self._notify(active)
        log.info(
            "job %s (%s, %s): %s %s", job.id, job.kind.value, job.collection, state.value, error
        )

    @staticmethod
    def _notify(active: _Active) -> None:
        """Wakes the watchers; later ones wait on a fresh event."""
        changed, active.changed = active.changed, asyncio.Event()
        changed.set()


def _interrupted(job: Job, full_reindex: bool) -> str:
    if full_reindex:
        return "interrupted: the retriever stopped during the re-index; it was discarded"
    return (
        "interrupted: the retriever stopped while the job ran; the "
        f"{job.counts.done} documents in its report are as it lists them, the one in "
        "flight was rolled back"
    )
