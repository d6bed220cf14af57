"""The orchestrator's bounds, through its real gRPC server: an Ask larger than
ask_max_bytes is INVALID_ARGUMENT before any work, and a frozen embedder costs a search
embedder_query_timeout_s, not the 10 s call timeout, before it goes on without the
embedder (BM25 in the retriever, here unreachable). The embedder is the real one (real
MiniLM) with its Embed frozen on demand."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from groundwire.orchestrator.v1 import orchestrator_pb2, orchestrator_pb2_grpc
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.errors import DEPENDENCY_KEY
from groundwire_core.grpc.server import serving
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_orchestrator.server import OrchestratorService
from groundwire_orchestrator.settings import OrchestratorSettings

pytestmark = pytest.mark.asyncio(loop_scope="module")

pb = orchestrator_pb2


class FreezableEmbedder(EmbedderService):
    """The real embedder; while ``frozen``, Embed never answers (a hung process)."""

    def __init__(self, settings: EmbedderSettings) -> None:
        super().__init__(settings)
        self.frozen = False

    async def Embed(self, request, context):  # type: ignore[no-untyped-def]
        if self.frozen:
            await asyncio.Event().wait()
        return await super().Embed(request, context)


@dataclass
class Stack:
    embedder: FreezableEmbedder
    port: int


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def stack(minilm_dir: Path) -> AsyncIterator[Stack]:
    async with AsyncExitStack() as exits:
        embedder = FreezableEmbedder(EmbedderSettings(port=0, model_dir=minilm_dir))
        embedder_port = await exits.enter_async_context(serving(embedder, EmbedderSettings(port=0)))
        settings = OrchestratorSettings(
            port=0,
            embedder_addr=f"127.0.0.1:{embedder_port}",
            # unreachable: the search that gives up on the embedder fails here, in time
            retriever_addr="127.0.0.1:9",
            reranker_addr=None,
            call_timeout_s=10.0,
            embedder_query_timeout_s=0.5,
            ask_max_bytes=8192,
        )
        port = await exits.enter_async_context(serving(OrchestratorService(settings), settings))
        yield Stack(embedder, port)


async def test_an_ask_over_the_byte_bound_is_invalid_argument_at_once(stack: Stack) -> None:
    history = [
        pb.Message(role=pb.ROLE_USER if i % 2 == 0 else pb.ROLE_ASSISTANT, content="x" * 10)
        for i in range(5_000)
    ]
    cases = [
        pb.AskRequest(collection="docs", messages=history),
        pb.AskRequest(
            collection="docs",
            messages=[pb.Message(role=pb.ROLE_USER, content="q")],
            instructions="y" * 9000,
        ),
    ]
    async with create_channel(f"127.0.0.1:{stack.port}") as ch:
        stub = orchestrator_pb2_grpc.OrchestratorServiceStub(ch)
        for request in cases:
            started = time.perf_counter()
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                [e async for e in stub.Ask(request, timeout=10)]
            assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert "the limit is 8192" in (caught.value.details() or "")
            assert time.perf_counter() - started < 1.0


async def test_a_frozen_embedder_costs_a_search_only_the_query_deadline(stack: Stack) -> None:
    stack.embedder.frozen = True
    try:
        async with create_channel(f"127.0.0.1:{stack.port}") as ch:
            stub = orchestrator_pb2_grpc.OrchestratorServiceStub(ch)
            # 5 s: waiting for the embedder's 10 s call deadline would end this call as
            # DEADLINE_EXCEEDED; only the 0.5 s query deadline lets the retriever answer
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.Search(
                    pb.SearchRequest(collection="docs", query="rate limits"), timeout=5
                )
    finally:
        stack.embedder.frozen = False
    # past the 0.5 s query deadline the search went on to the retriever (BM25 needs no
    # embedder): the failure is the retriever's, not the embedder's deadline
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE, caught.value.details()
    metadata = dict(caught.value.trailing_metadata() or ())
    assert metadata.get(DEPENDENCY_KEY) == "retriever"
