"""The orchestrator's client of the retriever: hybrid Search and the cheap ListCollections."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import grpc

from groundwire.common.v1 import common_pb2
from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.errors import NotFound
from groundwire_core.grpc.client import rpc_errors
from groundwire_orchestrator.domain import (
    Candidate,
    FieldFilter,
    LiveFetchReport,
    LiveLookupResult,
)

_PATHS = {
    "dense": retriever_pb2.SEARCH_PATH_DENSE,
    "sparse": retriever_pb2.SEARCH_PATH_SPARSE,
    "bm25": retriever_pb2.SEARCH_PATH_BM25,
}


@dataclass(frozen=True)
class PathSummary:
    path: str
    ms: float
    hits: int
    skipped: bool
    reason: str


@dataclass(frozen=True)
class HybridQuery:
    collection: str
    text: str
    dense: Sequence[float] | None
    sparse: dict[int, float] | None
    filters: Sequence[FieldFilter]
    limit: int
    path_limit: int
    rrf_k: int
    dense_floor: float
    paths: tuple[str, ...] = ()
    """Paths to run ("dense", "sparse", "bm25"); empty runs every path with input."""
    embedder_model: str = ""
    """The model that made the vectors; the retriever refuses a collection indexed
    with another ("" = not checked)."""
    fusion: str = "rrf"
    """A fusion method, named after the retriever's ``Fusion`` enum (``fusion.METHODS``)."""
    weights: Mapping[str, float] = field(default_factory=dict)
    """Per-path weights of the fusion, by path name."""
    group_by_source: bool = False
    """One candidate per source (document): its best chunk (the retriever groups)."""
    multi: Sequence[Sequence[float]] = ()
    """The query's ColBERT vectors, for late interaction (see late_interaction_depth)."""
    late_interaction_depth: int = 0
    """MaxSim-rescore the top this-many fused candidates in the retriever; 0 = off."""


@dataclass(frozen=True)
class CollectionInfo:
    name: str
    filterable: frozenset[str]


class RetrieverClient:
    def __init__(self, channel: grpc.aio.Channel, *, timeout_s: float) -> None:
        self._stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        self._timeout_s = timeout_s

    async def describe(self, collection: str) -> CollectionInfo:
        """The collection's filterable fields; NotFound when it does not exist.

        From the cheap listing (no ``counts``): DescribeCollection counts and facets
        every chunk (~0.75 s at 100k chunks), which a request path must not wait on."""
        with rpc_errors("retriever"):
            reply = await self._stub.ListCollections(
                retriever_pb2.ListCollectionsRequest(counts=False), timeout=self._timeout_s
            )
        for listed in reply.collections:
            if listed.name == collection:
                return CollectionInfo(listed.name, frozenset(listed.filterable))
        raise NotFound(f"collection {collection!r} does not exist")

    async def search(self, query: HybridQuery) -> tuple[list[Candidate], list[PathSummary]]:
        """Hybrid search; failures come out as GroundwireError naming "retriever"."""
        request = retriever_pb2.SearchRequest(
            collection=query.collection,
            text=query.text,
            filters=[
                retriever_pb2.FieldFilter(field=f.field, any_of=f.any_of) for f in query.filters
            ],
            limit=query.limit,
            path_limit=query.path_limit,
            rrf_k=query.rrf_k,
            dense_floor=query.dense_floor,
            fusion=retriever_pb2.Fusion.Value(f"FUSION_{query.fusion.upper()}"),
            weights=dict(query.weights),
            paths=[_PATHS[p] for p in query.paths],
            embedder_model=query.embedder_model,
            group_by=retriever_pb2.GROUP_BY_DOCUMENT
            if query.group_by_source
            else retriever_pb2.GROUP_BY_CHUNK,
        )
        if query.dense is not None:
            request.dense.CopyFrom(common_pb2.DenseVector(values=query.dense))
        if query.late_interaction_depth:
            request.late_interaction_depth = query.late_interaction_depth
            request.multi_vector.extend(common_pb2.DenseVector(values=v) for v in query.multi)
        if query.sparse:
            items = sorted(query.sparse.items())
            request.sparse.CopyFrom(
                common_pb2.SparseVector(indices=[k for k, _ in items], values=[v for _, v in items])
            )
        with rpc_errors("retriever"):
            reply = await self._stub.Search(request, timeout=self._timeout_s)
        candidates = [_candidate(h) for h in reply.hits]
        paths = [
            PathSummary(
                path=retriever_pb2.SearchPath.Name(p.path).removeprefix("SEARCH_PATH_").lower(),
                ms=p.ms,
                hits=p.hits,
                skipped=p.skipped,
                reason=p.reason,
            )
            for p in reply.paths
        ]
        if reply.HasField("late_interaction"):  # reported as one more step: hits = rescored
            late = reply.late_interaction
            paths.append(
                PathSummary("late_interaction", late.ms, late.rescored, late.skipped, late.reason)
            )
        return candidates, paths

    async def lookup_live(
        self, collection: str, query: str, *, max_lookups: int, limit: int, timeout_s: float
    ) -> LiveLookupResult:
        """The retriever's live lookup (LookupLive): sections of live pages as
        candidates marked ``live``, and each page tried. The call may take the lookup's
        whole deadline; failures come out as GroundwireError naming "retriever"."""
        request = retriever_pb2.LookupLiveRequest(
            collection=collection,
            query=query,
            max_lookups=max_lookups,
            limit=limit,
            timeout_s=timeout_s,
        )
        with rpc_errors("retriever"):
            # the retriever bounds the lookup by timeout_s; allow for the ranking after it
            reply = await self._stub.LookupLive(request, timeout=timeout_s + self._timeout_s)
        return LiveLookupResult(
            candidates=tuple(_candidate(h, live=True) for h in reply.hits),
            fetches=tuple(LiveFetchReport(f.url, f.outcome, f.reason) for f in reply.fetches),
            lookups=reply.lookups,
            allowed_domains=tuple(reply.allowed_domains),
        )

    async def allowed_domains(self, collection: str) -> tuple[str, ...]:
        """The domains a live lookup of ``collection`` may reach (nothing fetched)."""
        request = retriever_pb2.LookupLiveRequest(
            collection=collection, query="domains", domains_only=True
        )
        with rpc_errors("retriever"):
            reply = await self._stub.LookupLive(request, timeout=self._timeout_s)
        return tuple(reply.allowed_domains)


def _candidate(h: retriever_pb2.SearchHit, *, live: bool = False) -> Candidate:
    return Candidate(
        chunk_id=h.chunk.chunk_id,
        source_id=h.chunk.source_id,
        title=h.chunk.title,
        heading_path=tuple(h.chunk.heading_path),
        url=h.chunk.url,
        text=h.chunk.text,
        score=h.score,
        fused_score=h.score,
        chunk_index=h.chunk.chunk_index,
        path_scores=tuple(sorted(h.path_scores.items())),
        matching_chunks=h.matching_chunks,
        other_headings=tuple(h.other_headings),
        # doc_end 0: stored before ingest recorded the range (text is never empty)
        doc_span=(h.chunk.doc_start, h.chunk.doc_end) if h.chunk.doc_end else None,
        live=live,
        fetched_at=h.chunk.created_at if live else 0.0,
    )
