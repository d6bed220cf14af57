"""Ingestion against real services: the MiniLM embedder and the retriever on port 0.
(``make_pdf`` comes from tests/conftest.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from groundwire_core.grpc.server import serving
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings


@pytest.fixture
async def embedder_addr(minilm_dir: Path) -> AsyncIterator[str]:
    """The real MiniLM embedder in this process, on port 0."""
    settings = EmbedderSettings(port=0, model_dir=minilm_dir)
    async with serving(EmbedderService(settings), settings) as port:
        yield f"127.0.0.1:{port}"


@pytest.fixture
async def retriever_addr(embedder_addr: str, tmp_path: Path) -> AsyncIterator[str]:
    """The retriever (embedded engine in tmp_path) in this process, on port 0."""
    settings = RetrieverSettings(port=0, data_path=tmp_path / "qdrant", embedder_addr=embedder_addr)
    async with serving(RetrieverService(settings), settings) as port:
        yield f"127.0.0.1:{port}"
