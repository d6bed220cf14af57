"""Cross-encoder rerank stage, load-adaptive, with its fallback: the fused order.

Before calling the reranker the stage reads its Info (cached for a moment): not ready
-> skip; otherwise it estimates how long scoring ``n`` passages would take right now,

    estimated_ms(n) = queue_depth * pool * ms_per_passage   (requests ahead of us,
                      each assumed as large as ours: conservative)
                    + n * ms_per_passage                      (our own passages)

and, given the stage's latency budget, scores only as many of the top fused candidates
as fit (``shrunk``), or skips when fewer than ``min_candidates`` would (``skipped``).
An unknown ms_per_passage (0, a cold reranker) plans the whole pool. Candidates that
were not scored are not kept: the threshold only holds for scored ones.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from groundwire_core.errors import GroundwireError
from groundwire_orchestrator.clients.interfaces import Reranker
from groundwire_orchestrator.clients.reranker import RerankerLoad
from groundwire_orchestrator.domain import Candidate, StageReport
from groundwire_orchestrator.text.windows import best_window

log = logging.getLogger("groundwire.orchestrator.rerank")


@dataclass(frozen=True)
class RerankPlan:
    action: Literal["full", "shrunk", "skipped"]
    planned: int
    used: int
    estimated_ms: float | None
    """None when the reranker does not know its speed yet."""
    reason: str = ""


def plan_rerank(
    pool: int, load: RerankerLoad, *, budget_ms: float, min_candidates: int
) -> RerankPlan:
    """How many of ``pool`` candidates to score under ``budget_ms`` (0 = no budget)."""
    planned = min(pool, load.max_batch_passages) if load.max_batch_passages else pool
    mpp = load.ms_per_passage
    if budget_ms <= 0 or mpp <= 0:
        estimate = None if mpp <= 0 else (load.queue_depth * pool + planned) * mpp
        return RerankPlan("full", planned, planned, estimate)
    queue_ms = load.queue_depth * pool * mpp
    full_ms = queue_ms + planned * mpp
    if full_ms <= budget_ms:
        return RerankPlan("full", planned, planned, full_ms)
    fits = max(0, math.floor((budget_ms - queue_ms) / mpp))
    if fits >= min_candidates:
        used = min(fits, planned)
        return RerankPlan(
            "shrunk",
            planned,
            used,
            queue_ms + used * mpp,
            f"the reranker is loaded ({load.queue_depth} queued, {mpp:.1f} ms/passage): "
            f"scored {used} of {planned} candidates to stay within {budget_ms:g} ms",
        )
    return RerankPlan(
        "skipped",
        planned,
        0,
        full_ms,
        f"the reranker is overloaded ({load.queue_depth} queued, {mpp:.1f} ms/passage): "
        f"about {full_ms:.0f} ms exceeds the {budget_ms:g} ms budget, fused order used",
    )


@dataclass(frozen=True)
class RerankInput:
    query: str
    candidates: Sequence[Candidate]
    """Fused candidates, best first."""
    keep: int | None = None
    """Results kept (None: the stage's ``keep``)."""


class RerankerLoadCache:
    """The reranker's Info, cached for ``ttl_s`` (failures too, so a down reranker is
    not probed on every request, while a restarted one is noticed within ``ttl_s``).
    One is shared by everything that reads the Info (the rerank stage, the extractive
    answer's cross-encoder, the NLI verifier's readiness): one probe per ``ttl_s``."""

    def __init__(
        self,
        reranker: Reranker,
        *,
        ttl_s: float,
        timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reranker = reranker
        self._ttl_s = ttl_s
        self._timeout_s = timeout_s
        self._clock = clock
        self._value: RerankerLoad | GroundwireError | None = None
        self._expires = 0.0

    async def get(self) -> RerankerLoad:
        """The current load. Raises the GroundwireError Info failed with."""
        now = self._clock()
        if self._value is None or now >= self._expires:
            try:
                self._value = await self._reranker.load(timeout_s=self._timeout_s)
            except GroundwireError as error:
                self._value = error
            self._expires = now + self._ttl_s
        if isinstance(self._value, GroundwireError):
            raise self._value
        return self._value

    def forget(self) -> None:
        """Drops the cached value (after a Rerank call failed)."""
        self._value = None


class RerankStage:
    """Scores the top candidates with the reranker and keeps those above the threshold.

    Reranker down, not ready, overloaded, slow or not configured -> the fused order,
    truncated to ``keep``, and a report saying why.
    """

    def __init__(
        self,
        reranker: Reranker | None,
        *,
        candidates: int,
        keep: int,
        threshold: float,
        timeout_s: float,
        budget_ms: float = 0.0,
        min_candidates: int = 5,
        info_ttl_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        load: RerankerLoadCache | None = None,
    ) -> None:
        """``load``: the reranker's Info cache shared with other readers (one of this
        stage's own, from ``info_ttl_s``, when None)."""
        self._reranker = reranker
        self._candidates = candidates
        self._keep = keep
        self._threshold = threshold
        self._timeout_s = timeout_s
        self._budget_ms = budget_ms
        self._min_candidates = min_candidates
        if load is None and reranker is not None:
            load = RerankerLoadCache(
                reranker, ttl_s=info_ttl_s, timeout_s=min(timeout_s, 1.0), clock=clock
            )
        self._load = load

    async def will_skip(self) -> bool:
        """Whether a full pool would be left unscored now (no reranker, down, not
        ready, or its load past the budget), from the same cached Info ``run`` reads:
        retrieval asks it to choose late interaction in the cross-encoder's place."""
        if self._load is None:
            return True
        try:
            load = await self._load.get()
        except GroundwireError:
            return True
        if not load.ready:
            return True
        plan = plan_rerank(
            self._candidates, load, budget_ms=self._budget_ms, min_candidates=self._min_candidates
        )
        return plan.action == "skipped"

    async def run(self, inp: RerankInput) -> tuple[list[Candidate], StageReport]:
        """Reranked candidates (or the fused order), best first; never raises for the
        reranker."""
        started = time.perf_counter()
        keep = inp.keep or self._keep
        pool = list(inp.candidates[: self._candidates])
        details = {"candidates_in": str(len(pool))}
        if self._budget_ms > 0:
            details["budget_ms"] = f"{self._budget_ms:g}"

        def fallback(
            reason: str, dependency: str = "reranker"
        ) -> tuple[list[Candidate], StageReport]:
            kept = pool[:keep]
            details["candidates_out"] = str(len(kept))
            ms = (time.perf_counter() - started) * 1e3
            return kept, StageReport("rerank", ms, True, reason, dependency, details)

        if self._reranker is None or self._load is None:
            return fallback("no reranker is configured", "")
        if not pool:
            details["candidates_out"] = "0"
            return [], StageReport("rerank", 0.0, details=details)
        try:
            load = await self._load.get()
        except GroundwireError as error:
            log.warning("rerank fell back to fused order: %s", error.message)
            return fallback(error.message, error.dependency or "reranker")
        if not load.ready:
            return fallback("the reranker has no model loaded")
        plan = plan_rerank(
            len(pool), load, budget_ms=self._budget_ms, min_candidates=self._min_candidates
        )
        details.update(
            plan=plan.action,
            candidates_planned=str(plan.planned),
            candidates_used=str(plan.used),
            queue_depth=str(load.queue_depth),
            ms_per_passage=f"{load.ms_per_passage:.2f}",
            pair_tokens=str(load.max_tokens),
        )
        if plan.estimated_ms is not None:
            details["estimated_ms"] = f"{plan.estimated_ms:.0f}"
        if plan.action == "skipped":
            return fallback(plan.reason)
        scored_pool = pool[: plan.used]
        try:
            scored = await self._reranker.rerank(
                inp.query,
                [best_window(inp.query, c.text, load.max_tokens) for c in scored_pool],
                top_n=keep,
                threshold=self._threshold,
                timeout_s=self._timeout_s,
            )
        except GroundwireError as error:
            self._load.forget()
            log.warning("rerank fell back to fused order: %s", error.message)
            return fallback(error.message, error.dependency or "reranker")
        kept = [dataclasses.replace(scored_pool[i], score=s) for i, s in scored if i < len(
            scored_pool)]
        details["candidates_out"] = str(len(kept))
        ms = (time.perf_counter() - started) * 1e3
        if plan.action == "shrunk":
            details["note"] = plan.reason
        return kept, StageReport("rerank", ms, details=details)
