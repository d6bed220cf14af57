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
    default_access: tuple[str, ...] = ("public",)
    """The access list of a document ingested without one (``public``, ``user:<id>``,
    ``group:<name>``); see ``access``."""
    restricted: bool = False
    """A caller without an identity (no tenant, no end user) is refused outright
    (PERMISSION_DENIED) instead of seeing the public documents only."""
    tenant: str = "public"
    """The tenant that owns it (the creating key's); the gateway shows a collection to
    that tenant's keys only. Specs stored before tenants read as ``public``."""
    multi_vector_dims: int = 0
    """Width of the stored ColBERT multi-vectors (BGE-M3), kept for late interaction
    (``late_interaction.py``); 0 = the model has none and none are stored."""


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
    access: tuple[str, ...] = ()
    """Who may see it (``public``, ``user:<id>``, ``group:<name>``); empty = the
    collection's ``default_access`` when it is written. Write-only: reads enforce it
    and leave it empty."""
    doc_span: tuple[int, int] | None = None
    """[start, end) of ``text`` in its document's text (the source's chunk texts
    joined, see ``groundwire_core.document_text``); None for chunks stored before
    ingest recorded it."""


@dataclass(frozen=True)
class ChunkVectors:
    """The embedder's vectors for one chunk (BM25 is computed by the store)."""

    dense: tuple[float, ...] | None = None
    sparse: SparseVec | None = None
    multi: tuple[tuple[float, ...], ...] | None = None
    """One ColBERT vector per token, for collections with ``multi_vector_dims``."""


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
    access: tuple[str, ...] | None = None
    """The caller's access entries: only chunks whose access list shares one are
    seen, on every path and in every count; None = no filter (the retriever's own
    callers and tenant admins). Set by the service from the caller's identity."""
    group_by_source: bool = False
    """One hit per source (document): its best chunk, with the number of its chunks
    that matched and their headings (``grouping``); ``limit`` counts sources."""
    multi: tuple[tuple[float, ...], ...] | None = None
    """The query's ColBERT vectors (one per token), for late interaction."""
    late_interaction_depth: int = 0
    """After fusion, rescore the top this-many candidates by MaxSim between ``multi``
    and their stored multi-vectors (``late_interaction``); 0 = off. Skipped, with the
    reason in ``SearchResult.late_interaction``, when either side has none."""


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
    matching_chunks: int = 0
    """With ``group_by_source``: how many of the source's chunks matched (this one
    included); 0 for a chunk-level search."""
    other_headings: tuple[str, ...] = ()
    """With ``group_by_source``: the headings (" > "-joined paths) of the source's
    other matching chunks, best first, each once."""


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
    late_interaction: LateInteractionReport | None = None
    """What the MaxSim rescoring did; None when the query did not ask for it."""


@dataclass(frozen=True)
class LateInteractionReport:
    """The MaxSim rescoring of the fused candidates: how many it reordered and its
    time, or why it was skipped (the fused order then stands)."""

    rescored: int
    ms: float
    skipped: bool = False
    reason: str = ""


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
