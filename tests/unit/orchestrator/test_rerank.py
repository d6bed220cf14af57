"""Cross-encoder rerank: threshold and keep, load-adaptive planning, every fallback."""

from __future__ import annotations

import pytest

from groundwire_core.errors import Overloaded, Unavailable
from groundwire_orchestrator.clients.reranker import RerankerLoad
from groundwire_orchestrator.stages.rerank import RerankInput, RerankStage, plan_rerank
from tests.unit.orchestrator.doubles import FakeReranker, chunk

POOL = [chunk(i, f"passage number {i}") for i in range(1, 51)]


def _load(queue: int = 0, mpp: float = 10.0, ready: bool = True) -> RerankerLoad:
    return RerankerLoad(ready, queue, mpp, 256)


def _stage(reranker: FakeReranker | None, **kw: float) -> RerankStage:
    opts = {"candidates": 50, "keep": 20, "threshold": 0.5, "timeout_s": 1.0, "budget_ms": 1000.0}
    opts.update(kw)
    return RerankStage(reranker, **opts)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("load", "budget", "action", "used"),
    [
        (_load(0, 10.0), 1000.0, "full", 50),  # 500 ms fits
        (_load(0, 40.0), 1000.0, "shrunk", 25),  # 2000 ms: 25 passages fit
        (_load(1, 10.0), 1000.0, "full", 50),  # 500 queued + 500 ours = 1000
        (_load(2, 10.0), 1000.0, "skipped", 0),  # the queue alone takes the budget
        (_load(0, 0.0), 1000.0, "full", 50),  # unknown speed: plan everything
        (_load(5, 100.0), 0.0, "full", 50),  # no budget
    ],
)
def test_plan(load: RerankerLoad, budget: float, action: str, used: int) -> None:
    plan = plan_rerank(50, load, budget_ms=budget, min_candidates=5)
    assert (plan.action, plan.used, plan.planned) == (action, used, 50)


def test_plan_respects_the_batch_limit() -> None:
    plan = plan_rerank(50, RerankerLoad(True, 0, 1.0, 30), budget_ms=1000, min_candidates=5)
    assert (plan.action, plan.used, plan.planned) == ("full", 30, 30)


async def test_rerank_keeps_scores_above_threshold_up_to_keep() -> None:
    scores = {f"Doc\n\npassage number {i}": 1.0 - i / 100 for i in range(1, 51)}
    reranker = FakeReranker(load_value=_load(), scores=lambda q, p: scores[p])
    kept, report = await _stage(reranker, keep=5).run(RerankInput("q", POOL))
    assert [c.chunk_id for c in kept] == ["c1", "c2", "c3", "c4", "c5"]
    assert kept[0].score == pytest.approx(0.99)
    assert not report.fallback
    assert report.details["plan"] == "full" and report.details["candidates_used"] == "50"
    assert report.details["estimated_ms"] == "500" and report.details["budget_ms"] == "1000"
    assert reranker.calls[0][2:] == (5, 0.5)


async def test_a_loaded_reranker_scores_fewer_candidates() -> None:
    reranker = FakeReranker(load_value=_load(0, 40.0), scores=lambda q, p: 0.9)
    kept, report = await _stage(reranker).run(RerankInput("q", POOL))
    assert len(reranker.calls[0][1]) == 25, "only the top 25 fused candidates are scored"
    assert {c.chunk_id for c in kept} <= {f"c{i}" for i in range(1, 26)}
    assert not report.fallback
    d = report.details
    assert (d["plan"], d["candidates_planned"], d["candidates_used"]) == ("shrunk", "50", "25")
    assert "scored 25 of 50" in d["note"]


async def test_an_overloaded_reranker_is_skipped_with_the_fused_order() -> None:
    reranker = FakeReranker(load_value=_load(3, 10.0))
    kept, report = await _stage(reranker).run(RerankInput("q", POOL))
    assert reranker.calls == []
    assert [c.chunk_id for c in kept] == [f"c{i}" for i in range(1, 21)]
    assert report.fallback and report.dependency == "reranker"
    assert "overloaded" in report.reason and report.details["plan"] == "skipped"


@pytest.mark.parametrize(
    ("reranker", "reason"),
    [
        (FakeReranker(load_value=_load(ready=False)), "no model loaded"),
        (
            FakeReranker(load_error=Unavailable("connection refused", dependency="reranker")),
            "connection refused",
        ),
        (FakeReranker(error=Overloaded("queue full", dependency="reranker")), "queue full"),
    ],
)
async def test_reranker_trouble_falls_back_to_fused_order(
    reranker: FakeReranker, reason: str
) -> None:
    kept, report = await _stage(reranker).run(RerankInput("q", POOL))
    assert [c.chunk_id for c in kept][:3] == ["c1", "c2", "c3"] and len(kept) == 20
    assert report.fallback and reason in report.reason and report.dependency == "reranker"


async def test_no_reranker_configured() -> None:
    kept, report = await _stage(None).run(RerankInput("q", POOL[:3]))
    assert len(kept) == 3 and report.fallback and report.reason == "no reranker is configured"


async def test_a_restarted_reranker_is_used_again_once_its_info_expires() -> None:
    now = [0.0]
    reranker = FakeReranker(
        load_error=Unavailable("down", dependency="reranker"), scores=lambda q, p: 0.9
    )
    stage = RerankStage(
        reranker,
        candidates=50,
        keep=20,
        threshold=0.5,
        timeout_s=1.0,
        info_ttl_s=1.0,
        clock=lambda: now[0],
    )
    _, report = await stage.run(RerankInput("q", POOL))
    assert report.fallback
    reranker.load_error = None
    _, report = await stage.run(RerankInput("q", POOL))
    assert report.fallback, "the failure is cached for the TTL"
    assert reranker.load_calls == 1
    now[0] = 1.5
    _, report = await stage.run(RerankInput("q", POOL))
    assert not report.fallback and reranker.load_calls == 2
