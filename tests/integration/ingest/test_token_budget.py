"""Chunk sizes in the embedding model's own tokens: prepare_chunks counting through
the real embedder's Tokenize RPC (MiniLM's WordPiece tokenizer)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from groundwire_core.clients.embedder import EmbedderClient
from groundwire_core.grpc.client import create_channel
from groundwire_retriever.ingest.chunker import approx_tokens
from groundwire_retriever.ingest.pipeline import ChunkingPolicy, DocumentInput, prepare_chunks

ROOT = Path(__file__).resolve().parents[3]


async def test_chunks_fit_the_budget_in_model_tokens(embedder_addr: str) -> None:
    corpus = sorted((ROOT / "samples" / "corpus").glob("*.md"))[:4]
    policy = ChunkingPolicy(min_tokens=60, max_tokens=120, overlap_tokens=20)
    async with create_channel(embedder_addr) as channel:
        client = EmbedderClient(channel)
        calls: list[int] = []

        async def count_tokens(texts: Sequence[str]) -> list[int]:
            calls.append(len(texts))
            return await client.count_tokens(texts)

        for path in corpus:
            calls.clear()
            doc = DocumentInput(path.name, path.read_bytes(), filename=path.name)
            chunks = await prepare_chunks(doc, policy, count_tokens=count_tokens)
            sizes = await client.count_tokens([c.text for c in chunks])
            assert len(chunks) >= 5
            assert max(sizes) <= 120, (path.name, sizes)
            # packed, not one chunk per paragraph: the typical chunk reaches the minimum
            assert sorted(sizes)[len(sizes) // 2] >= 60, (path.name, sizes)
            # a few batched RPCs per document, not one per paragraph
            assert 2 <= len(calls) <= 6, calls
            # the model's count differs from the word estimate the fallback uses
            assert sizes != [approx_tokens(c.text) for c in chunks]
