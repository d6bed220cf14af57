"""A bounded queue in front of one model, batched by a token budget.

Shared by the embedder (texts) and the reranker (query-passage pairs). No gRPC here.
Requests join a bounded queue (full -> Overloaded at once, with a retry-after); one
batcher task drains it, packs requests into one model batch within the token and
item budgets, and runs the backend's three steps in worker threads: tokenize (pre),
infer (core), postprocess (post). Each request gets its own items' results with its
queue and inference times.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from groundwire_core.errors import GroundwireError, InvalidInput, Overloaded, Unavailable

log = logging.getLogger("groundwire.batching")

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")
ItemT_contra = TypeVar("ItemT_contra", contravariant=True)
ResultT_co = TypeVar("ResultT_co", covariant=True)


class Backend(Protocol[ItemT_contra, ResultT_co]):
    """A model split into the three steps the engine schedules."""

    def load(self) -> None:
        """Loads the model (blocking; called in a worker thread)."""

    def estimate_tokens(self, item: ItemT_contra) -> int:
        """Padded length estimate before tokenizing, for packing batches."""
        ...

    def tokenize(self, items: Sequence[ItemT_contra]) -> Any:
        """Pre: tokenize and pad; returns the batch the other two steps take."""

    def token_counts(self, batch: Any) -> list[int]:
        """Real tokens per item of ``batch``."""
        ...

    def infer(self, batch: Any) -> Any:
        """Core: run the model."""

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
    ) -> None:
        self._backend = backend
        self._name = name
        self._max_batch_tokens = max_batch_tokens
        self._max_batch_items = max_batch_items
        self._queue: asyncio.Queue[_Job[ItemT, ResultT]] = asyncio.Queue(maxsize=max_queue)
        self._warm_up = list(warm_up)
        self._worker: asyncio.Task[None] | None = None
        self._ready = False
        self._recent_ms_per_item: list[float] = []

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
        """Median inference milliseconds per item over recent batches (0 if none)."""
        recent = sorted(self._recent_ms_per_item)
        return recent[len(recent) // 2] if recent else 0.0

    async def start(self) -> None:
        """Loads the model and runs the warm-up items; raises if loading fails."""
        await asyncio.to_thread(self._backend.load)
        if self._warm_up:
            await asyncio.to_thread(self._run_steps, self._warm_up)
        self._worker = asyncio.create_task(self._run(), name=f"{self._name}-batcher")
        self._ready = True

    async def stop(self) -> None:
        self._ready = False
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
        while not self._queue.empty():
            job = self._queue.get_nowait()
            if not job.future.done():
                job.future.set_exception(Unavailable(f"the {self._name} is shutting down"))

    async def submit(self, items: Sequence[ItemT]) -> BatchResult[ResultT]:
        """Runs ``items`` through the model, in order.

        Raises InvalidInput (no items, too many), Overloaded (queue full),
        Unavailable (not started, or the model failed on the batch).
        """
        if not self._ready:
            raise Unavailable(f"the {self._name} is not ready")
        if not items:
            raise InvalidInput("the request has no items")
        if len(items) > self._max_batch_items:
            raise InvalidInput(f"at most {self._max_batch_items} items per call (got {len(items)})")
        job: _Job[ItemT, ResultT] = _Job(
            list(items), time.perf_counter(), asyncio.get_running_loop().create_future()
        )
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            raise Overloaded(
                f"the {self._name} queue is full ({self._queue.maxsize} requests)",
                retry_after_s=max(0.1, self.ms_per_item * self._queue.maxsize / 1000),
            ) from None
        return await job.future

    def _take_batch(self, first: _Job[ItemT, ResultT]) -> list[_Job[ItemT, ResultT]]:
        """``first`` plus queued jobs while the batch stays within both budgets."""
        jobs = [first]
        n_items = len(first.items)
        longest = max(self._backend.estimate_tokens(t) for t in first.items)
        while not self._queue.empty():
            nxt = self._queue._queue[0]  # type: ignore[attr-defined]  # peek: no public API
            nxt_longest = max(longest, *(self._backend.estimate_tokens(t) for t in nxt.items))
            total = n_items + len(nxt.items)
            if total > self._max_batch_items or nxt_longest * total > self._max_batch_tokens:
                break
            jobs.append(self._queue.get_nowait())
            n_items, longest = total, nxt_longest
        return jobs

    def _run_steps(self, items: list[ItemT]) -> tuple[Sequence[ResultT], list[int]]:
        batch = self._backend.tokenize(items)
        raw = self._backend.infer(batch)
        return self._backend.postprocess(batch, raw), self._backend.token_counts(batch)

    async def _run(self) -> None:
        while True:
            first = await self._queue.get()
            jobs = self._take_batch(first)
            items = [t for j in jobs for t in j.items]
            started = time.perf_counter()
            try:
                results, tokens = await asyncio.to_thread(self._run_steps, items)
            except Exception as error:  # a failed batch fails its requests, not the server
                log.exception("%s failed on a batch of %d items", self._name, len(items))
                failure = (
                    error
                    if isinstance(error, GroundwireError)
                    else Unavailable(f"the {self._name} model failed on this batch")
                )
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(failure)
                continue
            inference_ms = (time.perf_counter() - started) * 1e3
            self._recent_ms_per_item = [*self._recent_ms_per_item[-31:], inference_ms / len(items)]
            offset = 0
            for job in jobs:
                n = len(job.items)
                if not job.future.done():  # the caller may have gone away
                    job.future.set_result(
                        BatchResult(
                            results=list(results[offset : offset + n]),
                            tokens=tokens[offset : offset + n],
                            queue_ms=(started - job.enqueued) * 1e3,
                            inference_ms=inference_ms,
                        )
                    )
                offset += n
