"""Hybrid retrieval stage: embed the query, search every path, fuse (in the retriever)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from groundwire_core.clients.embedder import EmbedderClient, EmbedderInfo
from groundwire_orchestrator.clients.retriever import HybridQuery, RetrieverClient
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


@dataclass(frozen=True)
class RetrievalParams:
    path_limit: int = 100
    rrf_k: int = 60
    dense_floor: float = 0.3


class RetrievalStage:
    """Has no fallback of its own: without the embedder or the retriever there is
    nothing to rank, so their failures propagate as Unavailable naming them."""

    def __init__(
        self, embedder: EmbedderClient, retriever: RetrieverClient, params: RetrievalParams
    ) -> None:
        self._embedder = embedder
        self._retriever = retriever
        self._params = params
        self._info: EmbedderInfo | None = None

    async def run(self, inp: RetrievalInput) -> tuple[list[Candidate], StageReport]:
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
        details = {"embed_ms": f"{embed_ms:.1f}", "candidates_out": str(len(candidates))}
        for p in paths:
            details[f"{p.path}_ms"] = f"{p.ms:.2f}"
            details[f"{p.path}_hits"] = str(p.hits)
            if p.skipped:
                details[f"{p.path}_skipped"] = p.reason
        report = StageReport("retrieval", (time.perf_counter() - started) * 1e3, details=details)
        return candidates, report
