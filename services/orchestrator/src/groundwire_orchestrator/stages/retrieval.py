"""Hybrid retrieval stage: embed the query, search every path, fuse (in the retriever);
and the source reader the agent's read_document tool uses."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from groundwire_core.clients.embedder import EmbedderInfo
from groundwire_orchestrator.clients.interfaces import Embedder, Retriever
from groundwire_orchestrator.clients.retriever import HybridQuery
from groundwire_orchestrator.domain import Candidate, FieldFilter, StageReport


@dataclass(frozen=True)
class RetrievalInput:
    collection: str
    lexical_query: str
    """Text for BM25 and learned sparse (the rewritten query, or the raw one)."""
    dense_query: str
    """Text embedded for the dense path (the HyDE document, or the raw query)."""
    filters: Sequence[FieldFilter] = ()
    limit: int = 50
    dense_from: str = "query"
    """What ``dense_query`` is, for the report: "query" or "hyde"."""


@dataclass(frozen=True)
class RetrievalParams:
    path_limit: int = 100
    rrf_k: int = 60
    dense_floor: float = 0.3


class RetrievalStage:
    """Has no fallback of its own: without the embedder or the retriever there is
    nothing to rank, so their failures propagate as Unavailable naming them."""

    def __init__(self, embedder: Embedder, retriever: Retriever, params: RetrievalParams) -> None:
        self._embedder = embedder
        self._retriever = retriever
        self._params = params
        self._info: EmbedderInfo | None = None

    async def run(self, inp: RetrievalInput) -> tuple[list[Candidate], StageReport]:
        """Fused candidates, best first. Raises NotFound, InvalidInput, Unavailable."""
        started = time.perf_counter()
        if self._info is None:
            self._info = await self._embedder.info()
        sparse_wanted = "sparse" in self._info.outputs
        texts = (
            [inp.dense_query]
            if inp.dense_query == inp.lexical_query
            else [inp.dense_query, inp.lexical_query]
        )
        embedded = await self._embedder.embed(
            texts, query=True, outputs=("dense", "sparse") if sparse_wanted else ("dense",)
        )
        embed_ms = (time.perf_counter() - started) * 1e3
        candidates, paths = await self._retriever.search(
            HybridQuery(
                collection=inp.collection,
                text=inp.lexical_query,
                dense=embedded[0].dense,
                sparse=embedded[-1].sparse,
                filters=inp.filters,
                limit=inp.limit,
                path_limit=self._params.path_limit,
                rrf_k=self._params.rrf_k,
                dense_floor=self._params.dense_floor,
            )
        )
        details = {
            "embed_ms": f"{embed_ms:.1f}",
            "candidates_out": str(len(candidates)),
            "dense_input": inp.dense_from,
        }
        if inp.filters:
            details["filters"] = "; ".join(f"{f.field} in {list(f.any_of)}" for f in inp.filters)
        for p in paths:
            details[f"{p.path}_ms"] = f"{p.ms:.2f}"
            details[f"{p.path}_hits"] = str(p.hits)
            if p.skipped:
                details[f"{p.path}_skipped"] = p.reason
        report = StageReport("retrieval", (time.perf_counter() - started) * 1e3, details=details)
        return candidates, report


class SourceReader:
    """A whole stored source, its chunks in order: a dense search restricted to the
    source with no similarity floor, so every chunk of it comes back."""

    def __init__(self, embedder: Embedder, retriever: Retriever, *, max_chunks: int) -> None:
        self._embedder = embedder
        self._retriever = retriever
        self._max_chunks = max_chunks

    async def read(self, collection: str, source_id: str, probe: str) -> list[Candidate]:
        """Chunks of ``source_id`` sorted by position (at most ``max_chunks``).
        ``probe`` is any text of the source (it only orders the search). Raises
        Unavailable, NotFound."""
        [embedded] = await self._embedder.embed([probe], query=True)
        found, _ = await self._retriever.search(
            HybridQuery(
                collection=collection,
                text="",
                dense=embedded.dense,
                sparse=None,
                filters=(FieldFilter("source_id", (source_id,)),),
                limit=self._max_chunks,
                path_limit=self._max_chunks,
                rrf_k=60,
                dense_floor=-1.0,
                paths=("dense",),
            )
        )
        return sorted(found, key=lambda c: c.chunk_index)
