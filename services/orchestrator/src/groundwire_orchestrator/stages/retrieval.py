"""Hybrid retrieval stage: embed the query, search every path, fuse (in the retriever);
and the source reader the agent's read_document tool uses."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from groundwire_core.clients.embedder import EmbedderInfo, TextEmbedding
from groundwire_core.errors import InvalidInput
from groundwire_orchestrator.clients.interfaces import Embedder, Retriever
from groundwire_orchestrator.clients.retriever import HybridQuery
from groundwire_orchestrator.domain import Candidate, FieldFilter, StageReport
from groundwire_orchestrator.fusion import AS_CONFIGURED, DEFAULT, FusionChoice, format_weights


def _outputs(info: EmbedderInfo) -> tuple[str, ...]:
    return ("dense", "sparse") if "sparse" in info.outputs else ("dense",)


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
    fusion: FusionChoice = AS_CONFIGURED
    """The request's own fusion; what it leaves unset is the configured one."""


@dataclass(frozen=True)
class RetrievalParams:
    path_limit: int = 100
    rrf_k: int = 60
    dense_floor: float = 0.3
    fusion: FusionChoice = DEFAULT
    """The configured fusion (settings FUSION and FUSION_WEIGHTS)."""


class RetrievalStage:
    """Has no fallback of its own: without the embedder or the retriever there is
    nothing to rank, so their failures propagate as Unavailable naming them."""

    def __init__(self, embedder: Embedder, retriever: Retriever, params: RetrievalParams) -> None:
        self._embedder = embedder
        self._retriever = retriever
        self._params = params
        self._info: EmbedderInfo | None = None

    async def _embed(self, texts: list[str]) -> list[TextEmbedding]:
        """The query vectors, with the learned sparse one when the model has it.

        The embedder's Info (which outputs it has) is kept between requests and asked
        again when the embedder may have been redeployed with another model, which can
        add or drop the sparse output: a reply tagged with another model than the kept
        Info names, or INVALID_ARGUMENT for asking an output it no longer has."""
        info = self._info or await self._fetch_info()
        try:
            embedded = await self._embedder.embed(texts, query=True, outputs=_outputs(info))
        except InvalidInput:
            fresh = await self._fetch_info()
            if _outputs(fresh) == _outputs(info):
                raise
            return await self._embedder.embed(texts, query=True, outputs=_outputs(fresh))
        model = embedded[0].model if embedded else ""
        if model and model != info.model_id:
            fresh = await self._fetch_info()
            if _outputs(fresh) != _outputs(info):
                embedded = await self._embedder.embed(texts, query=True, outputs=_outputs(fresh))
        return embedded

    async def _fetch_info(self) -> EmbedderInfo:
        self._info = await self._embedder.info()
        return self._info

    async def run(self, inp: RetrievalInput) -> tuple[list[Candidate], StageReport]:
        """Fused candidates, best first. Raises NotFound, InvalidInput, Unavailable."""
        started = time.perf_counter()
        texts = (
            [inp.dense_query]
            if inp.dense_query == inp.lexical_query
            else [inp.dense_query, inp.lexical_query]
        )
        embedded = await self._embed(texts)
        embed_ms = (time.perf_counter() - started) * 1e3
        fusion = inp.fusion.over(self._params.fusion)
        candidates, paths = await self._retriever.search(
            HybridQuery(
                collection=inp.collection,
                text=inp.lexical_query,
                dense=embedded[0].dense,
                sparse=embedded[-1].sparse,
                embedder_model=embedded[0].model,
                filters=inp.filters,
                limit=inp.limit,
                path_limit=self._params.path_limit,
                rrf_k=self._params.rrf_k,
                dense_floor=self._params.dense_floor,
                fusion=fusion.method,
                weights=fusion.weights,
            )
        )
        details = {
            "embed_ms": f"{embed_ms:.1f}",
            "candidates_out": str(len(candidates)),
            "dense_input": inp.dense_from,
            "fusion": fusion.method,
        }
        if fusion.weights:
            details["fusion_weights"] = format_weights(fusion.weights)
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
