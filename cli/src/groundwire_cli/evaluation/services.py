"""The services side of an evaluation: ingest the corpus through the retriever, embed
the queries through the embedder, and search (and rerank) one configuration per query."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from tqdm import tqdm

from groundwire.common.v1 import common_pb2
from groundwire.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_cli.evaluation.ablation import RERANK_DEPTH, Configuration, EvalSettings
from groundwire_cli.evaluation.beir import CorpusDoc
from groundwire_cli.progress import progress
from groundwire_core.clients.embedder import EmbedderClient
from groundwire_core.grpc.client import rpc_errors

COLLECTION = "eval"
INGEST_BATCH = 64
EMBED_BATCH = 64

PATHS = {
    "dense": retriever_pb2.SEARCH_PATH_DENSE,
    "sparse": retriever_pb2.SEARCH_PATH_SPARSE,
    "bm25": retriever_pb2.SEARCH_PATH_BM25,
}


@dataclass(frozen=True)
class EmbeddedQuery:
    query_id: str
    text: str
    dense: tuple[float, ...]
    sparse: dict[int, float] | None


@dataclass
class ConfigRun:
    """What one configuration produced: rankings and client-side latencies."""

    rankings: dict[str, list[str]] = field(default_factory=dict)
    ms: list[float] = field(default_factory=list)


class Searcher:
    """Runs one configuration for one query through Search (and Rerank)."""

    def __init__(
        self,
        retriever: grpc.aio.Channel,
        reranker: grpc.aio.Channel | None,
        settings: EvalSettings,
        max_rerank_passages: int = RERANK_DEPTH,
    ) -> None:
        self._retriever = retriever_pb2_grpc.RetrieverServiceStub(retriever)
        self._reranker = (
            reranker_pb2_grpc.RerankerServiceStub(reranker) if reranker is not None else None
        )
        self._settings = settings
        self._rerank_depth = min(settings.rerank_depth, max_rerank_passages)

    async def ranking(self, config: Configuration, query: EmbeddedQuery) -> list[str]:
        """Source ids of the fused chunk hits, best first (repeats kept)."""
        s = self._settings
        request = retriever_pb2.SearchRequest(
            collection=COLLECTION,
            text=query.text,
            dense=common_pb2.DenseVector(values=query.dense),
            paths=[PATHS[p] for p in config.paths],
            path_limit=s.path_limit,
            # by name: a method the retriever lacks fails here, not as RRF
            fusion=retriever_pb2.Fusion.Value(f"FUSION_{config.fusion.upper()}"),
            rrf_k=s.rrf_k,
            weights=dict(config.weights),
            dense_floor=s.dense_floor,
            # a fused list holds up to one full list per path
            limit=s.path_limit * len(config.paths),
        )
        if query.sparse:
            indices = sorted(query.sparse)
            request.sparse.CopyFrom(
                common_pb2.SparseVector(indices=indices, values=[query.sparse[i] for i in indices])
            )
        with rpc_errors("retriever"):
            reply = await self._retriever.Search(request, timeout=60)
        hits = list(reply.hits)
        if config.rerank and self._reranker is not None and hits:
            head = hits[: self._rerank_depth]
            with rpc_errors("reranker"):
                scored = await self._reranker.Rerank(
                    reranker_pb2.RerankRequest(
                        query=query.text, passages=[h.chunk.text for h in head]
                    ),
                    timeout=120,
                )
            hits = [head[r.index] for r in scored.results] + hits[len(head) :]
        return [h.chunk.source_id for h in hits]


async def ingest_corpus(
    channel: grpc.aio.Channel, corpus: Sequence[CorpusDoc], bar: tqdm[Any]
) -> dict[str, Any]:
    stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
    started = time.perf_counter()
    ingested = chunks = 0
    skipped: list[dict[str, str]] = []
    for start in range(0, len(corpus), INGEST_BATCH):
        docs = [
            retriever_pb2.Document(
                source_id=d.doc_id,
                content=d.text.encode("utf-8"),
                format=retriever_pb2.DOCUMENT_FORMAT_TEXT,
                title=d.title,
            )
            for d in corpus[start : start + INGEST_BATCH]
        ]
        request = retriever_pb2.IngestRequest(
            collection=COLLECTION, documents=docs, create_collection=True
        )
        with rpc_errors("retriever"):
            async for event in stub.Ingest(request, timeout=900):
                if event.HasField("progress"):
                    bar.update(1)
                if event.HasField("report"):
                    ingested += event.report.ingested
                    chunks += event.report.chunks_written
                    skipped.extend(
                        {"source_id": r.source_id, "reason": r.reason}
                        for r in event.report.documents
                        if r.status == retriever_pb2.DOCUMENT_STATUS_SKIPPED
                    )
    return {
        "documents": len(corpus),
        "ingested": ingested,
        "chunks": chunks,
        "skipped": len(skipped),
        "skipped_examples": skipped[:20],
        "seconds": round(time.perf_counter() - started, 2),
    }


async def embed_queries(
    embedder: EmbedderClient, queries: Mapping[str, str], sparse: bool, bar: tqdm[Any]
) -> list[EmbeddedQuery]:
    outputs = ("dense", "sparse") if sparse else ("dense",)
    items = list(queries.items())
    embedded: list[EmbeddedQuery] = []
    for start in range(0, len(items), EMBED_BATCH):
        batch = items[start : start + EMBED_BATCH]
        vectors = await embedder.embed([text for _, text in batch], query=True, outputs=outputs)
        for (qid, text), vec in zip(batch, vectors, strict=True):
            if vec.dense is None:
                raise RuntimeError("the embedder returned no dense vector")
            embedded.append(EmbeddedQuery(qid, text, vec.dense, vec.sparse))
        bar.update(len(batch))
    return embedded


async def run_config(
    searcher: Searcher,
    config: Configuration,
    queries: Sequence[EmbeddedQuery],
    desc: str,
) -> ConfigRun:
    result = ConfigRun()
    for query in progress(queries, desc=desc, unit="q", leave=False):
        started = time.perf_counter()
        result.rankings[query.query_id] = await searcher.ranking(config, query)
        result.ms.append((time.perf_counter() - started) * 1e3)
    return result
