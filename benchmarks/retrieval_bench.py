"""Hybrid search latency: the retriever's gRPC API vs the bare engine call.

For each size (10k and 100k chunks; ``--quick``: 10k only) the benchmark fills an
embedded store with synthetic chunks (384-d random unit vectors, Zipf-distributed
pseudo-words for BM25), runs the engine's optimizer, and then times the same hybrid
queries (dense + BM25, RRF k=60, 100 candidates per path, 50 results with payload)
four ways, alternating in blocks of ``--block`` queries so that a busy machine slows
all of them alike:

* ``grpc``   — ``Search`` on a real retriever process (``python -m
  groundwire_retriever``) through a plain ``grpc.aio`` channel: the retriever's API
  as any client sees it. The acceptance ratio is grpc / bare.
* ``grpc_orchestrator_channel`` — the same call through the channel the orchestrator
  uses (``create_channel``: OpenTelemetry and request-context client interceptors),
  to show what those cost on the caller's side.
* ``bare``   — ``EdgeStore.search`` in this process: the same store code, no
  transport.
* ``engine`` — one qdrant-edge ``query`` (both paths as prefetches, fused by the
  engine's RRF, payload read in the same call) on a shard of our own with the same
  points: the floor that Qdrant itself sets.

One process owns a store folder, so the retriever serves a copy of the folder the
bare store uses. The dense floor is disabled (random vectors have cosines near 0),
so that every path returns its full 100 candidates: the most work fusion and payload
reading can have.

    python benchmarks/retrieval_bench.py            # 10k and 100k chunks
    python benchmarks/retrieval_bench.py --quick    # 10k only

Writes ``benchmarks/results/retrieval.json`` and prints a table. ``--acl`` measures
the per-document access filter instead (``acl_bench.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import qdrant_edge as qe
from service_process import ServiceProcess

from groundwire.common.v1 import common_pb2
from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.grpc.client import CHANNEL_OPTIONS, create_channel
from groundwire_retriever.domain import (
    Chunk,
    ChunkVectors,
    CollectionSpec,
    Fusion,
    SearchPath,
    SearchQuery,
)
from groundwire_retriever.store import Bm25Settings, EdgeStore
from groundwire_retriever.store.edge import DENSE_SEARCH_PARAMS, shard_config

ROOT = Path(__file__).resolve().parent
DIMS = 384
VOCABULARY = 30_000
COLLECTION = "bench"
CHUNKS_PER_SOURCE = 4
TARGET_P50_MS = 5.0
TARGET_RATIO = 1.5
TARGET_CHUNKS = 100_000


@dataclass(frozen=True)
class Corpus:
    vectors: np.ndarray
    texts: list[str]


def _words(rng: np.random.Generator) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(4, 11, size=VOCABULARY)
    words = {"".join(rng.choice(letters, size=n)) for n in lengths}
    return sorted(words)


def make_corpus(n: int, seed: int) -> Corpus:
    """``n`` unit vectors and texts of 60-120 Zipf-distributed pseudo-words."""
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIMS), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vocab = np.array(_words(rng))
    lengths = rng.integers(60, 121, size=n)
    ids = np.minimum(rng.zipf(1.2, size=int(lengths.sum())) - 1, len(vocab) - 1)
    texts: list[str] = []
    start = 0
    for length in lengths:
        texts.append(" ".join(vocab[ids[start : start + length]]))
        start += length
    return Corpus(vectors, texts)


@dataclass(frozen=True)
class BenchQuery:
    text: str
    dense: list[float]


def make_queries(corpus: Corpus, count: int, seed: int) -> list[BenchQuery]:
    """Queries near stored chunks: a perturbed vector and four of the chunk's words."""
    rng = np.random.default_rng(seed + 1)
    picks = rng.integers(0, len(corpus.texts), size=count)
    queries: list[BenchQuery] = []
    for i in picks:
        noisy = corpus.vectors[i] + rng.standard_normal(DIMS).astype(np.float32) * 0.05
        noisy /= np.linalg.norm(noisy)
        words = corpus.texts[i].split()
        chosen = rng.choice(len(words), size=min(4, len(words)), replace=False)
        queries.append(BenchQuery(" ".join(words[j] for j in sorted(chosen)), noisy.tolist()))
    return queries


def _chunk(i: int, text: str) -> Chunk:
    source = i // CHUNKS_PER_SOURCE
    return Chunk(
        chunk_id=str(uuid.UUID(int=i + 1)),
        source_id=f"doc-{source}",
        text=text,
        title=f"Document {source}",
        heading_path=(f"Document {source}",),
        chunk_index=i % CHUNKS_PER_SOURCE,
        content_hash=f"{i:064x}",
        created_at=1_700_000_000.0,
    )


def fill_store(root: Path, corpus: Corpus) -> tuple[float, float]:
    """Fills an EdgeStore at ``root``; returns (load seconds, optimize seconds)."""
    store = EdgeStore(root)
    store.open()
    try:
        store.create_collection(CollectionSpec(name=COLLECTION, dense_dims=DIMS))
        started = time.perf_counter()
        batch = 1_000
        for start in range(0, len(corpus.texts), batch):
            stop = min(start + batch, len(corpus.texts))
            store.upsert(
                COLLECTION,
                [
                    (_chunk(i, corpus.texts[i]), ChunkVectors(dense=tuple(corpus.vectors[i])))
                    for i in range(start, stop)
                ],
            )
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        store.optimize(COLLECTION, in_place=True)  # nothing is served from it yet: no copy
        return loaded, time.perf_counter() - started
    finally:
        store.close()


def fill_engine(path: Path, corpus: Corpus) -> tuple[qe.EdgeShard, qe.Bm25, float]:
    """A bare qdrant-edge shard with the same points, vectors and payload; optimized."""
    # the schema, memory placement and quantization EdgeStore gives its shards
    config = shard_config(CollectionSpec(name=COLLECTION, dense_dims=DIMS), quantize=True)
    shard = qe.EdgeShard.create(str(path), config)
    bm25 = Bm25Settings().model()
    started = time.perf_counter()
    batch = 1_000
    for start in range(0, len(corpus.texts), batch):
        points = []
        for i in range(start, min(start + batch, len(corpus.texts))):
            chunk = _chunk(i, corpus.texts[i])
            payload = {
                "chunk_id": chunk.chunk_id,
                "source_id": chunk.source_id,
                "text": chunk.text,
                "title": chunk.title,
                "heading_path": list(chunk.heading_path),
                "chunk_index": chunk.chunk_index,
                "content_hash": chunk.content_hash,
                "created_at": chunk.created_at,
            }
            vectors: dict[str, qe.NamedVector] = {
                "dense": corpus.vectors[i].tolist(),
                "bm25": bm25.embed_document(f"{chunk.title}\n{chunk.text}"),
            }
            points.append(qe.Point(chunk.chunk_id, vectors, payload))
        shard.update(qe.UpdateOperation.upsert_points(points))
    shard.optimize()
    return shard, bm25, time.perf_counter() - started


def _summary(values: list[float]) -> dict[str, float]:
    a = np.asarray(values)
    return {
        "p50": round(float(np.percentile(a, 50)), 3),
        "p95": round(float(np.percentile(a, 95)), 3),
        "mean": round(float(a.mean()), 3),
    }


async def measure(
    store_root: Path,
    grpc_addr: str,
    engine: tuple[qe.EdgeShard, qe.Bm25],
    queries: list[BenchQuery],
    *,
    path_limit: int,
    limit: int,
    warmup: int,
    block: int,
) -> dict[str, Any]:
    """Times every query four ways, alternating in blocks; summaries in milliseconds.

    Each way runs ``block`` queries in a row, then the next way runs the same ones, and
    so on: each sees a busy machine alike, and each sees the steady state a serving
    process has (its own data warm in the CPU caches). Alternating query by query
    (``block`` 1) makes every call start on caches the other three copies of the data
    just went through; that measured all four ~0.5-0.7 ms slower here.
    """
    store = EdgeStore(store_root)
    store.open()
    plain = grpc.aio.insecure_channel(grpc_addr, options=CHANNEL_OPTIONS)
    orchestrators = create_channel(grpc_addr)
    stubs = {
        "grpc": retriever_pb2_grpc.RetrieverServiceStub(plain),
        "grpc_orchestrator_channel": retriever_pb2_grpc.RetrieverServiceStub(orchestrators),
    }
    shard, bm25 = engine
    ways = ("bare", "grpc", "grpc_orchestrator_channel", "engine")
    times: dict[str, list[float]] = {way: [] for way in ways}
    hits: dict[str, list[int]] = {way: [] for way in ways}
    server_ms: list[float] = []

    def store_query(q: BenchQuery) -> SearchQuery:
        return SearchQuery(
            text=q.text,
            dense=tuple(q.dense),
            paths=frozenset({SearchPath.DENSE, SearchPath.BM25}),
            path_limit=path_limit,
            fusion=Fusion.RRF,
            rrf_k=60,
            dense_floor=-1.0,
            limit=limit,
        )

    def grpc_request(q: BenchQuery) -> retriever_pb2.SearchRequest:
        return retriever_pb2.SearchRequest(
            collection=COLLECTION,
            text=q.text,
            dense=common_pb2.DenseVector(values=q.dense),
            paths=[retriever_pb2.SEARCH_PATH_DENSE, retriever_pb2.SEARCH_PATH_BM25],
            path_limit=path_limit,
            fusion=retriever_pb2.FUSION_RRF,
            rrf_k=60,
            dense_floor=-1.0,
            limit=limit,
        )

    def engine_request(q: BenchQuery) -> qe.QueryRequest:
        return qe.QueryRequest(
            limit=limit,
            prefetches=[
                qe.Prefetch(
                    path_limit,
                    qe.Query.Nearest(q.dense, using="dense"),
                    params=DENSE_SEARCH_PARAMS,
                ),
                qe.Prefetch(path_limit, qe.Query.Nearest(bm25.embed_query(q.text), using="bm25")),
            ],
            # the stub lists Fusion, not its Rrf variant
            query=qe.Fusion.Rrf(k=60),  # type: ignore[arg-type]
            with_payload=True,
            with_vector=False,
        )

    async def one(way: str, q: BenchQuery) -> int:
        """Runs ``q`` one way; returns the hits. Request building is timed too."""
        if way == "bare":
            return len(store.search(COLLECTION, store_query(q)).hits)
        if way == "engine":
            return len(shard.query(engine_request(q)))
        reply = await stubs[way].Search(grpc_request(q), timeout=30)
        if way == "grpc":
            server_ms.append(reply.timing.total_ms)
        return len(reply.hits)

    ordered = [*queries[:warmup], *queries]
    try:
        for start in range(0, len(ordered), block):
            for way in ways:
                for n in range(start, min(start + block, len(ordered))):
                    started = time.perf_counter()
                    found = await one(way, ordered[n])
                    ms = (time.perf_counter() - started) * 1e3
                    if n >= warmup:
                        times[way].append(ms)
                        hits[way].append(found)
    finally:
        await plain.close()
        await orchestrators.close()
        store.close()
    return {
        **{way: _summary(values) for way, values in times.items()},
        "grpc_server_side": _summary(server_ms[-len(queries) :]),
        "mean_hits": {way: round(float(np.mean(v)), 1) for way, v in hits.items()},
    }


def run_size(n: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    print(f"== {n:,} chunks: generating", flush=True)
    corpus = make_corpus(n, args.seed)
    queries = make_queries(corpus, args.queries, args.seed)
    store_root = work / f"store-{n}"
    print("   filling the store and optimizing (blocking; ~1 min at 100k)…", flush=True)
    load_s, optimize_s = fill_store(store_root, corpus)
    print(f"   store filled in {load_s:.0f} s, optimized in {optimize_s:.0f} s", flush=True)
    served_root = work / f"served-{n}"
    shutil.copytree(store_root, served_root)
    print("   filling a bare qdrant-edge shard…", flush=True)
    shard, bm25, engine_s = fill_engine(work / f"engine-{n}", corpus)
    print(f"   shard filled and optimized in {engine_s:.0f} s", flush=True)
    del corpus
    retriever = ServiceProcess(
        "retriever",
        {
            "DATA_PATH": str(served_root),
            # Search takes vectors from the caller: the embedder is never called
            "EMBEDDER_ADDR": "127.0.0.1:9",
            "LOG_LEVEL": "WARNING",
        },
        work / f"run-{n}",
        inherit_settings=False,  # the defaults are what is measured
    )
    try:
        print(f"   timing {len(queries)} queries three ways (interleaved)…", flush=True)
        load_before = os.getloadavg()[0]
        figures = asyncio.run(
            measure(
                store_root,
                f"127.0.0.1:{retriever.port}",
                (shard, bm25),
                queries,
                path_limit=args.path_limit,
                limit=args.limit,
                warmup=args.warmup,
                block=args.block,
            )
        )
        load_after = os.getloadavg()[0]
    finally:
        retriever.stop()
        shard.close()
        for folder in (store_root, served_root, work / f"engine-{n}"):
            shutil.rmtree(folder, ignore_errors=True)
    return {
        "chunks": n,
        "queries": len(queries),
        "store_load_s": round(load_s, 1),
        "store_optimize_s": round(optimize_s, 1),
        "engine_fill_s": round(engine_s, 1),
        "load_average_1m": [round(load_before, 2), round(load_after, 2)],
        **figures,
        "ratio_grpc_to_bare": {
            "p50": round(figures["grpc"]["p50"] / figures["bare"]["p50"], 2),
            "p95": round(figures["grpc"]["p95"] / figures["bare"]["p95"], 2),
        },
        "ratio_grpc_to_engine": {
            "p50": round(figures["grpc"]["p50"] / figures["engine"]["p50"], 2),
            "p95": round(figures["grpc"]["p95"] / figures["engine"]["p95"], 2),
        },
    }


def print_table(results: list[dict[str, Any]]) -> None:
    print()
    print(
        f"{'chunks':>8} | {'gRPC p50':>8} {'p95':>6} | {'bare p50':>8} {'p95':>6} | "
        f"{'ratio p50':>9} {'p95':>5} | {'engine p50':>10} {'p95':>6} | {'gRPC/engine':>11} | "
        f"{'orch. channel p50':>17}"
    )
    for r in results:
        print(
            f"{r['chunks']:>8,} | {r['grpc']['p50']:>8.2f} {r['grpc']['p95']:>6.2f} | "
            f"{r['bare']['p50']:>8.2f} {r['bare']['p95']:>6.2f} | "
            f"{r['ratio_grpc_to_bare']['p50']:>8.2f}x {r['ratio_grpc_to_bare']['p95']:>4.2f}x | "
            f"{r['engine']['p50']:>10.2f} {r['engine']['p95']:>6.2f} | "
            f"{r['ratio_grpc_to_engine']['p50']:>10.2f}x | "
            f"{r['grpc_orchestrator_channel']['p50']:>17.2f}"
        )
    print(
        "(milliseconds; gRPC = plain grpc.aio channel, bare = EdgeStore.search in-process,\n"
        " engine = one qdrant-edge query, orch. channel = gRPC through create_channel)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10k chunks only")
    parser.add_argument(
        "--sizes", default=None, help="comma-separated chunk counts (default: 10000,100000)"
    )
    parser.add_argument("--queries", type=int, default=500, help="timed queries per size")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument(
        "--block",
        type=int,
        default=50,
        help="queries each way runs before the next way takes over (1: query by query)",
    )
    parser.add_argument("--path-limit", type=int, default=100)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "retrieval.json")
    parser.add_argument(
        "--acl",
        action="store_true",
        help="measure the per-document access filter's cost instead (acl_bench.py; 10k)",
    )
    args = parser.parse_args(argv)
    if args.acl:
        import acl_bench  # a sibling script, like service_process

        return acl_bench.main(args)
    if args.sizes:
        sizes = [int(s) for s in args.sizes.split(",")]
    else:
        sizes = [10_000] if args.quick else [10_000, 100_000]
    if args.quick:
        args.queries = min(args.queries, 200)

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="groundwire-bench-") as tmp:
        for n in sizes:
            results.append(run_size(n, args, Path(tmp)))
            write_report(args, results, complete=n == sizes[-1])
    print_table(results)
    verdict = target_verdict(results)
    print(
        f"target at {verdict['chunks']:,} chunks: gRPC p50 {verdict['grpc_p50_ms']:.2f} ms "
        f"(≤ {TARGET_P50_MS} ms) and {verdict['ratio_p50']:.2f}x bare (≤ {TARGET_RATIO}x): "
        + {True: "met", False: "NOT met", None: f"(the target is for {TARGET_CHUNKS:,})"}[
            verdict["met"]
        ]
    )
    print(f"wrote {args.out}")
    return 0


def target_verdict(results: list[dict[str, Any]]) -> dict[str, Any]:
    largest = max(results, key=lambda r: r["chunks"])
    verdict: dict[str, Any] = {
        "chunks": largest["chunks"],
        "grpc_p50_ms": largest["grpc"]["p50"],
        "target_p50_ms": TARGET_P50_MS,
        "ratio_p50": largest["ratio_grpc_to_bare"]["p50"],
        "target_ratio": TARGET_RATIO,
        # the acceptance target is stated at 100k chunks; a quick run only reports
        "met": (
            largest["grpc"]["p50"] <= TARGET_P50_MS
            and largest["ratio_grpc_to_bare"]["p50"] <= TARGET_RATIO
        )
        if largest["chunks"] >= TARGET_CHUNKS
        else None,
    }
    return verdict


def write_report(args: argparse.Namespace, results: list[dict[str, Any]], complete: bool) -> None:
    """Writes the JSON after every size, so a long run that dies keeps what it measured."""
    report = {
        "benchmark": "retrieval hybrid search latency",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "complete": complete,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "settings": {
            "dims": DIMS,
            "paths": ["dense", "bm25"],
            "fusion": "rrf",
            "rrf_k": 60,
            "path_limit": args.path_limit,
            "limit": args.limit,
            "dense_floor": "disabled (-1): random vectors",
            "queries": args.queries,
            "warmup": args.warmup,
            "block": args.block,
            "grpc_client": "grpc: a plain grpc.aio channel; grpc_orchestrator_channel: "
            "groundwire_core.grpc.client.create_channel (tracing and context interceptors)",
            "seed": args.seed,
        },
        "results": results,
        "target": target_verdict(results),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
