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
new model serves at once). Callers hand what they got to ``of_width`` with the length
of a vector they embedded just now; when the lengths differ, the cache drops what it
holds and the texts are embedded again. A new model of the same width is not detected; its
vectors age out of the LRU.

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
from array import array
from collections import OrderedDict
from collections.abc import Collection, Sequence

from groundwire_orchestrator.clients.interfaces import Embedder

EMBED_BATCH = 64
CACHE_ENTRIES = 4096

Vector = Sequence[float]


class PassageVectors:
    """Passage-kind (``query=False``) dense vectors of texts, with a bounded LRU."""

    def __init__(
        self, embedder: Embedder, *, entries: int = CACHE_ENTRIES, batch: int = EMBED_BATCH
    ) -> None:
        self._embedder = embedder
        self._entries = entries
        self._batch = batch
        self._cache: OrderedDict[str, array[float]] = OrderedDict()
        self._dims: int | None = None  # the length of the cached vectors

    def __len__(self) -> int:
        return len(self._cache)

    async def get(
        self,
        texts: Sequence[str],
        *,
        keep: Collection[str] | None = None,
    ) -> dict[str, Vector]:
        """The vectors of ``texts`` by text; those missing are embedded in batches sent
        at once, and those in ``keep`` (every text when None) are cached. A text the
        embedder gives no dense vector is left out. Raises what the embedder raises."""
        vectors: dict[str, Vector] = {}
        for text in texts:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                vectors[text] = hit
        missing = [t for t in dict.fromkeys(texts) if t not in vectors]
        batches = [missing[i : i + self._batch] for i in range(0, len(missing), self._batch)]
        replies = await asyncio.gather(*(self._embedder.embed(b, query=False) for b in batches))
        kept = set(texts if keep is None else keep)
        for batch, embedded in zip(batches, replies, strict=True):
            for text, emb in zip(batch, embedded, strict=True):
                if emb.dense is None:
                    continue
                vectors[text] = emb.dense
                if text in kept:
                    if len(emb.dense) != self._dims:  # the first vector, or a new model
                        self._cache.clear()
                        self._dims = len(emb.dense)
                    self._cache[text] = array("f", emb.dense)
        while len(self._cache) > self._entries:
            self._cache.popitem(last=False)
        return vectors

    async def of_width(
        self,
        vectors: dict[str, Vector],
        texts: Sequence[str],
        width: int,
        *,
        keep: Collection[str] | None = None,
    ) -> dict[str, Vector]:
        """``vectors`` (what ``get(texts, keep=keep)`` gave) when every one is ``width``
        long, the length of a vector the caller embedded just now. Otherwise some came
        from the cache under an earlier model: the cache is emptied and ``texts`` are
        embedded again."""
        if all(len(v) == width for v in vectors.values()):
            return vectors
        self._cache.clear()
        self._dims = None
        return await self.get(texts, keep=keep)
