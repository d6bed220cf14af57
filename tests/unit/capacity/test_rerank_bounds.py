"""What bounds a rerank's cost on CPU: the pair cap, the window of each candidate the
cross-encoder reads, and a ms/passage known before the first request."""

from __future__ import annotations

import asyncio
from typing import Any

from groundwire_core.batching import BatchingEngine
from groundwire_orchestrator.text.sentences import approx_tokens
from groundwire_orchestrator.text.windows import best_window
from groundwire_reranker.models.cross_encoder import capped
from groundwire_reranker.models.manifest import CrossEncoderManifest
from tests.unit.core.test_batching import ScriptedBackend

FILLER = "The release notes list every change of the quarter in the order it shipped. "
ANSWER = "To rotate the signing keys, run groundwire keys rotate and restart each replica. "
CHUNK = "Guide > Operations\n\n" + FILLER * 12 + ANSWER + FILLER * 12


def test_a_long_candidate_is_cut_to_the_window_that_answers() -> None:
    window = best_window("how do I rotate the signing keys", CHUNK, max_tokens=128)
    assert "groundwire keys rotate" in window
    assert window.startswith("Guide > Operations\n\n"), "the heading line is kept"
    assert approx_tokens("how do I rotate the signing keys") + approx_tokens(window) <= 128
    # the first 128 tokens — what a plain truncation keeps — do not hold the answer
    assert "rotate" not in CHUNK[: 128 * 4]


def test_short_candidates_and_an_uncapped_reranker_keep_the_whole_text() -> None:
    assert best_window("signing keys", "Guide\n\nRotate them.", max_tokens=128) == (
        "Guide\n\nRotate them."
    )
    assert best_window("signing keys", CHUNK, max_tokens=0) == CHUNK


def test_a_query_with_no_words_in_the_passage_keeps_its_beginning() -> None:
    window = best_window("kubernetes autoscaling", CHUNK, max_tokens=64)
    assert window.startswith("Guide > Operations\n\nThe release notes")
    assert approx_tokens(window) <= 64


def test_the_pair_cap_cuts_the_manifest_and_keeps_the_query_share() -> None:
    manifest = CrossEncoderManifest(
        profile="bge-reranker-v2-m3",
        model_id="m",
        max_tokens=512,
        query_max_tokens=384,
        pad_token_id=1,
    )
    cut = capped(manifest, 128)
    assert (cut.max_tokens, cut.query_max_tokens) == (128, 96)
    assert capped(manifest, 0) is manifest
    assert capped(manifest, 1024) is manifest


def _engine(backend: ScriptedBackend, name: str, **kw: Any) -> BatchingEngine[str, str]:
    """A small engine over ``backend``; ``kw``: calibration, lanes, recalibration."""
    return BatchingEngine(
        backend, name=name, max_batch_tokens=1000, max_batch_items=8, max_queue=4, **kw
    )


async def test_calibration_makes_ms_per_item_known_before_any_request() -> None:
    cold = _engine(ScriptedBackend(), "cold")
    await cold.start()
    assert cold.ms_per_item == 0.0, "without calibration: unknown until a request"
    await cold.stop()
    backend = ScriptedBackend()
    calibrated = _engine(backend, "calibrated", calibrate=["pair"] * 4)
    await calibrated.start()
    try:
        assert calibrated.ms_per_item > 0.0
        assert ["pair"] * 4 in backend.inferred, "the calibration items were run"
    finally:
        await calibrated.stop()


async def test_a_stale_figure_is_measured_again_while_the_engine_is_idle() -> None:
    """A plan that skips the reranker because its figure is high sends it no work, so
    no batch would ever replace a figure measured under a load long gone."""
    backend = ScriptedBackend()
    engine = _engine(backend, "recal", calibrate=["pair"] * 2, recalibrate_after_s=0.05)
    await engine.start()
    try:
        assert backend.inferred.count(["pair", "pair"]) == 1
        await _slow_batch(engine, backend)  # a figure far over the calibration's
        assert engine.ms_per_item > 0  # fresh: no recalibration yet
        assert backend.inferred.count(["pair", "pair"]) == 1
        await asyncio.sleep(0.1)
        assert engine.ms_per_item > 0  # stale: answered, and measured again meanwhile
        for _ in range(200):  # bounded by count: the recalibration is one batch
            if backend.inferred.count(["pair", "pair"]) == 2:
                break
            await asyncio.sleep(0.01)
        assert backend.inferred.count(["pair", "pair"]) == 2
    finally:
        await engine.stop()


async def _slow_batch(engine: BatchingEngine[str, str], backend: ScriptedBackend) -> None:
    """One request whose batch holds the model ~50 ms: its figure is far over the
    scripted calibration's (microseconds)."""
    backend.infer_started.clear()
    backend.infer_gate.clear()
    request = asyncio.create_task(engine.submit(["work"]))
    for _ in range(200):
        if backend.infer_started.is_set():
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    backend.infer_gate.set()
    await request


async def test_a_stale_figure_near_the_lowest_is_not_measured_again() -> None:
    """The first search after a pause: its own batch times the model anew. Measuring
    then put the calibration beside it (both slower: the search missed its budget and
    its figure, 2.6x the idle one, made the next searches skip the cross-encoder)."""
    # a batch of one item holds the model 50 ms, the calibration's one item too: the
    # figures agree unless a batch waited over 25 ms more for a thread
    backend = ScriptedBackend(infer_s=0.05)
    engine = _engine(backend, "recal", calibrate=["pair"], recalibrate_after_s=0.0)
    await engine.start()
    try:
        for _ in range(5):
            assert engine.ms_per_item > 0
            await engine.submit(["work"])
            await asyncio.sleep(0.01)
        assert backend.inferred.count(["pair"]) == 1, "only at start"
    finally:
        await engine.stop()


async def test_a_batch_never_runs_beside_a_recalibration() -> None:
    backend = ScriptedBackend()
    engine = _engine(
        backend,
        "recal",
        lanes=2,  # two core threads: side by side would be possible
        calibrate=["pair"] * 2,
        recalibrate_after_s=0.05,
    )
    await engine.start()
    try:
        await _slow_batch(engine, backend)
        await asyncio.sleep(0.1)
        backend.forget()
        backend.infer_gate.clear()  # the recalibration will hold the model
        engine.ms_per_item  # noqa: B018 - stale and high: starts a recalibration
        for _ in range(200):
            if backend.infer_started.is_set():
                break
            await asyncio.sleep(0.01)
        assert backend.events == ["tokenize pair,pair", "infer pair,pair"], "held"
        request = asyncio.create_task(engine.submit(["work"]))
        await asyncio.sleep(0.1)
        assert not request.done()
        backend.infer_gate.set()
        await request
        assert backend.inferred == [["pair", "pair"], ["work"]], "in turn"
        assert backend.most_running == 1, "the request's batch ran beside the calibration"
    finally:
        await engine.stop()


async def test_a_busy_engine_is_not_recalibrated() -> None:
    backend = ScriptedBackend()
    engine = _engine(backend, "busy", calibrate=["pair"], recalibrate_after_s=0.0)
    await engine.start()
    try:
        backend.forget()  # what start() ran: the calibration set infer_started
        backend.infer_gate.clear()  # the next batch holds the model
        request = asyncio.create_task(engine.submit(["work"]))
        for _ in range(200):
            if backend.infer_started.is_set():
                break
            await asyncio.sleep(0.01)
        assert backend.infer_started.is_set(), "the work batch holds the model"
        calls = backend.inferred.count(["pair"])
        engine.ms_per_item  # noqa: B018 - read while a batch holds the model
        backend.infer_gate.set()
        await request
        assert backend.inferred.count(["pair"]) == calls
    finally:
        await engine.stop()
