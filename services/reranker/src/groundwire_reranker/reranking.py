"""The reranker's logic: validate a request, score its pairs on the batching engine, rank.

No gRPC here: the transport (server.py) converts messages to these calls and back, and
maps the errors raised here (groundwire_core.errors) once, in the server interceptor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from groundwire_core.errors import InvalidInput
from groundwire_reranker.models.cross_encoder import Pair
from groundwire_reranker.served import PairModel, ServedPairs

NO_MODEL = "no reranker model is configured"

# Run before SERVING: loads the graph's kernels for a short and a long pair.
WARM_UP: tuple[Pair, ...] = (
    ("warm-up query", "a short warm-up passage"),
    ("warm-up query", "a longer warm-up passage, " * 40),
)
# Timed after the warm-up, so Info's ms_per_passage is known before the first request:
# the rerank stage plans its budget from it. A search's batch of passages cut to the
# pair cap (every chunk is longer than the cap), so the figure is the cost of a full pair.
CALIBRATE: tuple[Pair, ...] = tuple(
    ("how do I rotate the signing keys of a deployment",
     "Rotate the signing keys from the admin console, then restart each replica. " * 60)
    for _ in range(8)
)  # fmt: skip


CrossEncoder = PairModel[float]
"""What the reranking logic needs from a model (see models.cross_encoder)."""


@dataclass(frozen=True)
class RankedPassage:
    index: int  # position in the request's passages
    score: float  # in [0, 1]


@dataclass(frozen=True)
class RerankOutcome:
    results: list[RankedPassage]  # best first
    total_tokens: int
    queue_ms: float
    inference_ms: float


@dataclass(frozen=True)
class RerankerStatus:
    ready: bool
    model_id: str
    profile: str
    max_tokens: int
    max_batch_passages: int
    queue_depth: int
    ms_per_passage: float
    quantized: bool


class Reranker(ServedPairs[float]):
    """Scores (query, passage) pairs with one cross-encoder behind a bounded queue.

    Built without a model (``model=None``), it still answers ``status`` (not ready) and
    refuses ``rerank`` with Unavailable, so callers fall back to their own order.
    """

    def __init__(
        self,
        model: CrossEncoder | None,
        *,
        max_batch_tokens: int,
        max_batch_passages: int,
        max_queue: int,
        lanes: int = 1,
    ) -> None:
        super().__init__(
            model,
            name="reranker",
            no_model=NO_MODEL,
            max_batch_tokens=max_batch_tokens,
            max_batch_items=max_batch_passages,
            max_queue=max_queue,
            warm_up=WARM_UP,
            lanes=lanes,
            calibrate=CALIBRATE,
        )

    async def rerank(
        self,
        query: str,
        passages: Sequence[str],
        *,
        top_n: int = 0,
        threshold: float | None = None,
    ) -> RerankOutcome:
        """Scores every passage against ``query``; returns them best first.

        Ties keep the request's order. ``top_n`` > 0 keeps that many; ``threshold`` drops
        scores below it. Raises InvalidInput (empty query, no passages, too many, bad
        threshold), Unavailable (no model, not warmed up, model failure) and Overloaded
        (queue full, with a retry-after).
        """
        if not query.strip():
            raise InvalidInput("query is empty")
        self._check_count(len(passages), "passages")
        if top_n < 0:
            raise InvalidInput("top_n must be 0 (keep all) or positive")
        if threshold is not None and math.isnan(threshold):
            raise InvalidInput("threshold is not a number")
        batch = await self._submit([(query, p) for p in passages])
        order = sorted(range(len(passages)), key=lambda i: (-batch.results[i], i))
        ranked = [RankedPassage(i, float(batch.results[i])) for i in order]
        if threshold is not None:
            ranked = [r for r in ranked if r.score >= threshold]
        if top_n:
            ranked = ranked[:top_n]
        return RerankOutcome(
            results=ranked,
            total_tokens=sum(batch.tokens),
            queue_ms=batch.queue_ms,
            inference_ms=batch.inference_ms,
        )

    def status(self) -> RerankerStatus:
        """The served model (empty fields until it is loaded) and the current load."""
        engine, manifest = self._served()
        return RerankerStatus(
            ready=manifest is not None,
            model_id=manifest.model_id if manifest else "",
            profile=manifest.profile if manifest else "",
            max_tokens=manifest.max_tokens if manifest else 0,
            max_batch_passages=self._max_batch_items,
            queue_depth=engine.queue_depth if engine is not None else 0,
            ms_per_passage=engine.ms_per_item if engine is not None else 0.0,
            quantized=manifest.quantized if manifest else False,
        )
