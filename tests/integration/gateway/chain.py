"""The real chain in-process for the gateway's tests: the MiniLM embedder, the retriever
(Qdrant edge in a temporary folder) with a few documents in ``docs``, the orchestrator
with the fake LLM as its Anthropic model, and the gateway app in front, each over real
gRPC on port 0."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import SecretStr

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.server import serving
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_gateway.app import create_app
from groundwire_gateway.settings import GatewaySettings
from groundwire_orchestrator.server import OrchestratorService
from groundwire_orchestrator.settings import OrchestratorSettings
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings

COLLECTION = "docs"


async def serve_chain(
    exits: AsyncExitStack,
    *,
    minilm_dir: Path,
    data_path: Path,
    docs: Mapping[str, str],
    llm_url: str,
    retriever: Callable[[RetrieverSettings], RetrieverService] = RetrieverService,
    orchestrator: Mapping[str, Any] | None = None,
    gateway: Mapping[str, Any] | None = None,
) -> FastAPI:
    """Starts the services on ``exits``, ingests ``docs`` (source id -> Markdown) into
    ``docs``, and returns the gateway app with its lifespan entered. ``retriever``
    builds the retriever service (e.g. a subclass that records its calls);
    ``orchestrator`` and ``gateway`` override settings."""
    embedder_settings = EmbedderSettings(port=0, model_dir=minilm_dir)
    embedder = await exits.enter_async_context(
        serving(EmbedderService(embedder_settings), embedder_settings)
    )
    retriever_settings = RetrieverSettings(
        port=0, data_path=data_path, embedder_addr=f"127.0.0.1:{embedder}"
    )
    retriever_port = await exits.enter_async_context(
        serving(retriever(retriever_settings), retriever_settings)
    )
    async with create_channel(f"127.0.0.1:{retriever_port}") as channel:
        documents = [
            retriever_pb2.Document(source_id=n, filename=n, content=t.encode())
            for n, t in docs.items()
        ]
        request = retriever_pb2.IngestRequest(
            collection=COLLECTION, documents=documents, create_collection=True
        )
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        events = [e async for e in stub.Ingest(request, timeout=60)]
        assert events[-1].report.ingested == len(docs)
    orchestrator_settings = OrchestratorSettings(
        **{
            "port": 0,
            "embedder_addr": f"127.0.0.1:{embedder}",
            "retriever_addr": f"127.0.0.1:{retriever_port}",
            "reranker_addr": None,
            "dense_floor": -1.0,
            "anthropic_api_key": SecretStr("test-key"),
            "anthropic_base_url": llm_url,
            "llm_order": "anthropic",
            "llm_timeout_s": 5.0,
            # today's streaming and LLM traffic unless a test opts in (the LLM judge
            # and verify-before-show are tested in test_verify_before_show.py)
            "verify_before_show": "off",
            "citation_verifiers": "similarity",
            **(orchestrator or {}),
        }
    )
    orchestrator_port = await exits.enter_async_context(
        serving(OrchestratorService(orchestrator_settings), orchestrator_settings)
    )
    app = create_app(
        GatewaySettings(
            **{
                "orchestrator_addr": f"127.0.0.1:{orchestrator_port}",
                "retriever_addr": f"127.0.0.1:{retriever_port}",
                "default_collection": COLLECTION,
                **(gateway or {}),
            }
        )
    )
    await exits.enter_async_context(app.router.lifespan_context(app))
    return app
