"""The orchestrator's client of the reranker: Rerank, Entail (the NLI model, when it
serves one), and Info for its current load."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from groundwire.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from groundwire_core.grpc.client import rpc_errors


@dataclass(frozen=True)
class RerankerLoad:
    """What the reranker's Info says about it right now."""

    ready: bool
    queue_depth: int
    ms_per_passage: float
    """Recent median per passage scored; 0 when unknown."""
    max_batch_passages: int
    max_tokens: int = 0
    """Longest (query, passage) pair the reranker reads (its pair cap); 0 = unknown."""
    entailment_ready: bool = False
    """Whether an NLI model is loaded and ``entail`` can answer."""
    entailment_max_tokens: int = 0
    """Longest (premise, hypothesis) pair the NLI model reads; 0 without one."""


@dataclass(frozen=True)
class EntailProbs:
    """The NLI model's softmax over its three labels for one (premise, hypothesis) pair."""

    entailment: float
    neutral: float
    contradiction: float


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

    async def entail(
        self, pairs: Sequence[tuple[str, str]], *, timeout_s: float
    ) -> list[EntailProbs]:
        """Label probabilities of each (premise, hypothesis) pair, in order; failures
        (no NLI model: Unavailable; queue full: Overloaded) as GroundwireError naming
        "reranker"."""
        request = reranker_pb2.EntailRequest(
            pairs=[reranker_pb2.EntailPair(premise=p, hypothesis=h) for p, h in pairs]
        )
        with rpc_errors("reranker"):
            reply = await self._stub.Entail(request, timeout=timeout_s)
        return [EntailProbs(r.entailment, r.neutral, r.contradiction) for r in reply.results]

    async def load(self, *, timeout_s: float) -> RerankerLoad:
        """The reranker's readiness and load; failures as GroundwireError naming "reranker"."""
        with rpc_errors("reranker"):
            reply = await self._stub.Info(reranker_pb2.InfoRequest(), timeout=timeout_s)
        return RerankerLoad(
            ready=reply.ready,
            queue_depth=reply.queue_depth,
            ms_per_passage=reply.ms_per_passage,
            max_batch_passages=reply.max_batch_passages,
            max_tokens=reply.max_tokens,
            entailment_ready=reply.entailment_ready,
            entailment_max_tokens=reply.entailment_max_tokens,
        )
