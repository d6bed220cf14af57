"""From one raw document to the chunks to store: parse, chunk, identify.

No store and no gRPC here; the retriever's service embeds and writes what this
returns.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from groundwire_core.errors import InvalidInput
from groundwire_retriever.domain import Chunk
from groundwire_retriever.ingest.chunker import (
    BatchTokenCounter,
    TextChunk,
    chunk_document,
    chunk_document_counted,
)
from groundwire_retriever.ingest.parsers import guess_format, parse

_CHUNK_NAMESPACE = uuid.UUID("6f1c2b0e-8a1d-4e55-9a51-5b7d1f0a9c11")
# One Tokenize call stays well under the embedder's max_batch_texts (default 256)
# and the gRPC message limit.
_COUNT_BATCH_TEXTS = 128
_COUNT_BATCH_CHARS = 1 << 20


@dataclass(frozen=True)
class DocumentInput:
    source_id: str
    content: bytes
    format: str = ""
    title: str = ""
    url: str = ""
    doc_type: str = ""
    filename: str = ""
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ChunkingPolicy:
    min_tokens: int = 300
    max_tokens: int = 800
    overlap_tokens: int = 50
    max_document_bytes: int = 20 * 1024 * 1024


def _in_batches(count_tokens: BatchTokenCounter) -> BatchTokenCounter:
    """``count_tokens`` called on slices small enough for one request each."""

    async def counted(texts: Sequence[str]) -> list[int]:
        counts: list[int] = []
        start = 0
        while start < len(texts):
            end, chars = start, 0
            while end < len(texts) and end - start < _COUNT_BATCH_TEXTS:
                chars += len(texts[end])
                if end > start and chars > _COUNT_BATCH_CHARS:
                    break
                end += 1
            counts.extend(await count_tokens(texts[start:end]))
            start = end
        return counts

    return counted


async def prepare_chunks(
    doc: DocumentInput,
    policy: ChunkingPolicy,
    *,
    count_tokens: BatchTokenCounter | None = None,
) -> list[Chunk]:
    """The chunks of ``doc``; raises InvalidInput with a reason for the ingest report.

    ``count_tokens`` sizes chunks in the embedding model's tokens (e.g.
    ``EmbedderClient.count_tokens``; its errors propagate); without it a word-based
    estimate is used.
    """
    if not doc.source_id.strip():
        raise InvalidInput("source_id must not be empty")
    if len(doc.content) > policy.max_document_bytes:
        raise InvalidInput(
            f"the document is {len(doc.content)} bytes; the limit is {policy.max_document_bytes}"
        )
    fmt = guess_format(doc.format, doc.filename)
    # Parsing a large HTML page or PDF takes a while: keep the event loop serving.
    parsed = await asyncio.to_thread(
        parse, doc.content, fmt, title=doc.title, filename=doc.filename or doc.source_id
    )
    pieces: list[TextChunk]
    if count_tokens is None:
        pieces = await asyncio.to_thread(
            chunk_document,
            parsed.title,
            parsed.body,
            summary=parsed.summary,
            markdown=parsed.markdown,
            min_tokens=policy.min_tokens,
            max_tokens=policy.max_tokens,
            overlap_tokens=policy.overlap_tokens,
        )
    else:
        pieces = await chunk_document_counted(
            parsed.title,
            parsed.body,
            count_tokens=_in_batches(count_tokens),
            summary=parsed.summary,
            markdown=parsed.markdown,
            min_tokens=policy.min_tokens,
            max_tokens=policy.max_tokens,
            overlap_tokens=policy.overlap_tokens,
        )
    if not pieces:
        raise InvalidInput("the document has no text outside its headings")
    now = time.time()
    return [
        Chunk(
            chunk_id=str(uuid.uuid5(_CHUNK_NAMESPACE, f"{doc.source_id}\x00{p.index}\x00{h}")),
            source_id=doc.source_id,
            text=p.text,
            title=parsed.title,
            heading_path=p.heading_path,
            chunk_index=p.index,
            url=doc.url or parsed.url,
            doc_type=doc.doc_type or parsed.doc_type,
            content_hash=h,
            metadata=dict(doc.metadata),
            created_at=now,
        )
        for p in pieces
        for h in [hashlib.sha256(p.text.encode()).hexdigest()]
    ]
