"""The batching engine's bulk lane (issue #31, item 14): a bulk request is cut into
slices of one batch's budget and waits behind every other request, so a query that
arrives while a long document is being embedded runs after at most the slices already
formed, and bulk work never fills the queue queries join."""

from __future__ import annotations

import asyncio
import os
import threading
from dataclasses import dataclass, field

import pytest

from groundwire_core.batching import BULK_NICE, BatchingEngine
from groundwire_core.errors import Overloaded
from tests.unit.core.test_batching import ScriptedBackend


@dataclass
class HeldBulk(ScriptedBackend):
    """Bulk slices (items "p…") wait on ``bulk_gate``; each call's thread nice value and
    name are kept."""

    bulk_gate: threading.Event = field(default_factory=threading.Event)
    bulk_started: threading.Event = field(default_factory=threading.Event)
    nice: dict[str, int] = field(default_factory=dict)

    def infer(self, batch, shared=False):  # type: ignore[no-untyped-def]
        self.nice[batch.items[0]] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        if batch.items[0].startswith("p"):
            self.bulk_started.set()
            assert self.bulk_gate.wait(10)
        return super().infer(batch, shared)


async def _engine(backend: ScriptedBackend, **kw: int) -> BatchingEngine[str, str]:
    eng: BatchingEngine[str, str] = BatchingEngine(
        backend,
        name="scripted",
        max_batch_tokens=kw.get("max_batch_tokens", 10),
        max_batch_items=64,
        max_queue=kw.get("max_queue", 4),
        max_bulk_queue=kw.get("max_bulk_queue", 2),
        warm_up=["warm"],
        lanes=kw.get("lanes", 1),
    )
    await eng.start()
    backend.forget()
    return eng


async def test_a_query_overtakes_a_bulk_request_between_its_slices() -> None:
    backend = ScriptedBackend()
    eng = await _engine(backend)
    try:
        backend.infer_gate.clear()  # hold the model on the first slice
        passages = [f"p{i:02d}" for i in range(12)]  # 3 tokens each: 3 per 10-token slice
        bulk = asyncio.create_task(eng.submit(passages, bulk=True))
        await asyncio.to_thread(backend.infer_started.wait, 10)
        query = asyncio.create_task(eng.submit(["q"]))
        await asyncio.sleep(0.05)
        backend.infer_gate.set()
        answer = await query
        result = await bulk
        assert answer.results == ["Q!"]
        assert result.results == [f"P{i:02d}!" for i in range(12)]  # in order
        assert result.tokens == [3] * 12
        runs = [e for e in backend.events if e.startswith("infer")]
        # only the slice already running goes first, then the query, then the rest of
        # the document: bulk slices are formed only when a lane is free
        assert runs.index("infer q") == 1, runs
        assert len(runs) == 5, runs  # four slices of at most 10 tokens, one query
        assert all("q" not in r or r == "infer q" for r in runs)  # never in one batch
    finally:
        await eng.stop()


async def test_bulk_requests_have_their_own_bound() -> None:
    backend = ScriptedBackend()
    eng = await _engine(backend, max_bulk_queue=1)
    try:
        backend.infer_gate.clear()
        first = asyncio.create_task(eng.submit(["aaa", "bbb"], bulk=True))
        await asyncio.to_thread(backend.infer_started.wait, 10)
        with pytest.raises(Overloaded, match="bulk queue is full"):
            await eng.submit(["ccc"], bulk=True)
        query = asyncio.create_task(eng.submit(["q"]))  # the query queue is untouched
        backend.infer_gate.set()
        assert (await query).results == ["Q!"]
        assert (await first).results == ["AAA!", "BBB!"]
    finally:
        await eng.stop()


async def test_a_cancelled_bulk_request_leaves_no_slice_to_run() -> None:
    backend = ScriptedBackend()
    eng = await _engine(backend)
    try:
        backend.infer_gate.clear()
        bulk = asyncio.create_task(eng.submit([f"p{i:02d}" for i in range(12)], bulk=True))
        await asyncio.to_thread(backend.infer_started.wait, 10)
        bulk.cancel()
        await asyncio.sleep(0)
        backend.infer_gate.set()
        assert (await eng.submit(["q"])).results == ["Q!"]
        runs = [e for e in backend.events if e.startswith("infer")]
        assert len(runs) == 2, runs  # the running slice and the query
    finally:
        await eng.stop()


async def test_with_lanes_a_query_runs_while_a_bulk_slice_is_still_running() -> None:
    """With lanes, bulk slices run on niced threads of their own and take no lane: a
    query that arrives mid-slice is answered before the slice ends, on a thread at the
    normal priority, alone (every core)."""
    backend = HeldBulk()
    backend.bulk_gate.clear()
    eng = await _engine(backend, lanes=2, max_bulk_queue=2)
    try:
        passages = [f"p{i:02d}" for i in range(6)]  # 3 tokens each: 3 per 10-token slice
        bulk = asyncio.create_task(eng.submit(passages, bulk=True))
        await asyncio.to_thread(backend.bulk_started.wait, 10)
        answer = await asyncio.wait_for(eng.submit(["q"]), 10)  # the slice is still held
        assert answer.results == ["Q!"]
        assert not bulk.done()
        backend.bulk_gate.set()
        result = await bulk
        assert result.results == [f"P{i:02d}!" for i in range(6)]
        base = os.getpriority(os.PRIO_PROCESS, 0)
        assert backend.nice["q"] == base
        bulk_nice = {v for k, v in backend.nice.items() if k.startswith("p")}
        assert bulk_nice == {min(19, base + BULK_NICE)}, backend.nice
        calls = [e for e in backend.events if e.startswith("infer")]
        assert backend.shared[calls.index("infer q")] is False  # every core: alone
        assert all(backend.shared[i] for i, e in enumerate(calls) if e != "infer q")
        threads = backend.threads["infer"]
        assert any("-bulk" in t for t in threads) and any("-core" in t for t in threads)
    finally:
        backend.bulk_gate.set()
        await eng.stop()
