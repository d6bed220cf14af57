"""From one raw document to the chunks to store: parse, chunk, identify.

No store and no gRPC here; the retriever's service embeds and writes what this
returns.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, fields

from groundwire_core.document_text import chunk_ranges
from groundwire_core.errors import InvalidInput
from groundwire_core.urls import is_web_url
from groundwire_retriever.access import parse_access
from groundwire_retriever.domain import Chunk
from groundwire_retriever.ingest.chunker import (
    BatchTokenCounter,
    TextChunk,
    chunk_document,
    chunk_document_counted,
)
from groundwire_retriever.ingest.parsers import ParsedDocument, guess_format, parse
from groundwire_retriever.ingest.sandbox import ParseSandbox

_CHUNK_NAMESPACE = uuid.UUID("6f1c2b0e-8a1d-4e55-9a51-5b7d1f0a9c11")
# One Tokenize call stays well under the embedder's max_batch_texts (default 256)
# and the gRPC message limit.
_COUNT_BATCH_TEXTS = 128
_COUNT_BATCH_CHARS = 1 << 20
_CHUNK_FIELDS = frozenset(f.name for f in fields(Chunk))
# A kept property is a keyword in the payload index, not text to search.
_MAX_PROPERTY_CHARS = 1_000
# Formats whose bytes are their text (no markup or compression to discount).
_PLAIN_FORMATS = frozenset({"markdown", "text", "rst"})
_BYTES_PER_TOKEN_BOUND = 8


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
    access: tuple[str, ...] = ()
    """Who may see it (``access.parse_access``); empty = the front matter's
    ``access:`` list, else the collection's default."""


@dataclass(frozen=True)
class ChunkingPolicy:
    min_tokens: int = 300
    max_tokens: int = 800
    overlap_tokens: int = 50
    max_document_bytes: int = 20 * 1024 * 1024
    max_document_tokens: int = 500_000
    """Embedding tokens one document may cost, counted per chunk as ``max_tokens`` (the
    most the embedder reads of one) or its characters if fewer: past it the document
    is refused with the reason, before anything is embedded."""


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


async def _prepare_here(
    doc: DocumentInput,
    fmt: str,
    filename: str,
    policy: ChunkingPolicy,
    count_tokens: BatchTokenCounter | None,
) -> tuple[ParsedDocument, list[TextChunk]]:
    """Parses and chunks in this process's worker threads (no budget: see ParseSandbox).
    Raises InvalidInput for a refused document or any parser failure."""
    try:
        # Parsing a large HTML page or PDF takes a while: keep the event loop serving.
        parsed = await asyncio.to_thread(
            parse, doc.content, fmt, title=doc.title, filename=filename
        )
    except InvalidInput:
        raise
    except RecursionError:
        raise InvalidInput("the document nests too deeply to parse (RecursionError)") from None
    except Exception as error:  # a parser bug fails this document, not the batch
        raise InvalidInput(f"the document could not be parsed ({type(error).__name__})") from None
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
            count_tokens=count_tokens,
            summary=parsed.summary,
            markdown=parsed.markdown,
            min_tokens=policy.min_tokens,
            max_tokens=policy.max_tokens,
            overlap_tokens=policy.overlap_tokens,
        )
    return parsed, pieces


async def prepare_chunks(
    doc: DocumentInput,
    policy: ChunkingPolicy,
    *,
    count_tokens: BatchTokenCounter | None = None,
    sandbox: ParseSandbox | None = None,
    keep_properties: Collection[str] = (),
) -> list[Chunk]:
    """The chunks of ``doc``; raises InvalidInput with a reason for the ingest report.

    The document's front matter or properties (``ParsedDocument.front_matter``) named
    in ``keep_properties`` (the collection's filterable fields) are stored as chunk
    metadata, so searches can filter on them; ``doc.metadata`` wins over them.

    ``count_tokens`` sizes chunks in the embedding model's tokens (e.g.
    ``EmbedderClient.count_tokens``; its errors propagate); without it a word-based
    estimate is used. With ``sandbox`` (the service's) parsing and chunking run in a
    worker process under a time and memory budget; without it, in this process.
    """
    if not doc.source_id.strip():
        raise InvalidInput("source_id must not be empty")
    if doc.url and not is_web_url(doc.url):
        raise InvalidInput("url must be an absolute http:// or https:// URL")
    if len(doc.content) > policy.max_document_bytes:
        raise InvalidInput(
            f"the document is {len(doc.content)} bytes; the limit is {policy.max_document_bytes}"
        )
    fmt = guess_format(doc.format, doc.filename)
    # Plain text whose size alone exceeds the token cap is refused before it is parsed
    # and counted: counting an 8 MB table's tokens kept the embedder busy for minutes.
    # Prose averages 4-5 bytes a WordPiece token; a text averaging over
    # _BYTES_PER_TOKEN_BOUND is rare (long base64 or URLs tokenize into many tokens).
    if (
        fmt in _PLAIN_FORMATS
        and len(doc.content) > policy.max_document_tokens * _BYTES_PER_TOKEN_BOUND
    ):
        raise InvalidInput(
            f"the document is {len(doc.content)} bytes of text, more than "
            f"{policy.max_document_tokens} embedding tokens at {_BYTES_PER_TOKEN_BOUND} bytes "
            "a token; the limit is max_document_tokens"
        )
    filename = doc.filename or doc.source_id
    counter = _in_batches(count_tokens) if count_tokens is not None else None
    parsed: ParsedDocument
    pieces: list[TextChunk]
    if sandbox is not None:
        parsed, pieces = await sandbox.prepare(
            doc.content,
            fmt,
            title=doc.title,
            filename=filename,
            min_tokens=policy.min_tokens,
            max_tokens=policy.max_tokens,
            overlap_tokens=policy.overlap_tokens,
            count_tokens=counter,
        )
    else:
        parsed, pieces = await _prepare_here(doc, fmt, filename, policy, counter)
    if not pieces:
        raise InvalidInput("the document has no text outside its headings")
    # the parse budget bounds parsing and chunking; this bounds the embedding after it
    # (an 8 MB Markdown table is ~30k chunks: minutes of the embedder)
    # (a token is at least one character, plus the two special ones)
    cost = sum(min(policy.max_tokens, len(p.text) + 2) for p in pieces)
    if cost > policy.max_document_tokens:
        raise InvalidInput(
            f"the document is {len(pieces)} chunks of up to {policy.max_tokens} tokens "
            f"(up to {cost} embedding tokens); the limit is {policy.max_document_tokens} "
            "per document (max_document_tokens)"
        )
    # A URL the document declares (front matter, canonical link) is kept only when a
    # citation can safely link to it: no javascript:, data: or relative links.
    url = doc.url or (parsed.url if is_web_url(parsed.url) else "")
    metadata = _kept_properties(parsed.front_matter, keep_properties) | dict(doc.metadata)
    declared = doc.access or tuple(parsed.front_matter.get("access", "").split(","))
    access = parse_access(declared, "the document's access list")
    now = time.time()
    # the spans are a function of every chunk's text and index, which the chunk ids and
    # hashes already cover: they stay out of the hash (see _content_hash)
    spans = chunk_ranges([p.text for p in pieces])
    return [
        Chunk(
            chunk_id=str(uuid.uuid5(_CHUNK_NAMESPACE, f"{doc.source_id}\x00{p.index}\x00{h}")),
            source_id=doc.source_id,
            text=p.text,
            title=parsed.title,
            heading_path=p.heading_path,
            chunk_index=p.index,
            url=url,
            doc_type=doc.doc_type or parsed.doc_type,
            content_hash=h,
            metadata=dict(metadata),
            created_at=now,
            access=access,
            doc_span=span,
        )
        for p, span in zip(pieces, spans, strict=True)
        for h in [
            _content_hash(p, parsed.title, doc, url, parsed.doc_type, metadata, policy, access)
        ]
    ]


def _kept_properties(properties: dict[str, str], keep: Collection[str]) -> dict[str, str]:
    """The properties named in ``keep``, less the chunk's own fields (a front-matter
    ``title`` is the chunk's title already, not metadata)."""
    wanted = set(keep) - _CHUNK_FIELDS
    return {
        key: value[:_MAX_PROPERTY_CHARS]
        for key, value in properties.items()
        if key in wanted and value.strip()
    }


def _content_hash(
    piece: TextChunk,
    title: str,
    doc: DocumentInput,
    parsed_url: str,
    parsed_doc_type: str,
    metadata: dict[str, str],
    policy: ChunkingPolicy,
    access: tuple[str, ...] = (),
) -> str:
    """SHA-256 over everything stored with a chunk and the chunking settings that made
    it: a re-ingest that changes only a title, URL, type, metadata, access list or the
    settings is seen as a change and rewrites the source. Each field is
    length-prefixed, so no two different records hash the same text. The chunk's
    range in its document (``Chunk.doc_span``) is left out: it follows from the texts
    and indexes of the source's chunks, which the ids and hashes compared on re-ingest
    already cover, and leaving it out keeps sources stored before it existed
    unchanged (their chunks have no span until the source changes)."""
    fields = [
        piece.text,
        title,
        *piece.heading_path,
        doc.url or parsed_url,
        doc.doc_type or parsed_doc_type,
        *(part for item in sorted(metadata.items()) for part in item),
        f"{policy.min_tokens}/{policy.max_tokens}/{policy.overlap_tokens}",
        # only when set, so the hashes of documents without one stay as they were
        *(("access", *access) if access else ()),
    ]
    digest = hashlib.sha256()
    digest.update(f"{len(piece.heading_path)}/{len(metadata)}".encode())
    for value in fields:
        data = value.encode()
        digest.update(f"{len(data)}:".encode())
        digest.update(data)
    return digest.hexdigest()
