"""How chunks and collections are laid out in an engine: vector names, point ids,
payload keys and the persisted spec document.

Nothing here talks to a backend. Both engines (``EdgeStore`` on qdrant-edge and
``QdrantServerStore`` on qdrant-client) build their points and read their results
through these functions, so they store and return the same things.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from groundwire_retriever.domain import Chunk, CollectionSpec, SearchPath
from groundwire_retriever.store.bm25 import Bm25Settings

__all__ = [
    "ACCESS_KEY",
    "BM25_VECTOR",
    "CHUNK_FIELDS",
    "CHUNK_KEYWORD_FIELDS",
    "DENSE_VECTOR",
    "DOC_SPAN_KEYS",
    "MULTI_VECTOR",
    "REVISION_KEY",
    "SPARSE_VECTOR",
    "SPEC_FORMAT",
    "VECTOR_NAMES",
    "chunk_from_payload",
    "chunk_payload",
    "indexed_fields",
    "payload_key",
    "point_id",
    "spec_from_json",
    "spec_to_json",
]

DENSE_VECTOR = "dense"
SPARSE_VECTOR = "sparse"
BM25_VECTOR = "bm25"
MULTI_VECTOR = "colbert"
"""The ColBERT multi-vectors (MaxSim), read back for late interaction only."""
VECTOR_NAMES: Mapping[SearchPath, str] = {
    SearchPath.DENSE: DENSE_VECTOR,
    SearchPath.SPARSE: SPARSE_VECTOR,
    SearchPath.BM25: BM25_VECTOR,
}

REVISION_KEY = "revision"
"""Payload key of the per-source revision a point belongs to (see ``versioned``)."""

ACCESS_KEY = "access"
"""Payload key of a chunk's access list: a keyword array with its own payload index,
so the mandatory access filter rides the index on every path."""

DOC_SPAN_KEYS = ("doc_start", "doc_end")
"""Payload keys of a chunk's [start, end) in its document text (``Chunk.doc_span``)."""

# Chunk fields stored at the top level of the payload that can carry a keyword index.
# Any other filterable name is a user metadata key, stored under ``metadata.<key>``.
CHUNK_KEYWORD_FIELDS = frozenset(
    {"chunk_id", "source_id", "title", "heading_path", "url", "doc_type", "content_hash"}
)

_POINT_NAMESPACE = uuid.UUID("0b7d9a52-3f6e-4c1a-9d2b-8e5f4a6c7d10")
SPEC_FORMAT = 2


def payload_key(field_name: str) -> str:
    """Where a filterable field lives in the payload."""
    if field_name in CHUNK_KEYWORD_FIELDS:
        return field_name
    return f"metadata.{field_name}"


def indexed_fields(spec: CollectionSpec) -> list[str]:
    """Payload keys with a keyword index: the revision and source id (every write and
    cleanup filters on them), the access list (every caller's search does), then the
    collection's filterable fields."""
    keys = [REVISION_KEY, "source_id", ACCESS_KEY]
    keys.extend(payload_key(f) for f in spec.filterable if f != "source_id")
    return keys


def point_id(chunk_id: str, revision: str) -> str:
    """The engine id of one chunk in one revision: the same chunk written again by a
    re-ingest is a different point until the switch, so old and new can coexist."""
    return str(uuid.uuid5(_POINT_NAMESPACE, f"{chunk_id}/{revision}"))


def chunk_payload(chunk: Chunk, chunk_id: str) -> dict[str, Any]:
    # the span only when known: chunks written without one read back as None
    span = {} if chunk.doc_span is None else dict(zip(DOC_SPAN_KEYS, chunk.doc_span, strict=True))
    return span | {
        "chunk_id": chunk_id,
        "source_id": chunk.source_id,
        "text": chunk.text,
        "title": chunk.title,
        "heading_path": list(chunk.heading_path),
        "chunk_index": chunk.chunk_index,
        "url": chunk.url,
        "doc_type": chunk.doc_type,
        "content_hash": chunk.content_hash,
        "metadata": dict(chunk.metadata),
        "created_at": chunk.created_at,
        ACCESS_KEY: list(chunk.access),
    }


CHUNK_FIELDS = (
    "chunk_id",
    "source_id",
    "text",
    "title",
    "heading_path",
    "chunk_index",
    "url",
    "doc_type",
    "content_hash",
    "metadata",
    "created_at",
    "doc_start",
    "doc_end",
)
"""The payload keys ``chunk_payload`` writes that a read of whole chunks asks for (the
access list is enforced by the store, never returned)."""


def chunk_from_payload(payload: Mapping[str, Any] | None) -> Chunk:
    p = payload or {}
    metadata = p.get("metadata") or {}
    return Chunk(
        chunk_id=str(p.get("chunk_id", "")),
        source_id=str(p.get("source_id", "")),
        text=str(p.get("text", "")),
        title=str(p.get("title", "")),
        heading_path=tuple(str(h) for h in p.get("heading_path") or ()),
        chunk_index=int(p.get("chunk_index", 0)),
        url=str(p.get("url", "")),
        doc_type=str(p.get("doc_type", "")),
        content_hash=str(p.get("content_hash", "")),
        metadata={str(k): str(v) for k, v in metadata.items()},
        created_at=float(p.get("created_at", 0.0)),
        doc_span=_doc_span(p),
    )


def _doc_span(payload: Mapping[str, Any]) -> tuple[int, int] | None:
    """The chunk's range in its document text; None when it was stored without one."""
    start, end = (payload.get(key) for key in DOC_SPAN_KEYS)
    if start is None or end is None:
        return None
    return int(start), int(end)


def spec_to_json(spec: CollectionSpec, bm25: Bm25Settings) -> dict[str, Any]:
    spec_dict = asdict(spec)
    spec_dict["filterable"] = list(spec.filterable)
    spec_dict["default_access"] = list(spec.default_access)
    return {"spec": spec_dict, "bm25": asdict(bm25)}


def spec_from_json(doc: Mapping[str, Any]) -> tuple[CollectionSpec, Bm25Settings]:
    """Raises KeyError, TypeError or ValueError for a malformed document."""
    s = doc["spec"]
    spec = CollectionSpec(
        name=str(s["name"]),
        dense_dims=int(s["dense_dims"]),
        learned_sparse=bool(s.get("learned_sparse", False)),
        bm25=bool(s.get("bm25", True)),
        filterable=tuple(str(f) for f in s.get("filterable", ())),
        embedder_model=str(s.get("embedder_model", "")),
        default_access=tuple(str(a) for a in s.get("default_access", ("public",))),
        restricted=bool(s.get("restricted", False)),
        tenant=str(s.get("tenant", "public")),
        multi_vector_dims=int(s.get("multi_vector_dims", 0)),
    )
    b = doc.get("bm25") or {}
    defaults = Bm25Settings()
    settings = Bm25Settings(
        k=float(b.get("k", defaults.k)),
        b=float(b.get("b", defaults.b)),
        avg_len=float(b.get("avg_len", defaults.avg_len)),
    )
    return spec, settings
