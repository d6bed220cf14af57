"""The orchestrator's client of the reranker."""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from groundwire.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from groundwire_core.grpc.client import rpc_errors


class RerankerClient:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub = reranker_pb2_grpc.RerankerServiceStub(channel)

    async def rerank(
        self, query: str, passages: Sequence[str], *, top_n: int, threshold: float, timeout_s: float
    ) -> list[tuple[int, float]]:
        """(index, score) best first; failures come out as GroundwireError naming "reranker"."""
        request = reranker_pb2.RerankRequest(
            query=query, passages=list(passages), top_n=top_n, threshold=threshold
        )
        with rpc_errors("reranker"):
            reply = await self._stub.Rerank(request, timeout=timeout_s)
        return [(r.index, r.score) for r in reply.results]
