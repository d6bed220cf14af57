"""A bounded queue in front of one model, batched by a token budget, run as a pipeline.

Shared by the embedder (texts) and the reranker (query-passage pairs). No gRPC here.
One idea at ~500 lines: the queue, the former and the runner share one lock-free
hand-off and one set of budgets; split apart, each would need the others' internals.

Requests join a bounded queue (full -> Overloaded at once, with a retry-after). Two
tasks drain it as a three-step pipeline over two dedicated worker threads:

* the *former* packs queued requests into one batch within the token and item budgets,
  sorts the batch's items by estimated length and cuts them into buckets, so short
  texts are not padded to the longest one, and tokenizes every bucket (pre) on the
  pre/post thread. It prepares at most one batch ahead: the next batch is tokenized
  while the current one runs;
* the *runner* runs the model on each bucket (core) on a core thread, then hands the
  batch to post-processing (post, on the pre/post thread) and starts the next batch's
  inference straight away.

With ``lanes`` > 1 the runner starts up to that many batches at once, each on its own
core thread with a one-thread model session (``Backend.infer(batch, shared=True)``),
while more batches wait behind them. A batch with nothing behind it and no other run
going gets every core: in one call on all threads (``shared=False``), or, when it is
cut into several buckets (a request of many texts), in one-thread calls spread over
the lanes. A lone query is fastest on every thread; under load, runs side by side
get through more (figures in ``onnx_models.open_sessions``).

Batches of at most ``INLINE_TOKENS`` estimated tokens (a query or two) skip the pre/post
thread: their pre and post steps cost less than the thread hops, so they run on the
event loop and only the model call leaves it.

Requests marked ``bulk`` (a document's chunks at ingest) wait on a lane of their own:
the former takes a bulk request only while no other request waits, never packs the two
kinds into one batch, and cuts a bulk request into slices of at most
``max_batch_tokens`` first, so bulk work can never fill the queue that queries join.
With lanes (``lanes`` > 1: a one-thread session exists), a bulk slice runs on threads of
its own at a lower CPU priority (``BULK_NICE``; on Linux a thread's nice value is its
own), one bucket per thread on the one-thread session, and takes no lane: a query that
arrives never waits for a bulk slice to end, and the kernel gives its threads the cores
the bulk threads were using. An idle engine still spends every core on bulk work. With
one lane, a bulk slice runs as any batch does, and a query waits for at most the slices
already formed, never for the whole document.

Each request gets its own items' results, in order, with its token counts, the time
its batch spent in the model's three steps (``inference_ms``) and the rest of its time
inside the engine (``queue_ms``). A request whose caller went away before its batch
formed is dropped unrun.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from groundwire_core.errors import GroundwireError, InvalidInput, Overloaded, Unavailable
from groundwire_core.metrics import BATCH_SIZE, QUEUE_DEPTH, TOKENS

log = logging.getLogger("groundwire.batching")

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")
ItemT_contra = TypeVar("ItemT_contra", contravariant=True)
ResultT_co = TypeVar("ResultT_co", covariant=True)
R = TypeVar("R")

# A bucket is cut when padding would exceed this share of its padded tokens...
MAX_PADDING_SHARE = 0.25
# ...and this many padded tokens: below it another model call costs more than it saves.
MIN_PADDING_TOKENS = 64
# Batches this small are tokenized and post-processed on the event loop: that takes less
# time than two hops to a worker thread and back (a single query is the common case).
INLINE_TOKENS = 256
# How often a former with only bulk work waiting re-checks for a free lane, should no
# run's end wake it (a safety net; run ends set the wake-up event).
BULK_POLL_S = 0.05
# The nice value of the bulk threads. CFS weighs nice 5 at 335 against 1024 at nice 0:
# while queries run, the bulk threads keep ~25 % of a contended core; alone they have
# them all. Raising one's own nice value needs no privilege (containers drop them all).
# tests/integration/retriever/test_ingest_fairness.py (3 searchers without pause on 2
# cores, one process; 2026-11-28): search p95 during the ingest / idle p95 2.65 with no
# nice threads, 1.14 at nice 10 (the ingest 3.8x slower), 0.97 at nice 5 (2.9x slower).
BULK_NICE = 5
RECALIBRATE_ABOVE = 1.5
"""A stale ms/item figure is measured again only when over this times the lowest one
measured (see ``BatchingEngine.__init__``): 1.5 leaves a batch's normal spread alone
(padding, bucket shapes) and catches a figure taken under another process's load (3-6x
here: docs/sizing.md)."""


def _lower_priority() -> None:
    """A bulk thread's initializer: this thread only, at ``BULK_NICE`` (Linux: every
    thread has its own nice value; elsewhere the call would renice the whole process)."""
    if sys.platform != "linux":
        return
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BULK_NICE)
    except OSError as error:  # a seccomp profile may refuse it: bulk runs at nice 0
        log.warning("bulk thread kept its priority: %s", error)


class Backend(Protocol[ItemT_contra, ResultT_co]):
    """A model split into the three steps the engine schedules."""

    def load(self) -> None:
        """Loads the model (blocking; called in a worker thread)."""

    def estimate_tokens(self, item: ItemT_contra) -> int:
        """Padded length estimate before tokenizing, for packing batches and buckets."""
        ...

    def tokenize(self, items: Sequence[ItemT_contra]) -> Any:
        """Pre: tokenize and pad; returns the batch the other two steps take."""

    def token_counts(self, batch: Any) -> list[int]:
        """Real tokens per item of ``batch``."""
        ...

    def infer(self, batch: Any, shared: bool = False) -> Any:
        """Core: run the model; ``shared``: other runs go at the same time (use one
        thread)."""

    def postprocess(self, batch: Any, raw: Any) -> Sequence[ResultT_co]:
        """Post: one result per item, in order."""
        ...


@dataclass(frozen=True)
class BatchResult(Generic[ResultT]):
    results: list[ResultT]
    tokens: list[int]
    queue_ms: float
    inference_ms: float


@dataclass
class _Job(Generic[ItemT, ResultT]):
    items: list[ItemT]
    enqueued: float
    future: asyncio.Future[BatchResult[ResultT]] = field(repr=False)
    bulk: bool = False


@dataclass(eq=False)
class _Batch(Generic[ItemT, ResultT]):
    """One model batch on its way through the pipeline."""

    jobs: list[_Job[ItemT, ResultT]]
    buckets: list[list[int]]  # indices into the batch's items, one list per model call
    tokenized: list[Any] = field(default_factory=list)
    raw: list[Any] = field(default_factory=list)
    work_ms: float = 0.0  # pre + core + post
    inline: bool = False  # small enough for pre and post on the event loop

    @property
    def size(self) -> int:
        return sum(len(b) for b in self.buckets)


def _clocked(fn: Callable[..., R], *args: Any) -> tuple[R, float]:
    """``fn(*args)`` and its duration in ms, measured on the thread that runs it."""
    started = time.perf_counter()
    result = fn(*args)
    return result, (time.perf_counter() - started) * 1e3


def plan_buckets(
    estimates: Sequence[int],
    *,
    max_tokens: int,
    max_padding_share: float = MAX_PADDING_SHARE,
    min_padding_tokens: int = MIN_PADDING_TOKENS,
) -> list[list[int]]:
    """Split items into model calls by estimated length: indices, shortest first.

    Items are sorted by length; a bucket grows while its padding stays under
    ``max_padding_share`` of its padded tokens (or under ``min_padding_tokens``) and its
    padded size under ``max_tokens``. One item always fits.
    """
    order = sorted(range(len(estimates)), key=lambda i: estimates[i])
    buckets: list[list[int]] = []
    current: list[int] = []
    real = 0
    for i in order:
        length = max(1, estimates[i])
        padded = (len(current) + 1) * length  # sorted: this item is the bucket's longest
        waste = padded - (real + length)
        if current and (
            padded > max_tokens
            or (waste > max_padding_share * padded and waste > min_padding_tokens)
        ):
            buckets.append(current)
            current, real = [], 0
        current.append(i)
        real += length
    if current:
        buckets.append(current)
    return buckets


class BatchingEngine(Generic[ItemT, ResultT]):
    """Serves one backend behind a bounded queue with token-budget batching."""

    def __init__(
        self,
        backend: Backend[ItemT, ResultT],
        *,
        name: str,
        max_batch_tokens: int,
        max_batch_items: int,
        max_queue: int,
        warm_up: Sequence[ItemT] = (),
        lanes: int = 1,
        calibrate: Sequence[ItemT] = (),
        max_bulk_queue: int | None = None,
        recalibrate_after_s: float = 30.0,
    ) -> None:
        """``calibrate``: items run once after the warm-up and timed, so ``ms_per_item``
        is known before the first request (a caller planning from it — the rerank
        stage's budget — is right from the start instead of assuming a free model).
        They run again, while the engine is idle, when ``ms_per_item`` is read, no
        batch has been timed for ``recalibrate_after_s`` and the figure is over
        RECALIBRATE_ABOVE times the lowest one measured: a caller that stops sending
        work because the figure is high (the rerank plan skips) would otherwise keep a
        figure measured under a load long gone. A figure near the lowest keeps no
        caller away, and its first request times the model anew: measuring then would
        only put the calibration beside that request (an idle machine's first search
        after a pause ran its 9 pairs beside the calibration's 8, missed the budget, and
        left a figure 2.6x too high that made the next searches skip). A batch never
        runs beside a recalibration: it waits for it.
        ``max_bulk_queue``: bulk requests waiting at most (default ``max_queue``)."""
        if lanes < 1:
            raise ValueError(f"lanes must be at least 1 (got {lanes})")
        self._backend = backend
        self._name = name
        self._lanes = lanes
        self._shared_runs = 0  # batches running side by side now
        self._lane_freed = asyncio.Event()
        self._max_batch_tokens = max_batch_tokens
        self._max_batch_items = max_batch_items
        self._queue: asyncio.Queue[_Job[ItemT, ResultT]] = asyncio.Queue(maxsize=max_queue)
        self._bulk: deque[_Job[ItemT, ResultT]] = deque()  # slices of bulk requests
        self._bulk_requests = 0  # bulk requests not answered yet
        self._max_bulk = max_queue if max_bulk_queue is None else max_bulk_queue
        self._work = asyncio.Event()  # set when a request joins either queue or a run ends
        self._held = 0  # batches the runner holds: running alone, or waiting for a lane
        self._warm_up = list(warm_up)
        self._calibrate = list(calibrate)
        self._recalibrate_after_s = recalibrate_after_s
        self._sampled_at = 0.0  # monotonic time of the newest ms/item sample
        self._recalibrating: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._finishing: set[asyncio.Task[None]] = set()
        self._in_flight: set[_Batch[ItemT, ResultT]] = set()
        self._prepared: asyncio.Queue[_Batch[ItemT, ResultT]] | None = None
        self._ahead: asyncio.Semaphore | None = None
        self._pre_post: ThreadPoolExecutor | None = None
        self._core: ThreadPoolExecutor | None = None
        self._bulk_core: ThreadPoolExecutor | None = None  # lanes > 1: niced bulk threads
        self._bulk_running = False  # a bulk slice is on the bulk threads now
        self._ready = False
        self._recent_ms_per_item: list[float] = []
        self._lowest_ms_per_item = 0.0  # the lowest figure measured (0: none yet)

    @property
    def max_batch_items(self) -> int:
        return self._max_batch_items

    @property
    def queue_depth(self) -> int:
        return self._queue.qsize()

    @property
    def ready(self) -> bool:
        return self._ready

    @property
    def ms_per_item(self) -> float:
        """Median model milliseconds per item over recent batches (0 if none); a stale
        figure starts a recalibration (see ``__init__``) and is answered meanwhile."""
        self._maybe_recalibrate()
        recent = sorted(self._recent_ms_per_item)
        return recent[len(recent) // 2] if recent else 0.0

    def _maybe_recalibrate(self) -> None:
        if not self._calibrate or not self._ready or self._recalibrating is not None:
            return
        if time.monotonic() - self._sampled_at < self._recalibrate_after_s:
            return
        recent = sorted(self._recent_ms_per_item)
        if recent and recent[len(recent) // 2] <= RECALIBRATE_ABOVE * self._lowest_ms_per_item:
            return  # near the lowest: keeps no caller away (see __init__)
        if self._queue.qsize() or self._bulk or self._in_flight:
            return  # busy: its batches will be timed
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._recalibrating = loop.create_task(self._recalibrate(), name=f"{self._name}-recal")

    async def _recalibrate(self) -> None:
        try:
            per_item = await self._in(self._core, self._time_items, self._calibrate)
            self._recent_ms_per_item = [per_item]  # the older samples are what was stale
            self._lowest(per_item)
            log.info("%s recalibrated: %.1f ms per item", self._name, per_item)
        except Exception as error:  # a failed model shows in the next request's error
            log.warning("%s recalibration failed: %s", self._name, type(error).__name__)
        finally:
            self._sampled_at = time.monotonic()
            self._recalibrating = None

    def _lowest(self, per_item: float) -> None:
        if per_item > 0 and (not self._lowest_ms_per_item or per_item < self._lowest_ms_per_item):
            self._lowest_ms_per_item = per_item

    async def start(self) -> None:
        """Loads the model and runs the warm-up items; raises if loading fails."""
        self._pre_post = ThreadPoolExecutor(1, thread_name_prefix=f"{self._name}-pre-post")
        self._core = ThreadPoolExecutor(self._lanes, thread_name_prefix=f"{self._name}-core")
        if self._lanes > 1:
            self._bulk_core = ThreadPoolExecutor(
                self._lanes, thread_name_prefix=f"{self._name}-bulk", initializer=_lower_priority
            )
        await self._in(self._core, self._backend.load)
        if self._warm_up:
            await self._in(self._core, self._run_all_steps, self._warm_up)
        if self._calibrate:
            per_item = await self._in(self._core, self._time_items, self._calibrate)
            self._recent_ms_per_item = [per_item]
            self._lowest(per_item)
            self._sampled_at = time.monotonic()
            log.info("%s calibrated: %.1f ms per item", self._name, per_item)
        self._prepared = asyncio.Queue(maxsize=1)
        self._ahead = asyncio.Semaphore(1)
        self._tasks = [
            asyncio.create_task(self._form(), name=f"{self._name}-former"),
            asyncio.create_task(self._run(), name=f"{self._name}-runner"),
        ]
        # read at scrape time
        QUEUE_DEPTH.labels(self._name).set_function(lambda: self._queue.qsize() + len(self._bulk))
        self._ready = True
        log.info(
            "%s model warmed up: %s",
            self._name,
            f"{self._lanes} lanes (one thread each while requests wait)"
            if self._lanes > 1
            else "one run at a time",
        )

    async def stop(self) -> None:
        """Stops the pipeline; requests still waiting fail with Unavailable."""
        self._ready = False
        if self._recalibrating is not None:
            self._tasks.append(self._recalibrating)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._finishing, return_exceptions=True)
        self._tasks = []
        gone = Unavailable(f"the {self._name} is shutting down")
        while not self._queue.empty():
            self._fail(self._queue.get_nowait().future, gone)
        while self._bulk:
            self._fail(self._bulk.popleft().future, gone)
        for batch in [*self._in_flight]:  # formed, tokenized or running: never answered
            for job in batch.jobs:
                self._fail(job.future, gone)
        self._in_flight.clear()
        for pool in (self._pre_post, self._core, self._bulk_core):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)

    async def submit(self, items: Sequence[ItemT], *, bulk: bool = False) -> BatchResult[ResultT]:
        """Runs ``items`` through the model, in order; ``bulk``: on the bulk lane (see
        the module's docstring), after every other waiting request.

        Raises InvalidInput (no items, too many), Overloaded (queue full),
        Unavailable (not started, or the model failed on the batch).
        """
        if not self._ready:
            raise Unavailable(f"the {self._name} is not ready")
        if not items:
            raise InvalidInput("the request has no items")
        if len(items) > self._max_batch_items:
            raise InvalidInput(f"at most {self._max_batch_items} items per call (got {len(items)})")
        if bulk:
            return await self._submit_bulk(items)
        job: _Job[ItemT, ResultT] = _Job(
            list(items), time.perf_counter(), asyncio.get_running_loop().create_future()
        )
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            raise Overloaded(
                f"the {self._name} queue is full ({self._queue.maxsize} requests)",
                retry_after_s=self._retry_after_s(),
            ) from None
        self._work.set()
        return await job.future

    async def _submit_bulk(self, items: Sequence[ItemT]) -> BatchResult[ResultT]:
        """A bulk request as slices of at most one batch's budget, each its own job on
        the bulk lane; the answer joins theirs in order."""
        if self._bulk_requests >= self._max_bulk:
            waiting = sum(len(job.items) for job in self._bulk)
            raise Overloaded(
                f"the {self._name} bulk queue is full ({self._max_bulk} requests)",
                retry_after_s=round(max(0.1, self.ms_per_item * waiting / 1000), 3),
            )
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        jobs: list[_Job[ItemT, ResultT]] = []
        tokens = 0
        for item in items:
            cost = self._backend.estimate_tokens(item)
            if not jobs or tokens + cost > self._max_batch_tokens:
                jobs.append(_Job([], started, loop.create_future(), bulk=True))
                tokens = 0
            jobs[-1].items.append(item)
            tokens += cost
        self._bulk.extend(jobs)
        self._bulk_requests += 1
        self._work.set()
        try:
            parts = await asyncio.gather(*(job.future for job in jobs))
        finally:
            self._bulk_requests -= 1
            for job in jobs:  # the caller went away, or a slice failed: drop the rest
                if not job.future.done():
                    job.future.cancel()
        inference_ms = sum(part.inference_ms for part in parts)
        return BatchResult(
            results=[r for part in parts for r in part.results],
            tokens=[t for part in parts for t in part.tokens],
            queue_ms=max(0.0, (time.perf_counter() - started) * 1e3 - inference_ms),
            inference_ms=inference_ms,
        )

    def _retry_after_s(self) -> float:
        """About the time the queued items take to run, at least 0.1 s."""
        queued: Sequence[_Job[ItemT, ResultT]] = self._queue._queue  # type: ignore[attr-defined]
        waiting = sum(len(job.items) for job in queued)
        return round(max(0.1, self.ms_per_item * waiting / 1000), 3)

    # -- the former: pack, bucket, tokenize ----------------------------------------------

    async def _form(self) -> None:
        assert self._prepared is not None and self._ahead is not None
        while True:
            await self._ahead.acquire()  # released when the runner takes a batch
            first = await self._next_live_job()
            batch: _Batch[ItemT, ResultT] = _Batch(jobs=[first], buckets=[])
            self._in_flight.add(batch)
            try:
                self._take_batch(batch)
                items = [item for job in batch.jobs for item in job.items]
                if batch.inline:
                    batch.tokenized, ms = _clocked(self._tokenize_buckets, items, batch.buckets)
                else:
                    batch.tokenized, ms = await self._in(
                        self._pre_post, _clocked, self._tokenize_buckets, items, batch.buckets
                    )
            except Exception as error:  # a failed batch fails its requests, not the server
                self._fail_batch(batch, error, "tokenizing")
                self._ahead.release()
                continue
            batch.work_ms += ms
            await self._prepared.put(batch)

    async def _next_live_job(self) -> _Job[ItemT, ResultT]:
        """The oldest waiting request, a bulk one only while no other waits."""
        while True:
            if not self._queue.empty():
                job = self._queue.get_nowait()
            elif self._bulk and self._room_for_bulk():
                job = self._bulk.popleft()
            else:
                self._work.clear()
                # a safety net (run ends set it); not wait_for, which can swallow a
                # cancel on Python 3.11 when its timeout fires at the same moment
                wake = asyncio.get_running_loop().call_later(BULK_POLL_S, self._work.set)
                try:
                    await self._work.wait()
                finally:
                    wake.cancel()
                continue
            if not job.future.done():  # its caller may have gone away while it waited
                return job

    def _room_for_bulk(self) -> bool:
        """Whether a bulk slice would start at once: no batch formed ahead, none held by
        the runner, and the bulk threads free (with lanes) or a free lane. Bulk slices
        are formed only then, so a query that arrives waits for at most the slice the
        runner is handing over, not for a queue of them."""
        if self._prepared is None or not self._prepared.empty() or self._held:
            return False
        if self._bulk_core is not None:
            return not self._bulk_running
        return self._shared_runs < self._lanes

    def _take_batch(self, batch: _Batch[ItemT, ResultT]) -> None:
        """Adds queued jobs to ``batch`` while it stays within both budgets; plans buckets."""
        estimate = self._backend.estimate_tokens
        estimates = [estimate(item) for item in batch.jobs[0].items]
        tokens = sum(estimates)
        # from the first job's lane only: a query never waits in a batch of passages
        bulk = batch.jobs[0].bulk
        waiting: deque[_Job[ItemT, ResultT]] = (
            self._bulk if bulk else self._queue._queue  # type: ignore[attr-defined]
        )
        take = self._bulk.popleft if bulk else self._queue.get_nowait
        # a bulk slice on the bulk threads: one bucket per thread
        max_tokens = self._max_batch_tokens
        if bulk and self._bulk_core is not None:
            max_tokens = max(1, max_tokens // self._lanes)
        while waiting:
            nxt = waiting[0]
            if nxt.future.done():
                take()
                continue
            more = [estimate(item) for item in nxt.items]
            if (
                len(estimates) + len(more) > self._max_batch_items
                or tokens + sum(more) > self._max_batch_tokens
            ):
                break
            batch.jobs.append(take())
            estimates.extend(more)
            tokens += sum(more)
        batch.buckets = plan_buckets(estimates, max_tokens=max_tokens)
        batch.inline = tokens <= INLINE_TOKENS

    def _tokenize_buckets(self, items: list[ItemT], buckets: list[list[int]]) -> list[Any]:
        return [self._backend.tokenize([items[i] for i in bucket]) for bucket in buckets]

    # -- the runner: infer, then hand over to post-processing --------------------------

    async def _run(self) -> None:
        assert self._prepared is not None and self._ahead is not None
        while True:
            batch = await self._prepared.get()
            self._ahead.release()
            if all(job.future.done() for job in batch.jobs):
                self._in_flight.discard(batch)
                continue
            if batch.jobs[0].bulk and self._bulk_core is not None:
                self._bulk_running = True  # takes no lane: queries go on beside it
                task = asyncio.create_task(self._run_bulk(batch))
                self._finishing.add(task)
                task.add_done_callback(self._finishing.discard)
                continue
            self._held += 1
            try:
                while self._shared_runs >= self._lanes:  # every lane busy
                    self._lane_freed.clear()
                    await self._lane_freed.wait()
                if self._shared_runs == 0 and (
                    self._lanes == 1
                    or (
                        self._queue.empty()
                        and self._prepared.empty()
                        # bulk work waits on threads of its own when there are lanes
                        and (self._bulk_core is not None or not self._bulk)
                    )
                ):
                    await self._run_batch(batch, shared=False)  # alone: every core is its own
                    continue
            finally:
                self._held -= 1
                self._work.set()
            self._shared_runs += 1
            task = asyncio.create_task(self._run_shared(batch))
            self._finishing.add(task)
            task.add_done_callback(self._finishing.discard)

    async def _run_shared(self, batch: _Batch[ItemT, ResultT]) -> None:
        try:
            await self._run_batch(batch, shared=True)
        finally:
            self._shared_runs -= 1
            self._lane_freed.set()
            self._work.set()

    async def _run_bulk(self, batch: _Batch[ItemT, ResultT]) -> None:
        try:
            await self._run_batch(batch, shared=True, bulk=True)
        finally:
            self._bulk_running = False
            self._work.set()

    async def _run_batch(
        self, batch: _Batch[ItemT, ResultT], *, shared: bool, bulk: bool = False
    ) -> None:
        """Infers ``batch`` on a core thread (``bulk``: on the bulk threads), then
        post-processes and delivers it."""
        if self._recalibrating is not None and not bulk:
            # side by side, both would run slower and both figures would be wrong
            await asyncio.shield(self._recalibrating)
        try:
            if bulk:
                batch.raw, ms = await self._infer_bulk(batch.tokenized)
            else:
                batch.raw, ms = await self._infer(batch.tokenized, shared)
        except Exception as error:
            self._fail_batch(batch, error, "running")
            return
        batch.work_ms += ms
        if not bulk:  # bulk runs at low priority: not what a query's batch costs
            # side by side, each run takes longer but the lanes share the queue's work
            per_item = ms / batch.size / (self._lanes if shared else 1)
            self._recent_ms_per_item = [*self._recent_ms_per_item[-31:], per_item]
            self._lowest(per_item)
            self._sampled_at = time.monotonic()
        BATCH_SIZE.labels(self._name).observe(batch.size)
        log.debug(
            "%s batch: %d requests, %d items in %d buckets, %.1f ms model%s",
            self._name,
            len(batch.jobs),
            batch.size,
            len(batch.buckets),
            ms,
            " (shared)" if shared else "",
        )
        if batch.inline:
            try:
                post = _clocked(self._postprocess, batch)
            except Exception as error:
                self._fail_batch(batch, error, "post-processing")
                return
            self._deliver(batch, post)
            return
        task = asyncio.create_task(self._finish(batch))
        self._finishing.add(task)
        task.add_done_callback(self._finishing.discard)

    async def _infer(self, tokenized: list[Any], shared: bool) -> tuple[list[Any], float]:
        """The model on every bucket; returns the outputs and the wall time in ms. A batch
        running alone with several buckets spreads them over the lanes, one thread each."""
        lanes = 1 if shared else min(self._lanes, len(tokenized))
        if lanes == 1:
            return await self._in(self._core, _clocked, self._infer_buckets, tokenized, shared)
        return await self._spread(self._core, tokenized, lanes)

    async def _infer_bulk(self, tokenized: list[Any]) -> tuple[list[Any], float]:
        """A bulk slice's buckets spread over the bulk threads, one-thread session each."""
        assert self._bulk_core is not None
        return await self._spread(self._bulk_core, tokenized, min(self._lanes, len(tokenized)))

    async def _spread(
        self, pool: ThreadPoolExecutor | None, tokenized: list[Any], lanes: int
    ) -> tuple[list[Any], float]:
        """Every ``lanes``-th bucket on one of ``pool``'s threads (one-thread session),
        the outputs back in bucket order; with the wall time in ms."""
        started = time.perf_counter()
        parts = await asyncio.gather(
            *(
                self._in(pool, self._infer_buckets, tokenized[lane::lanes], True)
                for lane in range(lanes)
            )
        )
        raw: list[Any] = [None] * len(tokenized)
        for lane, part in enumerate(parts):
            raw[lane::lanes] = part
        return raw, (time.perf_counter() - started) * 1e3

    def _infer_buckets(self, tokenized: list[Any], shared: bool) -> list[Any]:
        return [self._backend.infer(part, shared) for part in tokenized]

    async def _finish(self, batch: _Batch[ItemT, ResultT]) -> None:
        try:
            done = await self._in(self._pre_post, _clocked, self._postprocess, batch)
        except Exception as error:
            self._fail_batch(batch, error, "post-processing")
            return
        self._deliver(batch, done)

    def _deliver(
        self,
        batch: _Batch[ItemT, ResultT],
        post: tuple[tuple[list[ResultT], list[int]], float],
    ) -> None:
        """Answers each request of ``batch`` with its slice of the results."""
        (results, tokens), ms = post
        TOKENS.labels(self._name).inc(sum(tokens))
        self._in_flight.discard(batch)
        batch.work_ms += ms
        done = time.perf_counter()
        offset = 0
        for job in batch.jobs:
            n = len(job.items)
            if not job.future.done():  # the caller may have gone away
                job.future.set_result(
                    BatchResult(
                        results=results[offset : offset + n],
                        tokens=tokens[offset : offset + n],
                        queue_ms=max(0.0, (done - job.enqueued) * 1e3 - batch.work_ms),
                        inference_ms=batch.work_ms,
                    )
                )
            offset += n

    def _postprocess(self, batch: _Batch[ItemT, ResultT]) -> tuple[list[ResultT], list[int]]:
        """Post-processes every bucket and puts results back in the batch's item order."""
        results: list[Any] = [None] * batch.size
        tokens = [0] * batch.size
        for bucket, tokenized, raw in zip(batch.buckets, batch.tokenized, batch.raw, strict=True):
            outputs = self._backend.postprocess(tokenized, raw)
            counts = self._backend.token_counts(tokenized)
            for position, index in enumerate(bucket):
                results[index] = outputs[position]
                tokens[index] = counts[position]
        return results, tokens

    # -- plumbing ------------------------------------------------------------------------

    def _run_all_steps(self, items: list[ItemT]) -> None:
        """The three steps in one thread, on every session the runs use (warm-up)."""
        buckets = plan_buckets(
            [self._backend.estimate_tokens(i) for i in items], max_tokens=self._max_batch_tokens
        )
        for part in self._tokenize_buckets(items, buckets):
            for shared in (False, True) if self._lanes > 1 else (False,):
                self._backend.postprocess(part, self._backend.infer(part, shared))

    def _time_items(self, items: list[ItemT]) -> float:
        """Model milliseconds per item of ``items`` run alone (calibration)."""
        buckets = plan_buckets(
            [self._backend.estimate_tokens(i) for i in items], max_tokens=self._max_batch_tokens
        )
        ms = 0.0
        for part in self._tokenize_buckets(items, buckets):
            started = time.perf_counter()
            self._backend.infer(part, False)
            ms += (time.perf_counter() - started) * 1e3
        return ms / len(items)

    async def _in(self, pool: ThreadPoolExecutor | None, fn: Callable[..., R], *args: Any) -> R:
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    def _fail_batch(self, batch: _Batch[ItemT, ResultT], error: Exception, step: str) -> None:
        self._in_flight.discard(batch)
        if isinstance(error, GroundwireError):
            log.warning("%s failed %s a batch: %s", self._name, step, error.message)
            failure: Exception = error
        else:
            log.error(
                "%s failed %s a batch of %d requests",
                self._name,
                step,
                len(batch.jobs),
                exc_info=(type(error), error, error.__traceback__),
            )
            failure = Unavailable(f"the {self._name} model failed on this batch")
        for job in batch.jobs:
            self._fail(job.future, failure)

    @staticmethod
    def _fail(future: asyncio.Future[Any], error: Exception) -> None:
        if not future.done():
            future.set_exception(error)
