"""The shared batching engine with a scripted backend: order, budgets, length buckets,
the pre/core/post pipeline, overload, failures, cancellation and shutdown."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import pytest

from groundwire_core.batching import BatchingEngine, plan_buckets
from groundwire_core.errors import InvalidInput, Overloaded, Unavailable


@dataclass
class Tokenized:
    items: list[str]
    thread: str


@dataclass
class ScriptedBackend:
    """Items are strings; an item's token count is its length, its estimate ``weight`` times
    that (a heavy backend's batches are too big to run pre and post on the event loop)."""

    weight: int = 1
    infer_s: float = 0.01
    """How long a batch holds the model once the gate is open: long enough for the runs
    that can overlap to overlap."""
    infer_gate: threading.Event = field(default_factory=threading.Event)
    infer_started: threading.Event = field(default_factory=threading.Event)
    tokenized: list[list[str]] = field(default_factory=list)
    inferred: list[list[str]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    threads: dict[str, set[str]] = field(default_factory=dict)
    shared: list[bool] = field(default_factory=list)  # infer's flag, call by call
    running: int = 0
    most_running: int = 0  # the most infer calls that were in progress at once
    loaded: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.infer_gate.set()  # open unless a test closes it

    def _seen(self, step: str) -> None:
        self.threads.setdefault(step, set()).add(threading.current_thread().name)

    def load(self) -> None:
        self.loaded = True

    def forget(self) -> None:
        """Drops what the warm-up recorded."""
        self.infer_started.clear()
        self.tokenized.clear()
        self.inferred.clear()
        self.events.clear()
        self.threads.clear()
        self.shared.clear()
        self.most_running = 0

    def estimate_tokens(self, item: str) -> int:
        return len(item) * self.weight

    def tokenize(self, items: Sequence[str]) -> Tokenized:
        self._seen("tokenize")
        if "bad-input" in items:
            raise InvalidInput("bad-input is not allowed")
        self.tokenized.append(list(items))
        self.events.append(f"tokenize {','.join(items)}")
        return Tokenized(list(items), threading.current_thread().name)

    def token_counts(self, batch: Tokenized) -> list[int]:
        return [len(i) for i in batch.items]

    def infer(self, batch: Tokenized, shared: bool = False) -> list[str]:
        self._seen("infer")
        self.shared.append(shared)
        self.events.append(f"infer {','.join(batch.items)}")
        with self._lock:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            self.infer_started.set()
            assert self.infer_gate.wait(10)
            if "boom" in batch.items:
                raise RuntimeError("the model exploded")
            time.sleep(self.infer_s)
            self.inferred.append(batch.items)
            return [i.upper() for i in batch.items]
        finally:
            with self._lock:
                self.running -= 1

    def postprocess(self, batch: Tokenized, raw: list[str]) -> list[str]:
        self._seen("postprocess")
        return [f"{r}!" for r in raw]


def _engine(
    backend: ScriptedBackend,
    *,
    max_batch_tokens: int = 1000,
    max_batch_items: int = 64,
    max_queue: int = 16,
    lanes: int = 1,
) -> BatchingEngine[str, str]:
    return BatchingEngine(
        backend,
        name="scripted",
        max_batch_tokens=max_batch_tokens,
        max_batch_items=max_batch_items,
        max_queue=max_queue,
        warm_up=["warm"],
        lanes=lanes,
    )


async def _started(backend: ScriptedBackend, **budgets: int) -> BatchingEngine[str, str]:
    eng = _engine(backend, **budgets)
    await eng.start()
    # the warm-up ran before start() returned, on every session the runs use
    lanes = budgets.get("lanes", 1)
    assert backend.inferred == [["warm"]] * (2 if lanes > 1 else 1)
    assert backend.shared == ([False, True] if lanes > 1 else [False])
    backend.forget()
    return eng


@pytest.fixture
async def backend() -> ScriptedBackend:
    return ScriptedBackend()


@pytest.fixture
async def engine(backend: ScriptedBackend) -> AsyncIterator[BatchingEngine[str, str]]:
    eng = await _started(backend)
    yield eng
    backend.infer_gate.set()
    await eng.stop()


async def _until(condition: object, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


# -- plan_buckets -----------------------------------------------------------------------


def test_buckets_sort_by_length_and_split_where_padding_would_dominate() -> None:
    estimates = [200, 3, 190, 5, 4, 210]
    assert plan_buckets(estimates, max_tokens=10_000) == [[1, 4, 3], [2, 0, 5]]


def test_similar_lengths_stay_in_one_bucket() -> None:
    assert plan_buckets([30, 32, 31, 29, 33], max_tokens=10_000) == [[3, 0, 2, 1, 4]]
    # small absolute padding is not worth another model call
    assert plan_buckets([1, 40], max_tokens=10_000) == [[0, 1]]


def test_buckets_respect_the_token_budget() -> None:
    buckets = plan_buckets([100] * 10, max_tokens=300)
    assert buckets == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    # one item larger than the budget still gets its own call
    assert plan_buckets([500, 10], max_tokens=300) == [[1], [0]]
    assert plan_buckets([], max_tokens=300) == []


# -- results, order, timings --------------------------------------------------------------


async def test_results_come_back_in_order_with_counts_and_timings(
    engine: BatchingEngine[str, str], backend: ScriptedBackend
) -> None:
    assert backend.loaded
    result = await engine.submit(["ccc", "a", "bb"])
    assert result.results == ["CCC!", "A!", "BB!"]
    assert result.tokens == [3, 1, 2]
    assert result.inference_ms > 0 and result.queue_ms >= 0
    assert engine.ms_per_item > 0
    assert engine.ready and engine.max_batch_items == 64


async def test_concurrent_requests_share_one_batch(
    engine: BatchingEngine[str, str], backend: ScriptedBackend
) -> None:
    backend.infer_gate.clear()
    first = asyncio.create_task(engine.submit(["x"]))
    await _until(backend.infer_started.is_set)  # the engine is busy with "x"
    waiting = [asyncio.create_task(engine.submit([f"r{i}a", f"r{i}bb"])) for i in range(4)]
    await _until(lambda: engine.queue_depth == 0)
    backend.infer_gate.set()
    assert (await first).results == ["X!"]
    results = await asyncio.gather(*waiting)
    assert [r.results for r in results] == [[f"R{i}A!", f"R{i}BB!"] for i in range(4)]
    # the four requests after "x" ran as one model batch
    assert sorted(backend.tokenized[-1]) == sorted(
        f"r{i}{s}" for i in range(4) for s in ("a", "bb")
    )


async def test_batches_stay_within_the_item_and_token_budgets(backend: ScriptedBackend) -> None:
    eng = await _started(backend, max_batch_tokens=10, max_batch_items=3)
    try:
        backend.infer_gate.clear()
        first = asyncio.create_task(eng.submit(["x"]))
        await _until(backend.infer_started.is_set)
        rest = [
            asyncio.create_task(eng.submit(items))
            for items in (["aa", "bb"], ["cc"], ["dddddddd"], ["e"], ["f", "g"])
        ]
        await asyncio.sleep(0.05)
        backend.infer_gate.set()
        await first
        await asyncio.gather(*rest)
    finally:
        await eng.stop()
    batches = [b for b in backend.inferred if b != ["x"]]
    for batch in batches:
        assert len(batch) <= 3 and sum(map(len, batch)) <= 10
    assert sorted(i for b in batches for i in b) == sorted(
        ["aa", "bb", "cc", "dddddddd", "e", "f", "g"]
    )


async def test_one_request_is_split_into_length_buckets(
    engine: BatchingEngine[str, str], backend: ScriptedBackend
) -> None:
    long_a, long_b = "L" * 200, "M" * 190
    result = await engine.submit([long_a, "s", long_b, "tt", "u"])
    assert result.results == [f"{long_a}!", "S!", f"{long_b}!", "TT!", "U!"]
    assert result.tokens == [200, 1, 190, 2, 1]
    # short texts were not padded to the long ones: two model calls, shortest first
    assert backend.tokenized[-2:] == [["s", "u", "tt"], [long_b, long_a]]


# -- the pipeline --------------------------------------------------------------------------


async def test_next_batch_is_tokenized_while_the_current_one_runs() -> None:
    backend = ScriptedBackend(weight=100)
    engine = await _started(backend, max_batch_tokens=100_000)
    try:
        await _pipelined(engine, backend)
    finally:
        backend.infer_gate.set()
        await engine.stop()


async def _pipelined(engine: BatchingEngine[str, str], backend: ScriptedBackend) -> None:
    backend.infer_gate.clear()
    first = asyncio.create_task(engine.submit(["one"]))
    await _until(backend.infer_started.is_set)
    second = asyncio.create_task(engine.submit(["two"]))
    await _until(lambda: "tokenize two" in backend.events)
    assert "infer two" not in backend.events  # "one" still holds the model
    assert not first.done()
    backend.infer_gate.set()
    assert (await first).results == ["ONE!"]
    assert (await second).results == ["TWO!"]
    assert backend.events.index("tokenize two") < backend.events.index("infer two")
    # pre and post share one worker thread, the model runs on another
    assert backend.threads["tokenize"] == backend.threads["postprocess"]
    assert backend.threads["tokenize"].isdisjoint(backend.threads["infer"])
    assert threading.current_thread().name not in backend.threads["infer"]


async def test_small_batches_run_pre_and_post_on_the_event_loop(
    engine: BatchingEngine[str, str], backend: ScriptedBackend
) -> None:
    assert (await engine.submit(["a query"])).results == ["A QUERY!"]
    loop_thread = threading.current_thread().name
    assert backend.threads["tokenize"] == backend.threads["postprocess"] == {loop_thread}
    assert loop_thread not in backend.threads["infer"]  # the model never runs on the loop


async def test_only_one_batch_is_prepared_ahead(
    engine: BatchingEngine[str, str], backend: ScriptedBackend
) -> None:
    backend.infer_gate.clear()
    first = asyncio.create_task(engine.submit(["one"]))
    await _until(backend.infer_started.is_set)
    second = asyncio.create_task(engine.submit(["two"]))
    await _until(lambda: "tokenize two" in backend.events)
    later = [asyncio.create_task(engine.submit([f"n{i}"])) for i in range(3)]
    await asyncio.sleep(0.05)
    # the later requests wait in the queue, so they can still join one bigger batch
    assert engine.queue_depth == 3
    backend.infer_gate.set()
    await asyncio.gather(first, second, *later)
    assert sorted(backend.tokenized[-1]) == ["n0", "n1", "n2"]


# -- overload -------------------------------------------------------------------------------


async def test_full_queue_is_overloaded_at_once_and_recovers(backend: ScriptedBackend) -> None:
    eng = await _started(backend, max_queue=1, max_batch_items=1)
    try:
        backend.infer_gate.clear()
        running = asyncio.create_task(eng.submit(["a"]))
        await _until(backend.infer_started.is_set)
        prepared = asyncio.create_task(eng.submit(["b"]))
        await _until(lambda: "tokenize b" in backend.events)
        queued = asyncio.create_task(eng.submit(["c"]))
        await _until(lambda: eng.queue_depth == 1)

        started = time.perf_counter()
        with pytest.raises(Overloaded) as info:
            await eng.submit(["d"])
        assert time.perf_counter() - started < 0.05
        assert info.value.retry_after_s >= 0.1
        assert "queue is full" in info.value.message

        backend.infer_gate.set()
        assert [r.results for r in await asyncio.gather(running, prepared, queued)] == [
            ["A!"],
            ["B!"],
            ["C!"],
        ]
        assert (await eng.submit(["e"])).results == ["E!"]  # serving again
    finally:
        backend.infer_gate.set()
        await eng.stop()


# -- lanes ----------------------------------------------------------------------------------


async def test_with_lanes_waiting_batches_run_side_by_side_on_one_thread_each(
    backend: ScriptedBackend,
) -> None:
    eng = await _started(backend, lanes=2, max_batch_items=1)
    try:
        backend.infer_gate.clear()
        first = asyncio.create_task(eng.submit(["a"]))
        await _until(backend.infer_started.is_set)  # nothing behind it: it ran alone
        rest = [asyncio.create_task(eng.submit([item])) for item in ("b", "c", "d", "e")]
        await _until(lambda: eng.queue_depth == 3)  # "b" is prepared, three wait
        backend.infer_gate.set()
        assert (await first).results == ["A!"]
        assert [r.results for r in await asyncio.gather(*rest)] == [
            ["B!"],
            ["C!"],
            ["D!"],
            ["E!"],
        ]
        assert backend.shared[:3] == [False, True, True]  # "b" and "c" had work behind them
        assert backend.most_running == 2  # side by side, never more than the lanes
        assert len(backend.threads["infer"]) == 2
    finally:
        backend.infer_gate.set()
        await eng.stop()


async def test_with_lanes_a_request_alone_gets_every_core(backend: ScriptedBackend) -> None:
    eng = await _started(backend, lanes=2)
    try:
        for item in ("a", "b", "c"):
            assert (await eng.submit([item])).results == [item.upper() + "!"]
        assert backend.shared == [False, False, False]
        assert backend.most_running == 1
    finally:
        await eng.stop()


async def test_with_lanes_a_lone_batch_spreads_its_buckets_over_them(
    backend: ScriptedBackend,
) -> None:
    eng = await _started(backend, lanes=2, max_batch_tokens=8)
    try:
        result = await eng.submit(["aaaa", "bbbb", "cccc", "dddd", "eeee"])
        assert result.results == ["AAAA!", "BBBB!", "CCCC!", "DDDD!", "EEEE!"]
        assert sorted(map(sorted, backend.inferred)) == [
            ["aaaa", "bbbb"],
            ["cccc", "dddd"],
            ["eeee"],
        ]
        assert backend.shared == [True, True, True]  # three buckets, one thread each
        assert backend.most_running == 2
    finally:
        await eng.stop()


async def test_one_lane_runs_one_batch_at_a_time_on_every_core(backend: ScriptedBackend) -> None:
    eng = await _started(backend, max_batch_items=1)
    try:
        backend.infer_gate.clear()
        waiting = [asyncio.create_task(eng.submit([item])) for item in ("a", "b", "c", "d")]
        await _until(backend.infer_started.is_set)
        backend.infer_gate.set()
        await asyncio.gather(*waiting)
        assert backend.shared == [False] * 4
        assert backend.most_running == 1
    finally:
        await eng.stop()


async def test_start_logs_how_the_model_runs(
    backend: ScriptedBackend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="groundwire.batching")
    for lanes, said in ((2, "2 lanes"), (1, "one run at a time")):
        eng = await _started(backend, lanes=lanes)
        await eng.stop()
        backend.forget()
        assert f"scripted model warmed up: {said}" in caplog.text


def test_lanes_must_be_positive(backend: ScriptedBackend) -> None:
    with pytest.raises(ValueError, match="lanes"):
        _engine(backend, lanes=0)


# -- failures -------------------------------------------------------------------------------


@pytest.mark.parametrize("weight", [1, 100], ids=["on-the-loop", "on-worker-threads"])
async def test_a_failing_batch_fails_its_requests_only(weight: int) -> None:
    backend = ScriptedBackend(weight=weight)
    engine = await _started(backend, max_batch_tokens=100_000)
    try:
        with pytest.raises(Unavailable, match="failed on this batch") as info:
            await engine.submit(["boom"])
        assert "exploded" not in info.value.message  # internals stay in the log
        with pytest.raises(InvalidInput, match="bad-input"):
            await engine.submit(["bad-input"])
        assert (await engine.submit(["fine"])).results == ["FINE!"]
    finally:
        await engine.stop()


async def test_a_cancelled_request_is_not_run(
    engine: BatchingEngine[str, str], backend: ScriptedBackend
) -> None:
    backend.infer_gate.clear()
    first = asyncio.create_task(engine.submit(["one"]))
    await _until(backend.infer_started.is_set)
    second = asyncio.create_task(engine.submit(["two"]))
    await _until(lambda: "tokenize two" in backend.events)
    gone = asyncio.create_task(engine.submit(["gone"]))
    await _until(lambda: engine.queue_depth == 1)
    gone.cancel()
    kept = asyncio.create_task(engine.submit(["kept"]))
    backend.infer_gate.set()
    await asyncio.gather(first, second)
    assert (await kept).results == ["KEPT!"]
    assert not any("gone" in batch for batch in backend.tokenized)


async def test_submit_validates(engine: BatchingEngine[str, str]) -> None:
    with pytest.raises(InvalidInput, match="no items"):
        await engine.submit([])
    with pytest.raises(InvalidInput, match="at most 64"):
        await engine.submit(["x"] * 65)


async def test_not_started_and_stopped_engines_are_unavailable(backend: ScriptedBackend) -> None:
    with pytest.raises(Unavailable, match="not ready"):
        await _engine(backend).submit(["x"])
    eng = await _started(backend)
    backend.infer_gate.clear()
    running = asyncio.create_task(eng.submit(["a"]))
    await _until(backend.infer_started.is_set)
    prepared = asyncio.create_task(eng.submit(["b"]))
    await _until(lambda: "tokenize b" in backend.events)
    queued = asyncio.create_task(eng.submit(["c"]))
    await _until(lambda: eng.queue_depth == 1)
    await eng.stop()
    backend.infer_gate.set()
    for task in (running, prepared, queued):
        with pytest.raises(Unavailable, match="shutting down"):
            await task
    with pytest.raises(Unavailable, match="not ready"):
        await eng.submit(["x"])


async def test_queue_depth_batch_size_and_tokens_reach_prometheus() -> None:
    from prometheus_client import REGISTRY

    backend = ScriptedBackend()
    eng = BatchingEngine(
        backend,
        name="metered",
        max_batch_tokens=1000,
        max_batch_items=2,
        max_queue=16,
        warm_up=["warm"],
    )
    await eng.start()

    def value(name: str) -> float:
        return REGISTRY.get_sample_value(name, {"service": "metered"}) or 0.0

    sizes_before = value("groundwire_batch_size_count")
    items_before = value("groundwire_batch_size_sum")
    tokens_before = value("groundwire_tokens_total")
    backend.infer_gate.clear()
    first = asyncio.create_task(eng.submit(["aaaa", "bb"]))
    assert await asyncio.to_thread(backend.infer_started.wait, 10)
    rest = [asyncio.create_task(eng.submit([c])) for c in ("c", "c", "c", "d", "d", "d")]
    await asyncio.sleep(0.05)
    assert value("groundwire_batch_queue_depth") >= 3, "queued requests are visible"
    backend.infer_gate.set()
    await asyncio.gather(first, *rest)
    assert value("groundwire_batch_size_sum") - items_before == 8
    assert value("groundwire_batch_size_count") - sizes_before >= 2
    assert value("groundwire_tokens_total") - tokens_before == 12
    await eng.stop()
