"""The retriever's domain types: collections, chunks, queries and results.

These are plain frozen dataclasses shared by the storage layer (``store``), the
ingest logic and the gRPC layer, which converts them to and from protobuf messages.
Nothing here touches a backend.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class SearchPath(enum.Enum):
    """One retrieval path of a hybrid search."""

    DENSE = "dense"
    """Nearest neighbours of the embedder's dense vector (cosine)."""
    SPARSE = "sparse"
    """The embedder's learned lexical weights (e.g. BGE-M3's sparse head)."""
    BM25 = "bm25"
    """Classic BM25 over the chunk text (stemmed, stop words removed)."""


class Fusion(enum.Enum):
    """How the ranked lists of several paths are merged into one.

    Each member has a function in ``fusion.METHODS`` and a wire value of the same name
    (``FUSION_<NAME>``) in retriever.proto; docs/recipes/fusion.md adds one."""

    RRF = "rrf"
    """Reciprocal rank fusion: ``sum(1 / (k + rank))`` over the paths."""
    WEIGHTED = "weighted"
    """``sum(weight * min-max-normalised path score)`` over the paths."""


@dataclass(frozen=True)
class SparseVec:
    """A sparse vector: parallel ``indices`` and ``values``."""

    indices: tuple[int, ...]
    values: tuple[float, ...]


@dataclass(frozen=True)
class CollectionSpec:
    """What a collection holds and how it is indexed; fixed when it is created."""

    name: str
    dense_dims: int
    learned_sparse: bool = False
    bm25: bool = True
    filterable: tuple[str, ...] = ("source_id", "doc_type", "title")
    """Fields a search may filter on (keyword payload indexes). Chunk fields
    (``source_id``, ``doc_type``, ``title``, ``url``, ...) or user metadata keys."""
    embedder_model: str = ""
    """Which embedder model filled it (from the embedder's Info)."""


@dataclass(frozen=True)
class CollectionStats:
    """A collection's spec and its current size."""

    spec: CollectionSpec
    chunks: int
    sources: int


@dataclass(frozen=True)
class Chunk:
    """One retrievable piece of a source document, with everything shown to users."""

    chunk_id: str
    """A UUID string. Deterministic ids (uuid5 over source_id, chunk_index and
    content_hash) are the ingest caller's job."""
    source_id: str
    text: str
    title: str = ""
    heading_path: tuple[str, ...] = ()
    chunk_index: int = 0
    url: str = ""
    doc_type: str = ""
    content_hash: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    created_at: float = 0.0
    """Unix seconds."""


@dataclass(frozen=True)
class ChunkVectors:
    """The embedder's vectors for one chunk (BM25 is computed by the store)."""

    dense: tuple[float, ...] | None = None
    sparse: SparseVec | None = None


@dataclass(frozen=True)
class FieldFilter:
    """Keep chunks whose ``field`` (a filterable field) equals any of ``any_of``."""

    field: str
    any_of: tuple[str, ...]


@dataclass(frozen=True)
class SearchQuery:
    """A hybrid search request against one collection."""

    text: str = ""
    """The query text, for the BM25 path."""
    dense: tuple[float, ...] | None = None
    sparse: SparseVec | None = None
    paths: frozenset[SearchPath] = frozenset(SearchPath)
    path_limit: int = 100
    """How many candidates each path contributes to the fusion."""
    fusion: Fusion = Fusion.RRF
    rrf_k: int = 60
    weights: Mapping[SearchPath, float] = field(default_factory=dict)
    """Per-path weights for ``Fusion.WEIGHTED``; a missing path weighs 1.0."""
    filters: tuple[FieldFilter, ...] = ()
    """All filters must hold (AND); each is a match-any on its field."""
    dense_floor: float = 0.3
    """Cosine similarity below which the dense path drops a candidate."""
    limit: int = 50
    drop_off: float | None = None
    """Dynamic top-k: after fusion, cut the list where a score falls below
    ``drop_off`` x the top score (0..1); None keeps all ``limit`` hits."""
    embedder_model: str = ""
    """The model that made ``dense`` and ``sparse``; "" = not checked against the
    collection's."""


@dataclass(frozen=True)
class Hit:
    """One fused result."""

    chunk: Chunk
    score: float
    """The fused score (RRF or weighted); higher is better."""
    path_ranks: Mapping[SearchPath, int]
    """1-based rank in each path that found this chunk."""
    path_scores: Mapping[SearchPath, float]
    """Raw score in each path that found this chunk."""


@dataclass(frozen=True)
class PathReport:
    """What one requested path did: its time and hit count, or why it was skipped."""

    path: SearchPath
    ms: float
    hits: int
    skipped: bool = False
    reason: str = ""


@dataclass(frozen=True)
class SearchResult:
    """Fused hits, best first, and one report per requested path."""

    hits: tuple[Hit, ...]
    paths: tuple[PathReport, ...]


@dataclass(frozen=True)
class SourceSummary:
    """One stored source as readers see it (``ListSources``)."""

    source_id: str
    title: str
    url: str
    doc_type: str
    chunks: int
    content_hash: str
    """SHA-256 over the chunks' content hashes in chunk order."""
    ingested_at: float
    """Unix seconds: the latest ``created_at`` of its chunks."""


@dataclass(frozen=True)
class SourcePage:
    """A page of sources sorted by id; ``next_page_token`` is "" on the last page."""

    sources: tuple[SourceSummary, ...]
    next_page_token: str
    total: int


@dataclass(frozen=True)
class SourceChunks:
    """Some of a source's chunks in document order, and how many it has in all."""

    chunks: tuple[Chunk, ...]
    total: int
