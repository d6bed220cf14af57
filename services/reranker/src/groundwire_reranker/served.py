"""One pair model behind a bounded batching queue: what the relevance reranker
(reranking.Reranker) and the entailment model (entailment.Entailer) share.

Each served model has its own engine (a burst of citation checks cannot fill the
rerank queue) with the same budgets and overload behaviour (queue full -> Overloaded
at once). Built without a model, it stays not ready and refuses work with Unavailable,
so callers fall back to their own order or verifier.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar

from groundwire_core.batching import BatchingEngine, BatchResult
from groundwire_core.errors import InvalidInput, Unavailable
from groundwire_reranker.models.cross_encoder import Pair
from groundwire_reranker.models.manifest import CrossEncoderManifest

Out = TypeVar("Out")
Out_co = TypeVar("Out_co", covariant=True)


class PairModel(Protocol[Out_co]):
    """What serving needs from a model (see models.cross_encoder and models.nli)."""

    @property
    def manifest(self) -> CrossEncoderManifest: ...

    def load(self) -> None: ...

    def estimate_tokens(self, item: Pair) -> int: ...

    def tokenize(self, items: Sequence[Pair]) -> Any: ...

    def token_counts(self, batch: Any) -> list[int]: ...

    def infer(self, batch: Any, shared: bool = False) -> Any: ...

    def postprocess(self, batch: Any, raw: Any) -> Sequence[Out_co]: ...


class ServedPairs(Generic[Out]):
    """A model (or none) on its own batching engine."""

    def __init__(
        self,
        model: PairModel[Out] | None,
        *,
        name: str,
        no_model: str,
        max_batch_tokens: int,
        max_batch_items: int,
        max_queue: int,
        warm_up: Sequence[Pair],
        lanes: int = 1,
        calibrate: Sequence[Pair] = (),
    ) -> None:
        self._model = model
        self._no_model = no_model
        self._max_batch_items = max_batch_items
        self._engine: BatchingEngine[Pair, Out] | None = None
        if model is not None:
            self._engine = BatchingEngine(
                model,
                name=name,
                max_batch_tokens=max_batch_tokens,
                max_batch_items=max_batch_items,
                max_queue=max_queue,
                warm_up=tuple(warm_up),
                lanes=lanes,
                calibrate=tuple(calibrate),
            )

    async def start(self) -> None:
        """Loads the model and warms it up (nothing without a model).

        Raises NotFound / InvalidInput when the model directory cannot be served.
        """
        if self._engine is not None:
            await self._engine.start()

    async def stop(self) -> None:
        if self._engine is not None:
            await self._engine.stop()

    def _check_count(self, count: int, noun: str) -> None:
        """Raises InvalidInput unless 1 to ``max_batch_items`` ``noun`` were sent."""
        if not count:
            raise InvalidInput(f"{noun} is empty: send 1 to {self._max_batch_items}")
        if count > self._max_batch_items:
            raise InvalidInput(f"at most {self._max_batch_items} {noun} per call (got {count})")

    async def _submit(self, pairs: list[Pair]) -> BatchResult[Out]:
        """The pairs' results. Raises Unavailable (no model, not warmed up, model
        failure) and Overloaded (queue full, with a retry-after)."""
        if self._engine is None:
            raise Unavailable(self._no_model, dependency="reranker")
        return await self._engine.submit(pairs)

    def _served(self) -> tuple[BatchingEngine[Pair, Out] | None, CrossEncoderManifest | None]:
        """The engine and, once the model is loaded, its manifest."""
        engine = self._engine
        ready = engine is not None and engine.ready
        return engine, self._model.manifest if ready and self._model is not None else None
