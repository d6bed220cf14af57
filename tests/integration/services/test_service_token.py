"""Service-to-service trust (#24, acceptance 3): with GROUNDWIRE_SERVICE_TOKEN set,
each real service on port 0 refuses a call without the token (or with a wrong one),
UNAUTHENTICATED, for unary and streaming RPCs and reflection; health stays open (for
Kubernetes' gRPC probes); and the services' own calls to each other carry the token,
so the whole chain still answers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from groundwire.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from groundwire.orchestrator.v1 import orchestrator_pb2, orchestrator_pb2_grpc
from groundwire.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.server import serving
from groundwire_core.grpc.service_auth import set_process_token
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_orchestrator.server import OrchestratorService
from groundwire_orchestrator.settings import OrchestratorSettings
from groundwire_reranker.server import RerankerService
from groundwire_reranker.settings import RerankerSettings
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings

TOKEN = "s2s-test-token-0123456789abcdef"
TOKEN_ENV = {"GROUNDWIRE_SERVICE_TOKEN": TOKEN}


@pytest.fixture
async def cluster(minilm_dir: Path, tmp_path: Path) -> AsyncIterator[dict[str, int]]:
    """Embedder, reranker, retriever and orchestrator, all holding the same token."""
    async with AsyncExitStack() as stack:
        stack.callback(set_process_token, None)  # other tests in this process run open
        ports: dict[str, int] = {}
        embedder = EmbedderSettings(port=0, model_dir=minilm_dir, **TOKEN_ENV)
        ports["embedder"] = await stack.enter_async_context(
            serving(EmbedderService(embedder), embedder)
        )
        reranker = RerankerSettings(port=0, **TOKEN_ENV)
        ports["reranker"] = await stack.enter_async_context(
            serving(RerankerService(reranker), reranker)
        )
        retriever = RetrieverSettings(
            port=0,
            data_path=tmp_path / "qdrant",
            embedder_addr=f"127.0.0.1:{ports['embedder']}",
            **TOKEN_ENV,
        )
        ports["retriever"] = await stack.enter_async_context(
            serving(RetrieverService(retriever), retriever)
        )
        orchestrator = OrchestratorSettings(
            port=0,
            embedder_addr=f"127.0.0.1:{ports['embedder']}",
            retriever_addr=f"127.0.0.1:{ports['retriever']}",
            reranker_addr=f"127.0.0.1:{ports['reranker']}",
            **TOKEN_ENV,
        )
        ports["orchestrator"] = await stack.enter_async_context(
            serving(OrchestratorService(orchestrator), orchestrator)
        )
        yield ports


Call = Callable[[grpc.aio.Channel, tuple[tuple[str, str], ...]], Awaitable[Any]]


async def _embedder_info(ch: grpc.aio.Channel, md: tuple[tuple[str, str], ...]) -> Any:
    stub = embedder_pb2_grpc.EmbedderServiceStub(ch)
    return await stub.Info(embedder_pb2.InfoRequest(), metadata=md, timeout=5)


async def _reranker_info(ch: grpc.aio.Channel, md: tuple[tuple[str, str], ...]) -> Any:
    stub = reranker_pb2_grpc.RerankerServiceStub(ch)
    return await stub.Info(reranker_pb2.InfoRequest(), metadata=md, timeout=5)


async def _retriever_drop(ch: grpc.aio.Channel, md: tuple[tuple[str, str], ...]) -> Any:
    stub = retriever_pb2_grpc.RetrieverServiceStub(ch)
    request = retriever_pb2.DropCollectionRequest(name="t")
    return await stub.DropCollection(request, metadata=md, timeout=5)


async def _retriever_ingest(ch: grpc.aio.Channel, md: tuple[tuple[str, str], ...]) -> Any:
    """A server-streaming RPC: refused before its first message."""
    stub = retriever_pb2_grpc.RetrieverServiceStub(ch)
    doc = retriever_pb2.Document(source_id="x.md", filename="x.md", content=b"# X\n\nx")
    request = retriever_pb2.IngestRequest(collection="t", documents=[doc])
    return [e async for e in stub.Ingest(request, metadata=md, timeout=5)]


async def _orchestrator_search(ch: grpc.aio.Channel, md: tuple[tuple[str, str], ...]) -> Any:
    stub = orchestrator_pb2_grpc.OrchestratorServiceStub(ch)
    request = orchestrator_pb2.SearchRequest(collection="t", query="x")
    return await stub.Search(request, metadata=md, timeout=5)


async def _reflection(ch: grpc.aio.Channel, md: tuple[tuple[str, str], ...]) -> Any:
    stub = reflection_pb2_grpc.ServerReflectionStub(ch)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    return [r async for r in stub.ServerReflectionInfo(iter([request]), metadata=md, timeout=5)]


CALLS: list[tuple[str, str, Call]] = [
    ("embedder", "Info", _embedder_info),
    ("reranker", "Info", _reranker_info),
    ("retriever", "DropCollection", _retriever_drop),
    ("retriever", "Ingest (stream)", _retriever_ingest),
    ("orchestrator", "Search", _orchestrator_search),
    ("embedder", "reflection", _reflection),
    ("retriever", "reflection", _reflection),
]
WITHOUT = {
    "no token": (),
    "wrong token": (("authorization", "Bearer not-the-token"),),
    "token without scheme": (("authorization", TOKEN),),
}


async def test_every_service_refuses_a_call_without_the_token(cluster: dict[str, int]) -> None:
    for service, rpc, call in CALLS:
        # a bare channel: create_channel would attach this process's token
        async with grpc.aio.insecure_channel(f"127.0.0.1:{cluster[service]}") as channel:
            for label, metadata in WITHOUT.items():
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await call(channel, metadata)
                print(f"{service}.{rpc} with {label}: {info.value.code().name}")
                assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED, info.value.details()
                assert TOKEN not in (info.value.details() or "")


async def test_health_needs_no_token(cluster: dict[str, int]) -> None:
    for port in cluster.values():
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=5
            )
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_the_chain_answers_with_the_token(cluster: dict[str, int]) -> None:
    """Retriever → embedder (ingest) and orchestrator → embedder, retriever (search)
    are our own channels: they attach the token, so nothing in the chain is refused."""
    doc = retriever_pb2.Document(
        source_id="cats.md", filename="cats.md", content=b"# Cats\n\nFelines purr and nap."
    )
    auth = (("authorization", f"Bearer {TOKEN}"),)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{cluster['retriever']}") as channel:
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        request = retriever_pb2.IngestRequest(
            collection="t", documents=[doc], create_collection=True
        )
        events = [e async for e in stub.Ingest(request, metadata=auth, timeout=30)]
        assert events[-1].report.ingested == 1
        # #24: a collection keeps the tenant it was created for; ingest-made ones are public
        made = await stub.CreateCollection(
            retriever_pb2.CreateCollectionRequest(name="acme-notes", tenant="acme"),
            metadata=auth,
            timeout=10,
        )
        assert made.tenant == "acme"
        listing = await stub.ListCollections(
            retriever_pb2.ListCollectionsRequest(), metadata=auth, timeout=10
        )
        assert {c.name: c.tenant for c in listing.collections} == {
            "t": "public",
            "acme-notes": "acme",
        }
    async with create_channel(f"127.0.0.1:{cluster['orchestrator']}", TOKEN) as channel:
        reply = await orchestrator_pb2_grpc.OrchestratorServiceStub(channel).Search(
            orchestrator_pb2.SearchRequest(collection="t", query="which pet naps", limit=1),
            timeout=30,
        )
        assert reply.results[0].source_id == "cats.md"
