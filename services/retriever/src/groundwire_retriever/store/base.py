"""The storage contract the retriever's logic is written against.

Implementations: ``EdgeStore`` (Qdrant's engine embedded in-process, qdrant-edge) and
``QdrantServerStore`` (a Qdrant server through qdrant-client, or its local mode). Both
are ``VersionedStore`` over an engine, so they share validation, visibility and fusion.

Methods are synchronous and blocking; the gRPC layer calls them through
``asyncio.to_thread``. Implementations allow concurrent calls from several threads and
serialise writes to one collection themselves. Errors are raised from
``groundwire_core.errors`` with messages written for the caller.

Atomic replacement of a source is two calls: ``stage_source`` writes the new chunks
where no reader sees them, ``publish_source`` switches readers from the source's old
chunks to the new ones in one step. A full re-index writes into a new generation
(``begin_reindex`` ... ``commit_reindex``) that replaces the whole collection at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from groundwire_retriever.domain import (
    Chunk,
    ChunkVectors,
    CollectionSpec,
    CollectionStats,
    SearchQuery,
    SearchResult,
    SourceChunks,
    SourcePage,
)


@dataclass(frozen=True)
class StagedSource:
    """Chunks written for one source that readers do not see yet."""

    collection: str
    source_id: str
    generation: str
    revision: str
    chunks: int


class VectorStore(Protocol):
    """Collections of chunks with dense, learned-sparse and BM25 retrieval paths."""

    @property
    def engine(self) -> str:
        """``edge`` or ``qdrant``."""
        ...

    @property
    def location(self) -> str:
        """Where the data lives: a folder or a server URL."""
        ...

    def open(self) -> None:
        """Open the backend, load existing collections and finish or undo what a
        crash interrupted. Constructing a store must not touch disk or network; this
        does."""
        ...

    def close(self) -> None:
        """Persist pending writes and release the backend. Idempotent."""
        ...

    def ping(self) -> None:
        """Unavailable unless the backend answers now (a cheap call; for health)."""
        ...

    def storage_warning(self) -> str:
        """Why writes are refused now, naming the data path (the embedded engine's disk
        under its floor: every write raises ``InsufficientStorage`` meanwhile, searches
        go on); empty while writes are accepted. Cheap; for health and Info."""
        ...

    def create_collection(self, spec: CollectionSpec) -> None:
        """Create an empty collection. ``AlreadyExists`` if the name is taken,
        ``InvalidInput`` for a bad name or spec."""
        ...

    def list_collections(self) -> list[CollectionSpec]:
        """Every collection's spec, sorted by name."""
        ...

    def describe(self, name: str, *, access: Sequence[str] | None = None) -> CollectionStats:
        """A collection's spec and size (what readers see; with ``access``, what a
        caller holding those access entries sees). ``NotFound`` if missing."""
        ...

    def drop_collection(self, name: str) -> None:
        """Delete a collection and its data. ``NotFound`` if it does not exist."""
        ...

    def upsert(self, name: str, chunks: Sequence[tuple[Chunk, ChunkVectors]]) -> None:
        """Insert or replace ready-made chunks (by ``chunk_id``) in their sources'
        current revisions, visible as they land (not atomic: use ``stage_source`` and
        ``publish_source`` to replace a source).

        ``InvalidInput`` for a dense vector of the wrong size, a malformed chunk id or
        sparse vector; nothing is written then.
        """
        ...

    def stage_source(
        self,
        name: str,
        source_id: str,
        chunks: Sequence[tuple[Chunk, ChunkVectors]],
        *,
        generation: str | None = None,
    ) -> StagedSource:
        """Write a source's complete new chunk set, invisible to readers.

        ``generation`` targets a re-index under construction instead of the current
        generation. ``InvalidInput`` as for ``upsert``, or for a chunk of another
        source; nothing is written then.
        """
        ...

    def publish_source(self, staged: StagedSource) -> None:
        """Switch readers to the staged chunks in one step and delete the source's
        previous chunks. ``Unavailable`` if the collection was re-indexed meanwhile."""
        ...

    def discard_source(self, staged: StagedSource) -> None:
        """Delete staged chunks that will not be published. Never raises for a
        generation that is gone."""
        ...

    def delete_by_source(self, name: str, source_id: str) -> int:
        """Remove every chunk of one source at once; returns how many were removed."""
        ...

    def source_hashes(self, name: str, source_id: str) -> dict[str, str]:
        """``chunk_id -> content_hash`` of the chunks readers see for one source, so a
        re-ingest can tell an unchanged document."""
        ...

    def list_sources(
        self,
        name: str,
        *,
        page_token: str = "",
        limit: int = 100,
        access: Sequence[str] | None = None,
    ) -> SourcePage:
        """The sources readers see (with ``access``: that such a caller sees), sorted
        by id, ``limit`` (1..1000) after the source id ``page_token``, with each one's
        chunk count and content hash. Counts and reads every chunk of the page's
        sources: an admin call. ``InvalidInput`` for a bad limit, ``NotFound`` for a
        missing collection."""
        ...

    def read_source(
        self,
        name: str,
        source_id: str,
        *,
        offset: int = 0,
        limit: int = 1000,
        access: Sequence[str] | None = None,
    ) -> SourceChunks:
        """A source's chunks as readers see them (with ``access``: NotFound unless such
        a caller may see it), in document order (``chunk_index``),
        from ``offset``, at most ``limit`` (1..10000). ``NotFound`` when the collection
        or the source does not exist, ``InvalidInput`` for a bad offset or limit."""
        ...

    def begin_reindex(self, spec: CollectionSpec) -> str:
        """Start a new generation of collection ``spec.name`` (which must exist) with
        ``spec``; returns its id for ``stage_source``. Readers keep the current one.
        ``AlreadyExists`` while another re-index of the collection runs."""
        ...

    def commit_reindex(self, name: str, generation: str) -> None:
        """Switch readers to the new generation at once and delete the old one."""
        ...

    def abort_reindex(self, name: str, generation: str) -> None:
        """Delete an unfinished generation; readers never saw it. Never raises for a
        generation that is gone."""
        ...

    def optimize(self, name: str, *, in_place: bool = False) -> bool:
        """Build the collection's search indexes (HNSW, quantization) for what was
        written since the last time, blocking; True if there was anything to build.
        A no-op where the backend indexes in the background (a Qdrant server).
        ``in_place``: when nothing is being served yet (start-up), the embedded engine
        may build in this process instead of on a copy."""
        ...

    def search(self, name: str, query: SearchQuery) -> SearchResult:
        """Run each requested path (filters applied inside each), fuse, cut at
        ``query.drop_off``, and return the top ``query.limit`` hits with a report per
        requested path."""
        ...
