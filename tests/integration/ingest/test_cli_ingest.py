"""The CLI's ingest client (``groundwire ingest``) against the real MiniLM embedder and
retriever: batched ingest, and ``--full-reindex`` making the given files the whole
collection in one request."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_cli import ingest as cli_ingest
from groundwire_cli.ingest import ingest_files
from groundwire_core.errors import InvalidInput
from groundwire_core.grpc.client import create_channel


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(f"# {name}\n\n{text}\n")
    return path


async def _sources(addr: str) -> set[str]:
    async with create_channel(addr) as channel:
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        reply = await stub.Search(
            retriever_pb2.SearchRequest(
                collection="docs", text="keys", paths=[retriever_pb2.SEARCH_PATH_BM25], limit=50
            )
        )
    return {hit.chunk.source_id for hit in reply.hits}


async def test_full_reindex_makes_the_files_the_whole_collection(
    retriever_addr: str, tmp_path: Path
) -> None:
    keep = _write(tmp_path, "keep.md", "API keys are rotated every ninety days.")
    gone = _write(tmp_path, "gone.md", "Old keys are revoked after a week.")
    totals = await ingest_files(retriever_addr, "docs", [keep, gone], root=tmp_path)
    assert totals.ingested == 2
    assert await _sources(retriever_addr) == {"keep.md", "gone.md"}

    seen: list[int] = []
    totals = await ingest_files(
        retriever_addr,
        "docs",
        [keep],
        root=tmp_path,
        full_reindex=True,
        on_progress=lambda p: seen.append(p.done),
    )
    assert totals.ingested == 1 and seen == [1]
    assert await _sources(retriever_addr) == {"keep.md"}, "a source not given disappears"


async def test_a_full_reindex_too_large_for_one_request_is_refused_before_sending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_ingest, "FULL_REINDEX_BYTES", 2 * 2**20)
    big = _write(tmp_path, "big.md", "word " * 600_000)  # 3 MiB
    # no retriever at this address: the size check comes first
    with pytest.raises(InvalidInput, match=r"total 3 MiB, over 2 MiB: ingest them into a new"):
        await ingest_files("127.0.0.1:9", "docs", [big], full_reindex=True)
