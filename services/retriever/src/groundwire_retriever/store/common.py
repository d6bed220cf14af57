"""What every store engine shares: validation, payload layout, BM25, point ids, fusion.

Nothing here talks to a backend. Both engines (``EdgeStore`` on qdrant-edge and
``QdrantServerStore`` on qdrant-client) build their points and read their results
through these functions, so they index and return the same things. BM25 vectors come
from qdrant-edge's standalone ``Bm25`` analyzer for both engines: Qdrant server's own
BM25 inference is not used, so identical text gives identical sparse vectors.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import qdrant_edge as qe

from groundwire_core.errors import InvalidInput
from groundwire_retriever.domain import (
    Chunk,
    CollectionSpec,
    Fusion,
    SearchPath,
    SearchQuery,
    SparseVec,
)

__all__ = [
    "BM25_VECTOR",
    "CHUNK_FIELDS",
    "CHUNK_KEYWORD_FIELDS",
    "COLLECTION_NAME_RE",
    "DENSE_VECTOR",
    "MAX_LIMIT",
    "PATH_ORDER",
    "REVISION_KEY",
    "SPARSE_VECTOR",
    "SPEC_FORMAT",
    "VECTOR_NAMES",
    "Bm25Settings",
    "FusedHit",
    "bm25_document_text",
    "canonical_id",
    "chunk_from_payload",
    "chunk_payload",
    "cut_drop_off",
    "dense_values",
    "fuse",
    "indexed_fields",
    "payload_key",
    "point_id",
    "sparse_values",
    "spec_from_json",
    "spec_to_json",
    "validate_collection_name",
    "validate_query",
    "validate_spec",
]

DENSE_VECTOR = "dense"
SPARSE_VECTOR = "sparse"
BM25_VECTOR = "bm25"
VECTOR_NAMES: Mapping[SearchPath, str] = {
    SearchPath.DENSE: DENSE_VECTOR,
    SearchPath.SPARSE: SPARSE_VECTOR,
    SearchPath.BM25: BM25_VECTOR,
}
PATH_ORDER = (SearchPath.DENSE, SearchPath.SPARSE, SearchPath.BM25)

REVISION_KEY = "revision"
"""Payload key of the per-source revision a point belongs to (see ``versioned``)."""

COLLECTION_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
FIELD_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

# Chunk fields stored at the top level of the payload that can carry a keyword index.
# Any other filterable name is a user metadata key, stored under ``metadata.<key>``.
CHUNK_KEYWORD_FIELDS = frozenset(
    {"chunk_id", "source_id", "title", "heading_path", "url", "doc_type", "content_hash"}
)
_NOT_FILTERABLE = frozenset({"text", "chunk_index", "created_at", "metadata", REVISION_KEY})

MAX_DENSE_DIMS = 65_536
MAX_LIMIT = 10_000
_SPARSE_INDEX_MAX = 2**32
_POINT_NAMESPACE = uuid.UUID("0b7d9a52-3f6e-4c1a-9d2b-8e5f4a6c7d10")
SPEC_FORMAT = 2


@dataclass(frozen=True)
class Bm25Settings:
    """BM25 document weighting; persisted per collection, fixed at creation.

    ``avg_len`` is the expected chunk length in tokens (after stop-word removal).
    """

    k: float = 1.2
    b: float = 0.75
    avg_len: float = 256.0

    def model(self) -> qe.Bm25:
        """The qdrant-edge BM25 model: English word tokenizer, lowercase, English stop
        words and Snowball stemmer (all explicit, not left to library defaults)."""
        return qe.Bm25(
            qe.Bm25Config(
                k=self.k,
                b=self.b,
                avg_len=self.avg_len,
                tokenizer=qe.TokenizerType.Word,
                language="english",
                lowercase=True,
                stopwords=qe.Language.English,
                stemmer=qe.SnowballParams(qe.SnowballLanguage.English),
            )
        )


# --------------------------------------------------------------------------- validation


def validate_collection_name(name: str) -> None:
    if not isinstance(name, str) or not COLLECTION_NAME_RE.fullmatch(name):
        raise InvalidInput(
            f"collection name {name!r} is not valid: use 1-64 characters, lowercase "
            "letters, digits, '_' or '-', starting with a letter or digit"
        )


def validate_spec(spec: CollectionSpec) -> None:
    validate_collection_name(spec.name)
    if isinstance(spec.dense_dims, bool) or not isinstance(spec.dense_dims, int):
        raise InvalidInput("dense_dims must be an integer")
    if not 1 <= spec.dense_dims <= MAX_DENSE_DIMS:
        raise InvalidInput(
            f"dense_dims must be between 1 and {MAX_DENSE_DIMS}, got {spec.dense_dims}"
        )
    seen: set[str] = set()
    for name in spec.filterable:
        if not isinstance(name, str) or not FIELD_NAME_RE.fullmatch(name):
            raise InvalidInput(
                f"filterable field {name!r} is not valid: use letters, digits and '_' "
                "(at most 64), not starting with a digit"
            )
        if name in _NOT_FILTERABLE:
            raise InvalidInput(
                f"field {name!r} cannot be filterable; filterable fields are keyword "
                f"chunk fields ({', '.join(sorted(CHUNK_KEYWORD_FIELDS))}) or metadata keys"
            )
        if name in seen:
            raise InvalidInput(f"filterable field {name!r} is listed twice")
        seen.add(name)


def validate_query(query: SearchQuery) -> None:
    """``InvalidInput`` for a query no engine can run."""
    if not query.paths:
        raise InvalidInput("a search needs at least one path (dense, sparse or bm25)")
    for label, value in (("limit", query.limit), ("path_limit", query.path_limit)):
        if not 1 <= value <= MAX_LIMIT:
            raise InvalidInput(f"{label} must be between 1 and {MAX_LIMIT}, got {value}")
    if query.rrf_k < 0:
        raise InvalidInput(f"rrf_k must not be negative, got {query.rrf_k}")
    for path, weight in query.weights.items():
        if not math.isfinite(weight) or weight < 0:
            raise InvalidInput(f"the weight of the {path.value} path must be a non-negative number")
    if not math.isfinite(query.dense_floor):
        raise InvalidInput("dense_floor must be a finite number")
    if query.drop_off is not None and not (
        math.isfinite(query.drop_off) and 0.0 <= query.drop_off <= 1.0
    ):
        raise InvalidInput(f"drop_off must be between 0 and 1, got {query.drop_off}")


def check_model(spec: CollectionSpec, model: str, what: str) -> None:
    """``InvalidInput`` when ``what`` (vectors) came from another embedder model than
    the one the collection was indexed with: vectors of two models are not comparable,
    and searching or storing them together gives wrong results, not an error. "" on
    either side is not checked (collections from before models were recorded, callers
    that do not say)."""
    if model and spec.embedder_model and model != spec.embedder_model:
        raise InvalidInput(
            f"collection {spec.name!r} was indexed with {spec.embedder_model}, but {what} "
            f"came from {model}: re-index the collection with the new model (`groundwire "
            f"ingest --full-reindex`, or full_reindex in the ingest API), or serve "
            f"{spec.embedder_model} again"
        )


def canonical_id(chunk_id: str, where: str) -> str:
    try:
        return str(uuid.UUID(chunk_id))
    except (ValueError, TypeError, AttributeError):
        raise InvalidInput(f"{where}: chunk_id {chunk_id!r} is not a UUID") from None


def dense_values(vec: Sequence[float], dims: int, what: str) -> list[float]:
    if len(vec) != dims:
        raise InvalidInput(f"{what} has {len(vec)} dimensions; the collection expects {dims}")
    try:
        arr = np.asarray(vec, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInput(f"{what} must contain only numbers") from None
    if not np.isfinite(arr).all():
        raise InvalidInput(f"{what} contains NaN or infinite values")
    if not arr.any():
        raise InvalidInput(f"{what} is all zeros; cosine similarity needs a non-zero vector")
    return [float(x) for x in arr]


def sparse_values(vec: SparseVec, what: str) -> SparseVec | None:
    """A checked copy with plain ints and floats, or None for an empty vector."""
    if len(vec.indices) != len(vec.values):
        raise InvalidInput(f"{what} has {len(vec.indices)} indices but {len(vec.values)} values")
    if not vec.indices:
        return None
    indices = tuple(int(i) for i in vec.indices)
    if min(indices) < 0 or max(indices) >= _SPARSE_INDEX_MAX:
        raise InvalidInput(f"{what} has an index outside 0..{_SPARSE_INDEX_MAX - 1}")
    if len(set(indices)) != len(indices):
        raise InvalidInput(f"{what} repeats an index")
    values = tuple(float(v) for v in vec.values)
    if not all(math.isfinite(v) for v in values):
        raise InvalidInput(f"{what} contains NaN or infinite values")
    return SparseVec(indices, values)


# --------------------------------------------------------------------------- payload


def payload_key(field_name: str) -> str:
    """Where a filterable field lives in the payload."""
    if field_name in CHUNK_KEYWORD_FIELDS:
        return field_name
    return f"metadata.{field_name}"


def indexed_fields(spec: CollectionSpec) -> list[str]:
    """Payload keys with a keyword index: the revision and source id (every write and
    cleanup filters on them), then the collection's filterable fields."""
    keys = [REVISION_KEY, "source_id"]
    keys.extend(payload_key(f) for f in spec.filterable if f != "source_id")
    return keys


def point_id(chunk_id: str, revision: str) -> str:
    """The engine id of one chunk in one revision: the same chunk written again by a
    re-ingest is a different point until the switch, so old and new can coexist."""
    return str(uuid.uuid5(_POINT_NAMESPACE, f"{chunk_id}/{revision}"))


def chunk_payload(chunk: Chunk, chunk_id: str) -> dict[str, Any]:
    return {
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
)
"""The payload keys ``chunk_payload`` writes: what a read of whole chunks asks for."""


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
    )


def bm25_document_text(chunk: Chunk) -> str:
    """The text BM25 indexes: title, then heading path, then the chunk text."""
    parts = [chunk.title] if chunk.title else []
    parts.extend(h for h in chunk.heading_path if h and h != chunk.title)
    parts.append(chunk.text)
    return "\n".join(parts)


def spec_to_json(spec: CollectionSpec, bm25: Bm25Settings) -> dict[str, Any]:
    spec_dict = asdict(spec)
    spec_dict["filterable"] = list(spec.filterable)
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
    )
    b = doc.get("bm25") or {}
    defaults = Bm25Settings()
    settings = Bm25Settings(
        k=float(b.get("k", defaults.k)),
        b=float(b.get("b", defaults.b)),
        avg_len=float(b.get("avg_len", defaults.avg_len)),
    )
    return spec, settings


# --------------------------------------------------------------------------- fusion


@dataclass
class FusedHit:
    """One point's fused score, with its rank and raw score in each path.

    ``point_id`` is the engine's own id object (a ``str`` or ``uuid.UUID``): only
    the hits that survive fusion are ever turned into strings.
    """

    point_id: Hashable
    score: float = 0.0
    ranks: dict[SearchPath, int] = field(default_factory=dict)
    scores: dict[SearchPath, float] = field(default_factory=dict)


def fuse(
    ranked: Mapping[SearchPath, Sequence[tuple[Hashable, float]]],
    *,
    fusion: Fusion,
    rrf_k: int = 60,
    weights: Mapping[SearchPath, float] | None = None,
    limit: int,
) -> list[FusedHit]:
    """Merge per-path ranked lists ``[(point_id, score), ...]`` (best first).

    RRF: ``sum(1 / (rrf_k + rank))`` over the paths that found a point (rank 1-based).
    WEIGHTED: ``sum(weight * (score - min) / (max - min))`` per path, where a path
    whose scores are all equal normalises them to 1.0; a missing weight is 1.0.
    Ties break on the best single-path rank, then on the ranks path by path.

    This runs on every search over up to three lists of ``path_limit`` candidates, so
    it works on plain dicts and builds ``FusedHit`` objects for the top ``limit`` only.
    """
    weights = weights or {}
    total: dict[Hashable, float] = {}
    best: dict[Hashable, int] = {}
    columns: list[tuple[SearchPath, dict[Hashable, int], dict[Hashable, float]]] = []
    for path in PATH_ORDER:
        hits = ranked.get(path)
        if not hits:
            continue
        ranks: dict[Hashable, int] = {}
        raw: dict[Hashable, float] = {}
        if fusion is Fusion.RRF:
            lo = span = 0.0
            weight = 1.0
        else:
            lo = min(score for _, score in hits)
            span = max(score for _, score in hits) - lo
            weight = weights.get(path, 1.0)
        for rank, (pid, score) in enumerate(hits, start=1):
            if pid in ranks:  # a path lists each point once; keep its best rank
                continue
            ranks[pid] = rank
            raw[pid] = score
            if fusion is Fusion.RRF:
                gain = 1.0 / (rrf_k + rank)
            else:
                gain = weight * (1.0 if span == 0.0 else (score - lo) / span)
            total[pid] = total.get(pid, 0.0) + gain
            if rank < best.get(pid, MAX_LIMIT + 1):
                best[pid] = rank
        columns.append((path, ranks, raw))
    # Ranks per path in a fixed order settle every tie between two points (a path
    # ranks each point once), so the order never depends on point ids, which differ
    # between engines and re-ingests.
    missing = MAX_LIMIT + 1
    rank_maps = [ranks for _, ranks, _ in columns]
    order = sorted(
        [
            ((-score, best[pid], *[ranks.get(pid, missing) for ranks in rank_maps]), n)
            for n, (pid, score) in enumerate(total.items())
        ]
    )
    pids = list(total)
    keys = [pids[n] for _, n in order[:limit]]
    return [
        FusedHit(
            pid,
            total[pid],
            {path: ranks[pid] for path, ranks, _ in columns if pid in ranks},
            {path: raw[pid] for path, ranks, raw in columns if pid in ranks},
        )
        for pid in keys
    ]


def cut_drop_off(fused: Sequence[FusedHit], drop_off: float | None) -> list[FusedHit]:
    """Dynamic top-k: keep hits (best first) down to the first whose score falls below
    ``drop_off`` x the top score. ``None`` or a list whose top score is not positive
    keeps everything."""
    if drop_off is None or not fused or fused[0].score <= 0.0:
        return list(fused)
    floor = drop_off * fused[0].score
    kept: list[FusedHit] = []
    for hit in fused:
        if hit.score < floor:
            break
        kept.append(hit)
    return kept
