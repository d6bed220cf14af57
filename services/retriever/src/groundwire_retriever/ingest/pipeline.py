"""From one raw document to the chunks to store: parse, chunk, identify.

No store and no gRPC here; the retriever's service embeds and writes what this
returns.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass, field

from groundwire_core.errors import InvalidInput
from groundwire_retriever.domain import Chunk
from groundwire_retriever.ingest.chunker import chunk_document
from groundwire_retriever.ingest.parsers import guess_format, parse

_CHUNK_NAMESPACE = uuid.UUID("6f1c2b0e-8a1d-4e55-9a51-5b7d1f0a9c11")


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
    max_tokens: int = 800
    overlap_tokens: int = 50
    max_document_bytes: int = 20 * 1024 * 1024


async def prepare_chunks(doc: DocumentInput, policy: ChunkingPolicy) -> list[Chunk]:
    """The chunks of ``doc``; raises InvalidInput with a reason for the ingest report."""
    if not doc.source_id.strip():
        raise InvalidInput("source_id must not be empty")
    if len(doc.content) > policy.max_document_bytes:
        raise InvalidInput(
            f"the document is {len(doc.content)} bytes; the limit is {policy.max_document_bytes}"
        )
    parsed = parse(
        doc.content,
        guess_format(doc.format, doc.filename),
        title=doc.title,
        filename=doc.filename or doc.source_id,
    )
    pieces = chunk_document(
        parsed.title,
        parsed.body,
        summary=parsed.summary,
        max_tokens=policy.max_tokens,
        overlap_tokens=policy.overlap_tokens,
    )
    now = time.time()
    front = parsed.front_matter
    return [
        Chunk(
            chunk_id=str(uuid.uuid5(_CHUNK_NAMESPACE, f"{doc.source_id}\x00{p.index}\x00{h}")),
            source_id=doc.source_id,
            text=p.text,
            title=parsed.title,
            heading_path=p.heading_path,
            chunk_index=p.index,
            url=doc.url or front.get("url", ""),
            doc_type=doc.doc_type or front.get("type", ""),
            content_hash=h,
            metadata=dict(doc.metadata),
            created_at=now,
        )
        for p in pieces
        for h in [hashlib.sha256(p.text.encode()).hexdigest()]
    ]
