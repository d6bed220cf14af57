"""Tiny random cross-encoders of the real architectures, exported and served for real.

No cross-encoder weights can be downloaded here, so each test session builds an
XLM-RoBERTa (bge-reranker-v2-m3's architecture) and a BERT (the ms-marco cross-encoders')
sequence classifier with one label, with tokenizers trained on our own sample corpus,
exports them with the project's export command and serves them through the real gRPC
server. The references (FlagEmbedding's FlagReranker, transformers) load the very same
checkpoint folders.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from groundwire.reranker.v1 import reranker_pb2_grpc
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.server import serving
from groundwire_reranker.entailment import NliModel
from groundwire_reranker.export import BuildReport, build_profile
from groundwire_reranker.export.tiny import Architecture, tiny_checkpoint
from groundwire_reranker.reranking import CrossEncoder
from groundwire_reranker.server import RerankerService
from groundwire_reranker.settings import RerankerSettings

PROFILE_OF: dict[Architecture, str] = {"xlm-roberta": "bge-reranker-v2-m3", "bert": "cross-encoder"}

Served = Callable[..., AbstractAsyncContextManager[reranker_pb2_grpc.RerankerServiceStub]]


@pytest.fixture(scope="session")
def corpus_sentences(repo_root: Path) -> list[str]:
    """A thousand-odd sentences of our own docs: tokenizer training text and test pairs."""
    text = "\n".join(
        p.read_text(encoding="utf-8")
        for p in sorted((repo_root / "samples" / "corpus").glob("*.md"))
    )
    sentences = [s.strip(" #*-`>|") for s in re.split(r"(?<=[.!?])\s+|\n+", text)]
    return [s for s in sentences if len(s) > 20]


@pytest.fixture(scope="session")
def sample_questions(repo_root: Path) -> list[str]:
    lines = (repo_root / "samples" / "questions.txt").read_text(encoding="utf-8").splitlines()
    return [q.strip() for q in lines if q.strip() and not q.startswith("#")]


@pytest.fixture(scope="session")
def checkpoints(
    tmp_path_factory: pytest.TempPathFactory, corpus_sentences: list[str]
) -> dict[Architecture, Path]:
    """The two random checkpoints in Hugging Face layout (config, safetensors, tokenizer)."""
    root = tmp_path_factory.mktemp("reranker-checkpoints")
    return {
        arch: tiny_checkpoint(arch, root / arch, corpus_sentences)
        for arch in ("xlm-roberta", "bert")
    }


@pytest.fixture(scope="session")
def build_logs() -> dict[tuple[str, bool], list[str]]:
    return {}


@pytest.fixture(scope="session")
def exported(
    tmp_path_factory: pytest.TempPathFactory,
    checkpoints: dict[Architecture, Path],
    build_logs: dict[tuple[str, bool], list[str]],
) -> Callable[[Architecture, bool], BuildReport]:
    """``exported(arch, int8)``: the checkpoint built by the export command (once each)."""
    root = tmp_path_factory.mktemp("reranker-models")
    built: dict[tuple[str, bool], BuildReport] = {}

    def get(arch: Architecture, int8: bool = False) -> BuildReport:
        key = (arch, int8)
        if key not in built:
            lines = build_logs.setdefault(key, [])
            built[key] = build_profile(
                PROFILE_OF[arch],
                root / f"{arch}{'-int8' if int8 else ''}",
                int8=int8,
                source=checkpoints[arch],
                log=lines.append,
            )
        return built[key]

    return get


@pytest.fixture
def served() -> Served:
    """``async with served(model_dir=..., **settings) as stub``: a real server on port 0."""

    @asynccontextmanager
    async def serve(
        model: CrossEncoder | None = None,
        nli_model: NliModel | None = None,
        **overrides: object,
    ) -> AsyncIterator[reranker_pb2_grpc.RerankerServiceStub]:
        settings = RerankerSettings(port=0, intra_op_threads=1, **overrides)  # type: ignore[arg-type]
        service = RerankerService(settings, model=model, nli_model=nli_model)
        async with (
            serving(service, settings) as port,
            create_channel(f"127.0.0.1:{port}") as channel,
        ):
            yield reranker_pb2_grpc.RerankerServiceStub(channel)

    return serve
