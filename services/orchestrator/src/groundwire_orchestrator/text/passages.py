"""Dense vectors of passage text (chunk sentences and bodies), kept across requests.

Two stages score a chunk's sentences: the extractive answer (against the question) and
the citation check (against the answer's claims). The same chunks come back question
after question, and re-embedding their text saturated one embedder replica under load
(locust run, benchmarks/results/load-*), so both embed passages through one bounded
LRU shared by the orchestrator: a sentence embedded by one stage, or for one request,
is not embedded again by the other or for the next. Claims and queries are new each
time; callers say which texts are worth keeping.

Vectors are only comparable within one embedding model, and the embedder may be
redeployed with another while the orchestrator runs (a collection re-indexed for the
new model serves at once). Every vector is tagged with its model (the embedder's
``model_id`` and the vector's width): one answer of ``get`` never mixes models (cached
vectors of another model than the one just embedding are embedded again, and the cache
emptied), and ``of_model`` makes it match a vector the caller embedded on its own.

Cached vectors are float32 arrays (stdlib ``array``): a tuple of Python floats takes
eight times the memory, and 4,096 BGE-M3 vectors (1,024-d) took 128 MB as tuples
against 16 MB as arrays (tracemalloc; 48 MB vs 6 MB at MiniLM's 384-d). Scores move by
float32 rounding only.

The LRU is an OrderedDict rather than a cache library: what is kept depends on the
caller (``keep``) and misses are embedded together in batches, which per-key
memoizing caches do not do.
"""

from __future__ import annotations

import asyncio
import math
from array import array
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from groundwire_core.clients.embedder import TextEmbedding
from groundwire_orchestrator.clients.interfaces import Embedder

EMBED_BATCH = 64
CACHE_ENTRIES = 4096

Vector = Sequence[float]


def cosine(a: Vector, b: Vector) -> float:
    """Cosine similarity of two vectors of one model (0 when either is all zeros)."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


ModelKey = tuple[str, int]
"""A vector's model: the embedder's model id and the vector's width (the id is "" from
an embedder that does not send it; the width still tells most models apart)."""


def model_of(embedding: TextEmbedding) -> ModelKey:
    return (embedding.model, len(embedding.dense or ()))


@dataclass(frozen=True)
class Passages:
    """What ``get`` gives: vectors by text, all of one ``model`` (None when empty)."""

    vectors: dict[str, Vector]
    model: ModelKey | None


class PassageVectors:
    """Passage-kind (``query=False``) dense vectors of texts, with a bounded LRU."""

    def __init__(
        self, embedder: Embedder, *, entries: int = CACHE_ENTRIES, batch: int = EMBED_BATCH
    ) -> None:
        self._embedder = embedder
        self._entries = entries
        self._batch = batch
        self._cache: OrderedDict[str, array[float]] = OrderedDict()
        self._model: ModelKey | None = None  # the model of the cached vectors

    def __len__(self) -> int:
        return len(self._cache)

    async def get(
        self,
        texts: Sequence[str],
        *,
        keep: Collection[str] | None = None,
    ) -> Passages:
        """The vectors of ``texts``; those missing are embedded in batches sent at once,
        and those in ``keep`` (every text when None) are cached. When the embedder now
        serves another model than the cached vectors', those are embedded again and the
        cache starts over. A text the embedder gives no dense vector, or gives one of
        another model than the rest (replicas mid-rollout), is left out. Raises what the
        embedder raises."""
        model = self._model
        vectors: dict[str, Vector] = {}
        for text in texts:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                vectors[text] = hit
        fresh = await self._embed([t for t in dict.fromkeys(texts) if t not in vectors])
        if fresh:
            model = next(iter(fresh.values()))[0]
            if vectors and model != self._model:  # redeployed: the cached ones are stale
                self._cache.clear()
                fresh.update(await self._embed(list(vectors)))
                vectors = {}
        kept = set(texts if keep is None else keep)
        for text, (its_model, vector) in fresh.items():
            if its_model != model:
                continue
            vectors[text] = vector
            if text in kept:
                if model != self._model:
                    self._cache.clear()
                    self._model = model
                self._cache[text] = array("f", vector)
        while len(self._cache) > self._entries:
            self._cache.popitem(last=False)
        return Passages(vectors, model if vectors else None)

    async def of_model(
        self,
        got: Passages,
        texts: Sequence[str],
        model: ModelKey,
        *,
        keep: Collection[str] | None = None,
    ) -> Passages:
        """``got`` (what ``get(texts, keep=keep)`` gave) when its vectors are of
        ``model``, the model of a vector the caller embedded on its own. Otherwise they
        came from the cache under an earlier model: the cache is emptied and ``texts``
        embedded again; if those still come from another model (replicas mid-rollout),
        no vectors."""
        if got.model is None or got.model == model:
            return got
        self._cache.clear()
        self._model = None
        again = await self.get(texts, keep=keep)
        return again if again.model in (None, model) else Passages({}, None)

    async def _embed(self, texts: list[str]) -> dict[str, tuple[ModelKey, Vector]]:
        batches = [texts[i : i + self._batch] for i in range(0, len(texts), self._batch)]
        replies = await asyncio.gather(*(self._embedder.embed(b, query=False) for b in batches))
        return {
            text: (model_of(emb), emb.dense)
            for batch, embedded in zip(batches, replies, strict=True)
            for text, emb in zip(batch, embedded, strict=True)
            if emb.dense is not None
        }
