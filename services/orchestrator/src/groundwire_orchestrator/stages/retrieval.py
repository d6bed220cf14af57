"""Hybrid retrieval stage: embed the query, search every path, fuse (in the retriever);
and the source reader the agent's read_document tool uses.

Without the embedder (down, past EMBEDDER_QUERY_TIMEOUT_S, overloaded, or in a
recorded outage, see clients.embedder_outage) the stage searches the one path that
needs no query vector, BM25, and reports the fallback naming the embedder: a lexical
ranking is worse than the hybrid one but far better than a 503."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from groundwire_core.clients.embedder import EmbedderInfo, TextEmbedding
from groundwire_core.errors import GroundwireError, InvalidInput
from groundwire_orchestrator.clients.embedder_outage import OUTAGE_ERRORS
from groundwire_orchestrator.clients.interfaces import Embedder, Retriever
from groundwire_orchestrator.clients.retriever import HybridQuery
from groundwire_orchestrator.domain import Candidate, FieldFilter, StageReport
from groundwire_orchestrator.fusion import AS_CONFIGURED, DEFAULT, FusionChoice, format_weights


def _outputs(info: EmbedderInfo, late: bool = False) -> tuple[str, ...]:
    """What to ask the embedder for; with ``late``, the ColBERT vectors too when the
    model has them (late interaction)."""
    outputs = ("dense", "sparse") if "sparse" in info.outputs else ("dense",)
    if late and "multi_vector" in info.outputs:
        outputs = (*outputs, "multi_vector")
    return outputs


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
    group_by_source: bool = False
    """One candidate per source (document), ``limit`` of them."""
    rerank: bool = True
    """Whether the cross-encoder will run after (late interaction ``when_no_rerank``)."""


@dataclass(frozen=True)
class RetrievalParams:
    path_limit: int = 100
    rrf_k: int = 60
    dense_floor: float = 0.3
    fusion: FusionChoice = DEFAULT
    """The configured fusion (settings FUSION and FUSION_WEIGHTS)."""
    late_interaction: Literal["off", "when_no_rerank", "always"] = "off"
    """MaxSim rescoring of the fused head in the retriever (settings LATE_INTERACTION)."""
    late_interaction_depth: int = 50
    reranker_configured: bool = True
    rerank_will_skip: Callable[[], Awaitable[bool]] | None = None
    """The rerank stage's ``will_skip`` (its cached load): under load it sheds the
    cross-encoder, and ``when_no_rerank`` rescores in its place."""

    async def late(self, inp: RetrievalInput) -> str:
        """Why ``inp``'s search asks for late interaction ("" = it does not): always,
        or when no cross-encoder will run after it (the cheaper precision step in its
        place)."""
        mode = self.late_interaction
        if mode == "always":
            return "always"
        if mode != "when_no_rerank":
            return ""
        if not inp.rerank:
            return "rerank not requested"
        if not self.reranker_configured:
            return "no reranker configured"
        if self.rerank_will_skip is not None and await self.rerank_will_skip():
            return "the reranker would be skipped (down or overloaded)"
        return ""


class RetrievalStage:
    """Falls back to BM25 alone when the embedder cannot answer (reported, naming
    it); without the retriever there is nothing to rank, so its failures propagate
    as Unavailable naming it."""

    def __init__(self, embedder: Embedder, retriever: Retriever, params: RetrievalParams) -> None:
        self._embedder = embedder
        self._retriever = retriever
        self._params = params
        self._info: EmbedderInfo | None = None

    async def _embed(self, texts: list[str], late: bool = False) -> list[TextEmbedding]:
        """The query vectors, with the learned sparse one when the model has it.

        The embedder's Info (which outputs it has) is kept between requests and asked
        again when the embedder may have been redeployed with another model, which can
        add or drop the sparse output: a reply tagged with another model than the kept
        Info names, or INVALID_ARGUMENT for asking an output it no longer has."""
        info = self._info or await self._fetch_info()
        try:
            embedded = await self._embedder.embed(texts, query=True, outputs=_outputs(info, late))
        except InvalidInput:
            fresh = await self._fetch_info()
            if _outputs(fresh, late) == _outputs(info, late):
                raise
            return await self._embedder.embed(texts, query=True, outputs=_outputs(fresh, late))
        model = embedded[0].model if embedded else ""
        if model and model != info.model_id:
            fresh = await self._fetch_info()
            if _outputs(fresh, late) != _outputs(info, late):
                embedded = await self._embedder.embed(
                    texts, query=True, outputs=_outputs(fresh, late)
                )
        return embedded

    async def _fetch_info(self) -> EmbedderInfo:
        self._info = await self._embedder.info()
        return self._info

    async def run(self, inp: RetrievalInput) -> tuple[list[Candidate], StageReport]:
        """Fused candidates, best first (BM25's alone without the embedder). Raises
        NotFound, InvalidInput, Unavailable (the retriever)."""
        started = time.perf_counter()
        texts = (
            [inp.dense_query]
            if inp.dense_query == inp.lexical_query
            else [inp.dense_query, inp.lexical_query]
        )
        embedded: list[TextEmbedding] = []
        failure: GroundwireError | None = None
        why_late = await self._params.late(inp)
        late = bool(why_late)
        try:
            embedded = await self._embed(texts, late)
        except OUTAGE_ERRORS as error:
            failure = error
        embed_ms = (time.perf_counter() - started) * 1e3
        fusion = inp.fusion.over(self._params.fusion)
        candidates, paths = await self._retriever.search(
            HybridQuery(
                collection=inp.collection,
                text=inp.lexical_query,
                dense=embedded[0].dense if embedded else None,
                sparse=embedded[-1].sparse if embedded else None,
                embedder_model=embedded[0].model if embedded else "",
                filters=inp.filters,
                limit=inp.limit,
                path_limit=self._params.path_limit,
                rrf_k=self._params.rrf_k,
                dense_floor=self._params.dense_floor,
                fusion=fusion.method,
                weights=fusion.weights,
                # the query vectors' paths cannot run: only BM25 is asked, so the
                # report does not list dense and sparse as merely skipped
                paths=("bm25",) if failure is not None else (),
                group_by_source=inp.group_by_source,
                # the dense query's ColBERT vectors (none without the embedder: the
                # retriever then reports late interaction skipped)
                multi=embedded[0].multi_vector if embedded else (),
                late_interaction_depth=self._params.late_interaction_depth if late else 0,
            )
        )
        details = {
            "embed_ms": f"{embed_ms:.1f}",
            "candidates_out": str(len(candidates)),
            "dense_input": inp.dense_from if failure is None else "none",
            "fusion": fusion.method,
        }
        if inp.group_by_source:
            details["group_by"] = "document"
        if late:
            details["late_interaction_why"] = why_late
        if fusion.weights:
            details["fusion_weights"] = format_weights(fusion.weights)
        if inp.filters:
            details["filters"] = "; ".join(f"{f.field} in {list(f.any_of)}" for f in inp.filters)
        for p in paths:
            details[f"{p.path}_ms"] = f"{p.ms:.2f}"
            details[f"{p.path}_hits"] = str(p.hits)
            if p.skipped:
                details[f"{p.path}_skipped"] = p.reason
        ms = (time.perf_counter() - started) * 1e3
        if failure is None:
            return candidates, StageReport("retrieval", ms, details=details)
        reason = f"the embedder cannot embed the query ({failure.message}): BM25 only"
        return candidates, StageReport(
            "retrieval", ms, fallback=True, reason=reason, dependency="embedder", details=details
        )


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
