"""Per-replica throughput of the model services: texts/s of the embedder, pairs/s of
the reranker, each saturated by concurrent gRPC callers."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from loadrun.inputs import corpus_passages, sample_questions


async def _saturate(
    call: Any, requests: list[Any], clients: int, seconds: float
) -> tuple[int, float, int]:
    """Calls ``call`` from ``clients`` concurrent loops for ``seconds``; (calls, elapsed,
    total_tokens)."""
    calls = tokens = 0
    deadline = time.perf_counter() + seconds

    async def loop(offset: int) -> None:
        nonlocal calls, tokens
        n = offset
        while time.perf_counter() < deadline:
            reply = await call(requests[n % len(requests)], timeout=120)
            calls += 1
            tokens += int(reply.total_tokens)
            n += 1

    started = time.perf_counter()
    await asyncio.gather(*(loop(i) for i in range(clients)))
    return calls, time.perf_counter() - started, tokens


async def measure_throughput(
    embedder_addr: str,
    reranker_addr: str | None,
    seconds: float,
    clients: int,
    *,
    reranker_is_tiny: bool = True,
) -> dict[str, Any]:
    """Texts/s of the embedder at batch 32 (queries and passages) and pairs/s of the
    reranker (a query and 50 passages per call), each replica saturated by ``clients``
    concurrent gRPC callers."""
    from groundwire.embedder.v1 import embedder_pb2, embedder_pb2_grpc
    from groundwire.reranker.v1 import reranker_pb2, reranker_pb2_grpc
    from groundwire_core.grpc.client import create_channel

    questions = sample_questions()
    out: dict[str, Any] = {"clients": clients, "seconds_per_cell": seconds}
    channel = create_channel(embedder_addr)
    try:
        embedder = embedder_pb2_grpc.EmbedderServiceStub(channel)
        info = await embedder.Info(embedder_pb2.InfoRequest(), timeout=10)
        shapes = {
            "query": [
                questions[i % len(questions) :] + questions[: i % len(questions)] for i in range(8)
            ],
            "passage": [corpus_passages(180, 32) for _ in range(4)],
        }
        cells: dict[str, Any] = {}
        for shape, batches in shapes.items():
            requests = [embedder_pb2.EmbedRequest(texts=(b * 2)[:32]) for b in batches]
            await embedder.Embed(requests[0], timeout=120)  # warm
            calls, elapsed, tokens = await _saturate(embedder.Embed, requests, clients, seconds)
            texts = calls * 32
            cells[shape] = {
                "batch_texts": 32,
                "mean_tokens_per_text": round(tokens / texts, 1) if texts else None,
                "texts_per_s": round(texts / elapsed, 1),
                "tokens_per_s": round(tokens / elapsed, 0),
            }
        out["embedder"] = {
            "model_id": info.model_id,
            "profile": info.profile,
            "max_tokens": info.max_tokens,
            "quantized": info.quantized,
            **cells,
        }
    finally:
        await channel.close()
    if reranker_addr is None:
        return out
    channel = create_channel(reranker_addr)
    try:
        reranker = reranker_pb2_grpc.RerankerServiceStub(channel)
        info = await reranker.Info(reranker_pb2.InfoRequest(), timeout=10)
        passages = corpus_passages(120, 50 * 4)
        requests = [
            reranker_pb2.RerankRequest(
                query=questions[i % len(questions)],
                passages=passages[i * 50 : (i + 1) * 50],
                top_n=20,
            )
            for i in range(4)
        ]
        await reranker.Rerank(requests[0], timeout=120)
        calls, elapsed, tokens = await _saturate(reranker.Rerank, requests, clients, seconds)
        pairs = calls * 50
        out["reranker"] = {
            "model_id": info.model_id,
            "profile": info.profile,
            "max_tokens": info.max_tokens,
            "mechanics_only": reranker_is_tiny,
            "passages_per_call": 50,
            "mean_tokens_per_pair": round(tokens / pairs, 1) if pairs else None,
            "pairs_per_s": round(pairs / elapsed, 1),
            "tokens_per_s": round(tokens / elapsed, 0),
        }
    finally:
        await channel.close()
    return out
