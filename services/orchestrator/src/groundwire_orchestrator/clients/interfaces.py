"""What the stages need from the services they call, as Protocols: the gRPC clients
satisfy them, and unit tests pass in-process fakes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from groundwire_core.clients.embedder import EmbedderInfo, TextEmbedding
from groundwire_orchestrator.clients.reranker import EntailProbs, RerankerLoad
from groundwire_orchestrator.clients.retriever import CollectionInfo, HybridQuery, PathSummary
from groundwire_orchestrator.domain import Candidate


class Embedder(Protocol):
    async def info(self) -> EmbedderInfo: ...

    async def embed(
        self, texts: Sequence[str], *, query: bool, outputs: Sequence[str] = ("dense",)
    ) -> list[TextEmbedding]: ...


class Retriever(Protocol):
    async def describe(self, collection: str) -> CollectionInfo: ...

    async def search(self, query: HybridQuery) -> tuple[list[Candidate], list[PathSummary]]: ...


class Reranker(Protocol):
    async def rerank(
        self, query: str, passages: Sequence[str], *, top_n: int, threshold: float, timeout_s: float
    ) -> list[tuple[int, float]]: ...

    async def load(self, *, timeout_s: float) -> RerankerLoad: ...


class Entailer(Protocol):
    """The reranker's NLI model (the entailment citation verifier's backend)."""

    async def entail(
        self, pairs: Sequence[tuple[str, str]], *, timeout_s: float
    ) -> list[EntailProbs]: ...
