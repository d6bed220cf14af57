"""Each service as a real gRPC server on port 0, over a real channel: health is
SERVING after warm-up, reflection lists the service, Info answers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

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
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_orchestrator.server import OrchestratorService
from groundwire_orchestrator.settings import OrchestratorSettings
from groundwire_reranker.server import RerankerService
from groundwire_reranker.settings import RerankerSettings
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings


async def _health(channel: grpc.aio.Channel, service: str) -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
    return int(reply.status)


async def _reflected(channel: grpc.aio.Channel) -> set[str]:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    async for reply in stub.ServerReflectionInfo(iter([request]), timeout=5):
        return {s.name for s in reply.list_services_response.service}
    return set()


@pytest.fixture
async def cluster(minilm_dir: Path, tmp_path: Path) -> AsyncIterator[dict[str, int]]:
    """Embedder, reranker, retriever and orchestrator in this process, on port 0."""
    async with AsyncExitStack() as stack:
        ports: dict[str, int] = {}
        ports["embedder"] = await stack.enter_async_context(
            serving(
                EmbedderService(EmbedderSettings(port=0, model_dir=minilm_dir)),
                EmbedderSettings(port=0),
            )
        )
        ports["reranker"] = await stack.enter_async_context(
            serving(RerankerService(RerankerSettings(port=0)), RerankerSettings(port=0))
        )
        retriever_settings = RetrieverSettings(
            port=0, data_path=tmp_path / "qdrant", embedder_addr=f"127.0.0.1:{ports['embedder']}"
        )
        ports["retriever"] = await stack.enter_async_context(
            serving(RetrieverService(retriever_settings), retriever_settings)
        )
        orchestrator_settings = OrchestratorSettings(
            port=0,
            embedder_addr=f"127.0.0.1:{ports['embedder']}",
            retriever_addr=f"127.0.0.1:{ports['retriever']}",
            reranker_addr=f"127.0.0.1:{ports['reranker']}",
        )
        ports["orchestrator"] = await stack.enter_async_context(
            serving(OrchestratorService(orchestrator_settings), orchestrator_settings)
        )
        yield ports


SERVICE_NAMES = {
    "embedder": "groundwire.embedder.v1.EmbedderService",
    "reranker": "groundwire.reranker.v1.RerankerService",
    "retriever": "groundwire.retriever.v1.RetrieverService",
    "orchestrator": "groundwire.orchestrator.v1.OrchestratorService",
}


@pytest.mark.parametrize("name", sorted(SERVICE_NAMES))
async def test_health_and_reflection(cluster: dict[str, int], name: str) -> None:
    async with create_channel(f"127.0.0.1:{cluster[name]}") as channel:
        serving_status = health_pb2.HealthCheckResponse.SERVING
        assert await _health(channel, "") == serving_status
        assert await _health(channel, SERVICE_NAMES[name]) == serving_status
        services = await _reflected(channel)
        assert SERVICE_NAMES[name] in services
        assert "grpc.health.v1.Health" in services


async def test_info_answers(cluster: dict[str, int]) -> None:
    async with create_channel(f"127.0.0.1:{cluster['embedder']}") as ch:
        info = await embedder_pb2_grpc.EmbedderServiceStub(ch).Info(embedder_pb2.InfoRequest())
        assert (info.model_id, info.profile, info.dense_dims) == (
            "sentence-transformers/all-MiniLM-L6-v2",
            "minilm",
            384,
        )
        assert list(info.outputs) == [embedder_pb2.OUTPUT_DENSE]
        assert info.max_tokens == 256
    async with create_channel(f"127.0.0.1:{cluster['reranker']}") as ch:
        info_r = await reranker_pb2_grpc.RerankerServiceStub(ch).Info(reranker_pb2.InfoRequest())
        assert info_r.ready is False and info_r.max_batch_passages > 0
    async with create_channel(f"127.0.0.1:{cluster['retriever']}") as ch:
        info_q = await retriever_pb2_grpc.RetrieverServiceStub(ch).Info(retriever_pb2.InfoRequest())
        assert info_q.engine == "edge" and info_q.collections == 0
    async with create_channel(f"127.0.0.1:{cluster['orchestrator']}") as ch:
        stub = orchestrator_pb2_grpc.OrchestratorServiceStub(ch)
        info_o = await stub.Info(orchestrator_pb2.InfoRequest())
        assert info_o.reranker_configured and info_o.candidates == 50
        deps = await stub.Dependencies(orchestrator_pb2.DependenciesRequest())
        status = {d.name: d.status for d in deps.dependencies}
        assert status["embedder"] == orchestrator_pb2.DEPENDENCY_STATUS_SERVING
        assert status["retriever"] == orchestrator_pb2.DEPENDENCY_STATUS_SERVING
        assert status["llm"] == orchestrator_pb2.DEPENDENCY_STATUS_DISABLED


async def test_embed_then_ingest_then_search_in_process(cluster: dict[str, int]) -> None:
    """The slice without the gateway: ingest two documents, search by meaning."""
    docs = [
        retriever_pb2.Document(
            source_id="cats.md",
            filename="cats.md",
            content=b"# Cats\n\nFelines purr and sleep most of the day.",
        ),
        retriever_pb2.Document(
            source_id="rust.md",
            filename="rust.md",
            content=b"# Rust\n\nThe borrow checker enforces memory safety.",
        ),
    ]
    async with create_channel(f"127.0.0.1:{cluster['retriever']}") as ch:
        stub = retriever_pb2_grpc.RetrieverServiceStub(ch)
        events = [
            e
            async for e in stub.Ingest(
                retriever_pb2.IngestRequest(collection="t", documents=docs, create_collection=True)
            )
        ]
        assert [e.progress.done for e in events[:-1]] == [1, 2]
        assert events[-1].report.ingested == 2
        again = [
            e
            async for e in stub.Ingest(retriever_pb2.IngestRequest(collection="t", documents=docs))
        ]
        assert again[-1].report.unchanged == 2, "re-ingesting unchanged documents is a no-op"
    async with create_channel(f"127.0.0.1:{cluster['orchestrator']}") as ch:
        stub_o = orchestrator_pb2_grpc.OrchestratorServiceStub(ch)
        reply = await stub_o.Search(
            orchestrator_pb2.SearchRequest(
                collection="t", query="which pet naps a lot", limit=2, rerank=True
            )
        )
        assert reply.results[0].source_id == "cats.md"
        stages = {s.name: s for s in reply.stages}
        assert stages["rerank"].fallback and stages["rerank"].dependency == "reranker"
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub_o.Search(orchestrator_pb2.SearchRequest(collection="nope", query="x"))
        assert info.value.code() == grpc.StatusCode.NOT_FOUND


async def test_tokenize_counts_without_truncation(cluster: dict[str, int]) -> None:
    from groundwire_core.clients.embedder import EmbedderClient

    async with create_channel(f"127.0.0.1:{cluster['embedder']}") as ch:
        counts = await EmbedderClient(ch).count_tokens(["hello world", "word " * 400])
    assert counts[0] == 4  # [CLS] hello world [SEP]
    assert counts[1] == 402, "longer than max_tokens (256): counted, not truncated"


def _failed_start(name: str, **settings: str) -> str:
    """Runs ``python -m groundwire_<name>`` with ``settings`` (its env prefix added),
    expects exit status 1 with one ERROR line and no traceback, returns that line."""
    prefix = f"GROUNDWIRE_{name.upper()}_"
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefix)}
    env.update({f"{prefix}{k}": v for k, v in {"HOST": "127.0.0.1", **settings}.items()})
    done = subprocess.run(
        [sys.executable, "-m", f"groundwire_{name}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, done.stderr
    return errors[0]


def test_a_service_whose_port_is_taken_exits_with_one_clear_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = _failed_start("reranker", PORT=str(port))
    assert f"reranker cannot listen on 127.0.0.1:{port}" in line


def test_a_service_that_cannot_warm_up_exits_with_one_clear_line(tmp_path: Path) -> None:
    # a deliberate startup error: a model folder that is not a built model
    line = _failed_start("embedder", PORT="0", MODEL_DIR=str(tmp_path))
    assert f"embedder cannot start: model directory {tmp_path} has no groundwire-model" in line
    assert "groundwire models build" in line
