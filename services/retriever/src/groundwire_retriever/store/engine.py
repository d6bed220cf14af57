"""The physical layer under ``VersionedStore``: one Qdrant backend's operations.

An engine stores *generations*: physical collections (an EdgeShard folder, or a
Qdrant collection) with the same schema, identified by opaque string ids. One
generation per collection name is *current*; switching it is atomic and durable
(a JSON pointer written by rename, or a Qdrant alias swap). Everything about
revisions, views and visibility lives in ``versioned``; engines only run what they
are told, and raise ``groundwire_core.errors`` (``BackendFailure`` or
``Unavailable``, naming their dependency) when the backend fails.

Methods may be called from several threads at once; ``VersionedStore`` never drops
a generation while another call uses it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from groundwire_retriever.domain import CollectionSpec, SparseVec


@dataclass(frozen=True)
class Where:
    """A filter: every ``must`` (key, any-of values) holds and no ``must_not`` does.

    Keys are payload keys (``payload_key`` already applied); all values are keywords.
    """

    must: tuple[tuple[str, tuple[str, ...]], ...] = ()
    must_not: tuple[tuple[str, tuple[str, ...]], ...] = ()
    must_or_missing: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(key, any-of values) that also hold for a point without the key: how chunks
    written before a field existed (the access list) keep their old meaning."""

    @property
    def empty(self) -> bool:
        return not self.must and not self.must_not and not self.must_or_missing

    def also(self, key: str, values: Sequence[str]) -> Where:
        return Where((*self.must, (key, tuple(values))), self.must_not, self.must_or_missing)

    def also_or_missing(self, key: str, values: Sequence[str]) -> Where:
        return Where(self.must, self.must_not, (*self.must_or_missing, (key, tuple(values))))


@dataclass(frozen=True)
class PointData:
    """One point to write: id, named vectors (missing ones absent) and payload."""

    id: str
    dense: list[float]
    sparse: SparseVec | None
    bm25: SparseVec | None
    payload: Mapping[str, Any]
    multi: list[list[float]] | None = None


@dataclass(frozen=True)
class StoredCollection:
    """A collection found by ``Engine.open``: its current generation and the metadata
    last saved for it."""

    generation: str
    meta: Mapping[str, Any]


class Engine(Protocol):
    """Generations of collections on one backend (see the module docstring)."""

    @property
    def kind(self) -> str:
        """``edge`` or ``qdrant``."""
        ...

    @property
    def dependency(self) -> str:
        """The name errors carry: ``qdrant-edge`` or ``qdrant``."""
        ...

    @property
    def location(self) -> str:
        """Where the data lives (a folder or a URL), for Info."""
        ...

    def open(self) -> dict[str, StoredCollection]:
        """Connect, remove what a crash left behind (generations no collection points
        to, half-created collections) and return every collection by name."""
        ...

    def close(self) -> None:
        """Flush and release the backend. Idempotent."""
        ...

    def ping(self) -> None:
        """Unavailable unless the backend answers now: one cheap call, not logged (it
        runs every few seconds while the backend may be away)."""
        ...

    def storage_warning(self) -> str:
        """Why writes are refused now (the embedded engine's disk under its floor),
        for health; empty while they are accepted. Cheap, never raises."""
        ...

    def create(self, name: str, spec: CollectionSpec, meta: Mapping[str, Any]) -> str:
        """A new, empty generation for ``name`` with the spec's vectors and keyword
        indexes; not current. ``name`` may be new (its first generation) or existing
        (a re-index)."""
        ...

    def make_current(self, name: str, generation: str, meta: Mapping[str, Any]) -> None:
        """Point ``name`` at ``generation`` with ``meta``, atomically and durably.
        ``AlreadyExists`` when the name is taken by something this engine does not own."""
        ...

    def save_meta(
        self, name: str, generation: str, meta: Mapping[str, Any], *, durable: bool
    ) -> None:
        """Persist a generation's metadata (the revision state). ``durable=False``
        allows skipping an fsync: losing that write only repeats a cleanup."""
        ...

    def drop_generation(self, name: str, generation: str) -> None:
        """Delete one generation that is not current."""
        ...

    def drop(self, name: str, generations: Sequence[str]) -> None:
        """Delete the collection: its pointer and these generations."""
        ...

    def upsert(self, generation: str, points: Sequence[PointData]) -> None: ...

    def delete(self, generation: str, where: Where) -> None: ...

    def count(self, generation: str, where: Where) -> int: ...

    def facet(self, generation: str, key: str, where: Where, limit: int) -> dict[str, int]:
        """Distinct values of a keyword payload key among matching points, with counts
        (values with a zero count left out)."""
        ...

    def scroll(
        self, generation: str, where: Where, fields: Sequence[str]
    ) -> list[tuple[str, dict[str, Any]]]:
        """Every matching point's id and the payload ``fields``."""
        ...

    def query(
        self,
        generation: str,
        using: str,
        vector: list[float] | SparseVec,
        *,
        limit: int,
        where: Where,
        score_threshold: float | None,
    ) -> list[tuple[Hashable, float]]:
        """Nearest points on the named vector, best first, as ``(id, score)``. The id
        is the engine's own object (hashable, equal to the same point's id in any
        other answer): turning hundreds of candidate ids into strings per search is
        measurable, so only ``retrieve``'s callers do it, for the hits they keep."""
        ...

    def retrieve(
        self, generation: str, ids: Sequence[Hashable]
    ) -> dict[Hashable, Mapping[str, Any]]:
        """Payloads by the ids ``query`` gave; missing ids are left out."""
        ...

    def multi_vectors(
        self, generation: str, ids: Sequence[Hashable]
    ) -> dict[Hashable, list[list[float]]]:
        """The stored ColBERT multi-vectors (``MULTI_VECTOR``) of the ids ``query``
        gave; ids without one are left out (late interaction)."""
        ...
