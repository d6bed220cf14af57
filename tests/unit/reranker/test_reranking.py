"""The reranker's logic on an injected fake cross-encoder: ranking, limits, errors, load."""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from groundwire_core.errors import BackendFailure, InvalidInput, Overloaded, Unavailable
from groundwire_reranker.models import CrossEncoderManifest, Pair, sigmoid
from groundwire_reranker.reranking import CALIBRATE, NO_MODEL, WARM_UP, Reranker
from groundwire_reranker.settings import RerankerSettings

MANIFEST = CrossEncoderManifest(
    profile="cross-encoder",
    model_id="fake/cross-encoder",
    max_tokens=64,
    query_max_tokens=48,
    pad_token_id=0,
    quantized=True,
)


class FakeCrossEncoder:
    """Scores each passage from a table (0.5 when absent); records what it was given."""

    def __init__(self, scores: dict[str, float] | None = None) -> None:
        self.scores = scores or {}
        self.loaded = False
        self.seen: list[list[Pair]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.fail_next = False

    @property
    def manifest(self) -> CrossEncoderManifest:
        return MANIFEST

    def load(self) -> None:
        self.loaded = True

    def estimate_tokens(self, item: Pair) -> int:
        return 8

    def tokenize(self, items: Sequence[Pair]) -> list[Pair]:
        self.seen.append(list(items))
        return list(items)

    def token_counts(self, batch: list[Pair]) -> list[int]:
        return [len(q.split()) + len(p.split()) + 3 for q, p in batch]

    def infer(self, batch: list[Pair], shared: bool = False) -> list[float]:
        self.entered.set()
        self.gate.wait(timeout=10)
        if self.fail_next:
            self.fail_next = False
            raise BackendFailure("the fake model failed")
        return [self.scores.get(p, 0.5) for _, p in batch]

    def postprocess(self, batch: list[Pair], raw: list[float]) -> list[float]:
        return raw


def _reranker(model: FakeCrossEncoder | None, **limits: int) -> Reranker:
    return Reranker(
        model,
        max_batch_tokens=limits.get("max_batch_tokens", 4096),
        max_batch_passages=limits.get("max_batch_passages", 8),
        max_queue=limits.get("max_queue", 4),
    )


async def test_results_are_best_first_with_request_indices_and_stable_ties() -> None:
    model = FakeCrossEncoder({"b": 0.9, "c": 0.2, "d": 0.9, "e": 0.7})
    reranker = _reranker(model)
    await reranker.start()
    outcome = await reranker.rerank("a query", ["a", "b", "c", "d", "e"])
    assert [(r.index, r.score) for r in outcome.results] == [
        (1, 0.9),
        (3, 0.9),  # tied with 1: request order
        (4, 0.7),
        (0, 0.5),
        (2, 0.2),
    ]
    assert outcome.total_tokens == 5 * (2 + 1 + 3)
    assert outcome.queue_ms >= 0 and outcome.inference_ms >= 0
    assert model.seen[-1] == [("a query", p) for p in "abcde"]
    await reranker.stop()


@pytest.mark.parametrize(
    ("top_n", "threshold", "expected"),
    [
        (0, None, [1, 3, 4, 0, 2]),
        (2, None, [1, 3]),
        (0, 0.5, [1, 3, 4, 0]),  # inclusive
        (3, 0.7, [1, 3, 4]),
        (1, 0.95, []),
        (10, None, [1, 3, 4, 0, 2]),
    ],
)
async def test_top_n_and_threshold(
    top_n: int, threshold: float | None, expected: list[int]
) -> None:
    reranker = _reranker(FakeCrossEncoder({"b": 0.9, "c": 0.2, "d": 0.8, "e": 0.7}))
    await reranker.start()
    outcome = await reranker.rerank(
        "q", ["a", "b", "c", "d", "e"], top_n=top_n, threshold=threshold
    )
    assert [r.index for r in outcome.results] == expected
    assert outcome.total_tokens == 5 * 5, "every pair was scored, whatever is returned"
    await reranker.stop()


@pytest.mark.parametrize(
    ("query", "passages", "kwargs", "message"),
    [
        ("", ["p"], {}, "query is empty"),
        (" \t\n", ["p"], {}, "query is empty"),
        ("q", [], {}, "passages is empty: send 1 to 8"),
        ("q", ["p"] * 9, {}, "at most 8 passages per call (got 9)"),
        ("q", ["p"], {"top_n": -1}, "top_n"),
        ("q", ["p"], {"threshold": float("nan")}, "threshold"),
    ],
)
async def test_invalid_requests_never_reach_the_model(
    query: str, passages: list[str], kwargs: dict[str, float], message: str
) -> None:
    model = FakeCrossEncoder()
    reranker = _reranker(model)
    await reranker.start()
    model.seen.clear()
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        await reranker.rerank(query, passages, **kwargs)  # type: ignore[arg-type]
    assert model.seen == []
    await reranker.stop()


async def test_without_a_model_it_is_unavailable_but_answers_status() -> None:
    reranker = _reranker(None)
    await reranker.start()
    with pytest.raises(Unavailable) as info:
        await reranker.rerank("q", ["p"])
    assert info.value.message == NO_MODEL and info.value.dependency == "reranker"
    status = reranker.status()
    assert (status.ready, status.model_id, status.profile, status.max_tokens) == (
        False,
        "",
        "",
        0,
    )
    assert status.max_batch_passages == 8 and status.queue_depth == 0
    with pytest.raises(InvalidInput):  # a malformed request is still malformed
        await reranker.rerank("", ["p"])
    await reranker.stop()


async def test_start_loads_and_warms_up_before_ready() -> None:
    model = FakeCrossEncoder()
    reranker = _reranker(model)
    assert model.loaded is False and model.seen == [], "constructing loads nothing"
    assert reranker.status().ready is False
    with pytest.raises(Unavailable, match="not ready"):
        await reranker.rerank("q", ["p"])
    await reranker.start()
    assert model.loaded
    assert {pair for batch in model.seen for pair in batch} == set(WARM_UP) | set(CALIBRATE)
    status = reranker.status()
    assert status.ready is True
    assert status.ms_per_passage > 0, "calibrated before the first request"
    assert (status.model_id, status.profile, status.max_tokens, status.quantized) == (
        "fake/cross-encoder",
        "cross-encoder",
        64,
        True,
    )
    await reranker.rerank("q", ["p", "p2"])
    assert reranker.status().ms_per_passage >= 0
    await reranker.stop()
    assert reranker.status().ready is False


async def test_full_queue_is_overloaded_at_once_with_retry_after() -> None:
    model = FakeCrossEncoder()
    reranker = _reranker(model, max_queue=1)
    await reranker.start()
    model.gate.clear()
    model.entered.clear()
    first = asyncio.create_task(reranker.rerank("q", ["a", "b"]))
    assert await asyncio.to_thread(model.entered.wait, 5), "the model is busy with `first`"
    # The queue (1) and the engine's one batch prepared ahead take a few more; then
    # the next request is refused at once, while the model is still blocked.
    accepted = []
    with pytest.raises(Overloaded) as info:
        for _ in range(5):
            task = asyncio.create_task(reranker.rerank("q", ["c"]))
            await asyncio.sleep(0.02)
            if task.done():
                task.result()  # raises Overloaded
            accepted.append(task)
    assert 1 <= len(accepted) <= 3
    assert info.value.retry_after_s > 0
    assert not first.done()
    model.gate.set()
    assert len((await first).results) == 2
    for task in accepted:
        assert len((await task).results) == 1
    assert len((await reranker.rerank("q", ["e"])).results) == 1, "serving again"
    await reranker.stop()


async def test_a_failed_batch_fails_its_request_and_the_next_one_works() -> None:
    model = FakeCrossEncoder({"b": 0.9})
    reranker = _reranker(model)
    await reranker.start()
    model.fail_next = True
    with pytest.raises(BackendFailure, match="fake model failed"):
        await reranker.rerank("q", ["a", "b"])
    outcome = await reranker.rerank("q", ["a", "b"])
    assert [r.index for r in outcome.results] == [1, 0]
    await reranker.stop()


def test_sigmoid_is_stable_and_float32() -> None:
    logits = np.array([-1000.0, -5.0, 0.0, 2.0, 1000.0], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning at large |x|
        scores = sigmoid(logits)
    assert scores.dtype == np.float32
    assert scores[2] == 0.5 and scores[0] == 0.0 and scores[4] == 1.0
    assert np.all(np.diff(scores) > 0)
    assert abs(float(scores[3]) - 1 / (1 + np.exp(-2.0))) < 1e-7


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    defaults = RerankerSettings()
    assert defaults.model_dir is None and defaults.port == 50052
    assert (defaults.max_batch_passages, defaults.max_queue) == (256, 16)
    monkeypatch.setenv("GROUNDWIRE_RERANKER_MODEL_DIR", str(tmp_path))
    monkeypatch.setenv("GROUNDWIRE_RERANKER_INTRA_OP_THREADS", "2")
    monkeypatch.setenv("GROUNDWIRE_RERANKER_MAX_BATCH_TOKENS", "8192")
    monkeypatch.setenv("GROUNDWIRE_RERANKER_MAX_QUEUE", "3")
    monkeypatch.setenv("GROUNDWIRE_RERANKER_MAX_BATCH_PASSAGES", "100")
    s = RerankerSettings()
    assert (s.model_dir, s.intra_op_threads, s.max_batch_tokens, s.max_queue) == (
        tmp_path,
        2,
        8192,
        3,
    )
    assert s.max_batch_passages == 100
