"""The entailment logic: validate a request, run its (premise, hypothesis) pairs through the
NLI model on its own batching engine, return per-label probabilities.

An NLI model is served by the reranker process beside (or instead of) the relevance
cross-encoder (GROUNDWIRE_RERANKER_NLI_MODEL_DIR): both are cross-encoders on the same
runtime, and the citation check calls it where the reranker is already a dependency.
It has its own engine, so a burst of checks cannot fill the rerank queue, with the same
budgets and the same overload behaviour (queue full -> Overloaded at once). No gRPC here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from groundwire_core.errors import InvalidInput
from groundwire_reranker.models.cross_encoder import Pair
from groundwire_reranker.models.nli import LabelProbs
from groundwire_reranker.served import PairModel, ServedPairs

NO_NLI_MODEL = "no entailment (NLI) model is configured"

WARM_UP: tuple[Pair, ...] = (
    ("a short warm-up premise.", "a warm-up hypothesis"),
    ("a longer warm-up premise, " * 40, "a warm-up hypothesis"),
)


NliModel = PairModel[LabelProbs]
"""What the entailment logic needs from a model (see models.nli.OnnxNliModel)."""


@dataclass(frozen=True)
class EntailOutcome:
    probabilities: list[LabelProbs]  # per pair, in request order
    total_tokens: int
    queue_ms: float
    inference_ms: float


@dataclass(frozen=True)
class EntailerStatus:
    ready: bool
    model_id: str
    max_tokens: int


class Entailer(ServedPairs[LabelProbs]):
    """One NLI model behind a bounded queue; without a model, ``entail`` is Unavailable."""

    def __init__(
        self,
        model: NliModel | None,
        *,
        max_batch_tokens: int,
        max_batch_pairs: int,
        max_queue: int,
        lanes: int = 1,
    ) -> None:
        super().__init__(
            model,
            name="entailment",
            no_model=NO_NLI_MODEL,
            max_batch_tokens=max_batch_tokens,
            max_batch_items=max_batch_pairs,
            max_queue=max_queue,
            warm_up=WARM_UP,
            lanes=lanes,
        )

    async def entail(self, pairs: Sequence[Pair]) -> EntailOutcome:
        """Probabilities (entailment, neutral, contradiction) of each pair, in order.

        Raises InvalidInput (no pairs, too many, an empty hypothesis), Unavailable (no
        model, not warmed up, model failure) and Overloaded (queue full, retry-after).
        """
        self._check_count(len(pairs), "pairs")
        for i, (_, hypothesis) in enumerate(pairs):
            if not hypothesis.strip():
                raise InvalidInput(f"pair {i} has an empty hypothesis")
        batch = await self._submit(list(pairs))
        return EntailOutcome(
            probabilities=list(batch.results),
            total_tokens=sum(batch.tokens),
            queue_ms=batch.queue_ms,
            inference_ms=batch.inference_ms,
        )

    def status(self) -> EntailerStatus:
        """The served NLI model (empty until loaded)."""
        _, manifest = self._served()
        return EntailerStatus(
            ready=manifest is not None,
            model_id=manifest.model_id if manifest else "",
            max_tokens=manifest.max_tokens if manifest else 0,
        )
