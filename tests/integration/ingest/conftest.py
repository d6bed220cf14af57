"""Ingestion against real services: the MiniLM embedder and the retriever on port 0;
PDFs made here, with reportlab, rather than binary fixtures in the repository."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest
from reportlab.pdfgen import canvas

from groundwire_core.grpc.server import serving
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings

PdfMaker = Callable[..., bytes]


def build_pdf(
    pages: Sequence[Sequence[str]], *, title: str | None = None, subject: str | None = None
) -> bytes:
    """A PDF with one page per entry, each line drawn as text (an empty line is a gap)."""
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, invariant=True)
    if title is not None:
        pdf.setTitle(title)
    if subject is not None:
        pdf.setSubject(subject)
    for lines in pages:
        y = 800
        for line in lines:
            if line:
                pdf.drawString(72, y, line)
            y -= 14
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


@pytest.fixture
def make_pdf() -> PdfMaker:
    return build_pdf


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
