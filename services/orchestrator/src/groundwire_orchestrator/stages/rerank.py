"""Cross-encoder rerank stage, with its fallback: the fused order."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence

from groundwire_core.errors import GroundwireError
from groundwire_orchestrator.clients.reranker import RerankerClient
from groundwire_orchestrator.domain import Candidate, StageReport

log = logging.getLogger("groundwire.orchestrator.rerank")


class RerankStage:
    """Scores the top candidates with the reranker and keeps those above the threshold.

    Reranker down, overloaded, slow or not configured -> the fused order, truncated
    to ``keep``, and a report saying why.
    """

    def __init__(
        self,
        reranker: RerankerClient | None,
        *,
        candidates: int,
        keep: int,
        threshold: float,
        timeout_s: float,
    ) -> None:
        self._reranker = reranker
        self._candidates = candidates
        self._keep = keep
        self._threshold = threshold
        self._timeout_s = timeout_s

    async def run(
        self, query: str, candidates: Sequence[Candidate], *, keep: int | None = None
    ) -> tuple[list[Candidate], StageReport]:
        started = time.perf_counter()
        keep = keep or self._keep
        pool = list(candidates[: self._candidates])
        details = {"candidates_in": str(len(pool))}

        def fallback(
            reason: str, dependency: str = "reranker"
        ) -> tuple[list[Candidate], StageReport]:
            kept = pool[:keep]
            details["candidates_out"] = str(len(kept))
            ms = (time.perf_counter() - started) * 1e3
            return kept, StageReport("rerank", ms, True, reason, dependency, details)

        if self._reranker is None:
            return fallback("no reranker is configured", "")
        if not pool:
            details["candidates_out"] = "0"
            return [], StageReport("rerank", 0.0, details=details)
        try:
            scored = await self._reranker.rerank(
                query,
                [c.text for c in pool],
                top_n=keep,
                threshold=self._threshold,
                timeout_s=self._timeout_s,
            )
        except GroundwireError as error:
            log.warning("rerank fell back to fused order: %s", error.message)
            return fallback(error.message, error.dependency or "reranker")
        kept = [dataclasses.replace(pool[i], score=score) for i, score in scored]
        details["candidates_out"] = str(len(kept))
        return kept, StageReport("rerank", (time.perf_counter() - started) * 1e3, details=details)
