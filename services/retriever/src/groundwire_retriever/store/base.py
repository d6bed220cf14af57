"""The storage contract the retriever's logic is written against.

Implementations: ``EdgeStore`` (Qdrant's engine embedded in-process). A store for a
Qdrant server (qdrant-client) implements the same protocol.

Methods are synchronous and blocking; the gRPC layer calls them through
``asyncio.to_thread``. Implementations must allow concurrent ``search`` calls from
several threads and serialise writes themselves. Errors are raised from
``groundwire_core.errors`` with messages written for the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from groundwire_retriever.domain import (
    Chunk,
    ChunkVectors,
    CollectionSpec,
    CollectionStats,
    SearchQuery,
    SearchResult,
)


class VectorStore(Protocol):
    """Collections of chunks with dense, learned-sparse and BM25 retrieval paths."""

    def open(self) -> None:
        """Open the backend and load existing collections.

        Constructing a store must not touch disk or network; this does.
        """
        ...

    def close(self) -> None:
        """Persist pending writes and release the backend. Idempotent."""
        ...

    def create_collection(self, spec: CollectionSpec) -> None:
        """Create an empty collection. ``AlreadyExists`` if the name is taken,
        ``InvalidInput`` for a bad name or spec."""
        ...

    def list_collections(self) -> list[CollectionSpec]:
        """Every collection's spec, sorted by name."""
        ...

    def describe(self, name: str) -> CollectionStats:
        """A collection's spec and size. ``NotFound`` if it does not exist."""
        ...

    def drop_collection(self, name: str) -> None:
        """Delete a collection and its data. ``NotFound`` if it does not exist."""
        ...

    def upsert(self, name: str, chunks: Sequence[tuple[Chunk, ChunkVectors]]) -> None:
        """Insert or replace chunks (by ``chunk_id``) with their vectors.

        ``InvalidInput`` for a dense vector of the wrong size, a malformed chunk id or
        sparse vector. Visible to searches once this returns.
        """
        ...

    def delete_by_source(self, name: str, source_id: str) -> int:
        """Remove every chunk of one source; returns how many were removed."""
        ...

    def delete_chunks(self, name: str, chunk_ids: Sequence[str]) -> int:
        """Remove the chunks with these ids (missing ids are ignored); returns how
        many ids were asked for."""
        ...

    def source_hashes(self, name: str, source_id: str) -> dict[str, str]:
        """``chunk_id -> content_hash`` of the chunks stored for one source, so that
        a re-ingest can skip unchanged chunks and delete vanished ones."""
        ...

    def search(self, name: str, query: SearchQuery) -> SearchResult:
        """Run each requested path (filters applied inside each), fuse, and return the
        top ``query.limit`` hits with a report per requested path."""
        ...
