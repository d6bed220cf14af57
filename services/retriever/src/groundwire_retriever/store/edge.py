"""``EdgeStore``: the vector store on Qdrant's engine embedded in-process (qdrant-edge).

Layout under ``root``::

    collections/<name>/collection.json   spec + BM25 settings (written last: a folder
                                         without it is an unfinished create)
    collections/<name>/shard/            the EdgeShard (segments, WAL, config)
    collections/.dropped-<name>-<hex>/   a drop in progress (removed on open)

Each collection is one EdgeShard with the named vectors ``dense`` (cosine),
``sparse`` (learned lexical weights, only when the spec asks for them) and ``bm25``
(qdrant-edge's own BM25 embedding: English tokenizer, Snowball stemmer and stop
words, hashed token ids; Qdrant applies the IDF modifier at query time).

Writes are visible to searches as soon as ``EdgeShard.update`` returns and are
durable through the shard's write-ahead log; ``close`` flushes the segments.
Searches run concurrently; writes to one collection are serialised by a lock.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from groundwire_core.errors import (
    AlreadyExists,
    BackendFailure,
    InvalidInput,
    NotFound,
    Unavailable,
)
from groundwire_retriever.domain import (
    Chunk,
    ChunkVectors,
    CollectionSpec,
    CollectionStats,
    FieldFilter,
    Fusion,
    Hit,
    PathReport,
    SearchPath,
    SearchQuery,
    SearchResult,
    SparseVec,
)

__all__ = [
    "CHUNK_KEYWORD_FIELDS",
    "Bm25Settings",
    "EdgeStore",
    "FusedHit",
    "bm25_document_text",
    "chunk_from_payload",
    "chunk_payload",
    "fuse",
    "payload_key",
    "validate_collection_name",
    "validate_spec",
]

log = logging.getLogger(__name__)

DEPENDENCY = "qdrant-edge"

DENSE_VECTOR = "dense"
SPARSE_VECTOR = "sparse"
BM25_VECTOR = "bm25"
VECTOR_NAMES: Mapping[SearchPath, str] = {
    SearchPath.DENSE: DENSE_VECTOR,
    SearchPath.SPARSE: SPARSE_VECTOR,
    SearchPath.BM25: BM25_VECTOR,
}
PATH_ORDER = (SearchPath.DENSE, SearchPath.SPARSE, SearchPath.BM25)

COLLECTION_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
FIELD_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

# Chunk fields stored at the top level of the payload that can carry a keyword index.
# Any other filterable name is a user metadata key, stored under ``metadata.<key>``.
CHUNK_KEYWORD_FIELDS = frozenset(
    {"chunk_id", "source_id", "title", "heading_path", "url", "doc_type", "content_hash"}
)
_NOT_FILTERABLE = frozenset({"text", "chunk_index", "created_at", "metadata"})

MAX_DENSE_DIMS = 65_536
MAX_LIMIT = 10_000
_SPARSE_INDEX_MAX = 2**32
_UPSERT_BATCH = 256
_SCROLL_PAGE = 1_000
_FORMAT = 1
_SPEC_FILE = "collection.json"
_SHARD_DIR = "shard"
_DROPPED_PREFIX = ".dropped-"


# --------------------------------------------------------------------------- helpers
# Backend-neutral pieces (validation, payload layout, fusion) are public so that a
# store on a Qdrant server can share them.


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


def payload_key(field_name: str) -> str:
    """Where a filterable field lives in the payload."""
    if field_name in CHUNK_KEYWORD_FIELDS:
        return field_name
    return f"metadata.{field_name}"


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


def chunk_from_payload(point_id: str, payload: Mapping[str, Any] | None) -> Chunk:
    p = payload or {}
    metadata = p.get("metadata") or {}
    return Chunk(
        chunk_id=str(p.get("chunk_id") or point_id),
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


@dataclass
class FusedHit:
    """One point's fused score, with its rank and raw score in each path."""

    point_id: str
    score: float = 0.0
    ranks: dict[SearchPath, int] = field(default_factory=dict)
    scores: dict[SearchPath, float] = field(default_factory=dict)


def fuse(
    ranked: Mapping[SearchPath, Sequence[tuple[str, float]]],
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
    Ties break on the best single-path rank, then on the id (deterministic).
    """
    fused: dict[str, FusedHit] = {}
    weights = weights or {}
    for path, hits in ranked.items():
        if not hits:
            continue
        lo = min(score for _, score in hits)
        hi = max(score for _, score in hits)
        weight = weights.get(path, 1.0)
        for rank, (point_id, score) in enumerate(hits, start=1):
            entry = fused.get(point_id)
            if entry is None:
                entry = fused[point_id] = FusedHit(point_id)
            if path in entry.ranks:  # a path lists each point once; keep its best rank
                continue
            entry.ranks[path] = rank
            entry.scores[path] = score
            if fusion is Fusion.RRF:
                entry.score += 1.0 / (rrf_k + rank)
            else:
                norm = 1.0 if hi == lo else (score - lo) / (hi - lo)
                entry.score += weight * norm
    ordered = sorted(fused.values(), key=lambda f: (-f.score, min(f.ranks.values()), f.point_id))
    return ordered[:limit]


def _engine_error(action: str) -> BackendFailure:
    log.exception("qdrant-edge failed: %s", action)
    return BackendFailure(f"the vector store failed to {action}", dependency=DEPENDENCY)


def _canonical_id(chunk_id: str, where: str) -> str:
    try:
        return str(uuid.UUID(chunk_id))
    except (ValueError, TypeError, AttributeError):
        raise InvalidInput(f"{where}: chunk_id {chunk_id!r} is not a UUID") from None


def _dense_list(vec: Sequence[float], dims: int, what: str) -> list[float]:
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


def _sparse_vector(vec: SparseVec, what: str) -> qe.SparseVector | None:
    """The engine's sparse vector, or None for an empty one (nothing to store)."""
    if len(vec.indices) != len(vec.values):
        raise InvalidInput(f"{what} has {len(vec.indices)} indices but {len(vec.values)} values")
    if not vec.indices:
        return None
    indices = [int(i) for i in vec.indices]
    if min(indices) < 0 or max(indices) >= _SPARSE_INDEX_MAX:
        raise InvalidInput(f"{what} has an index outside 0..{_SPARSE_INDEX_MAX - 1}")
    if len(set(indices)) != len(indices):
        raise InvalidInput(f"{what} repeats an index")
    values = [float(v) for v in vec.values]
    if not all(math.isfinite(v) for v in values):
        raise InvalidInput(f"{what} contains NaN or infinite values")
    return qe.SparseVector(indices, values)


# --------------------------------------------------------------------------- store


class _Gate:
    """Counts operations in flight on a collection so a drop or close can wait for
    them, and refuses new ones once closed."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._cond = threading.Condition()
        self._active = 0
        self._closed = False

    @contextmanager
    def enter(self) -> Iterator[None]:
        with self._cond:
            if self._closed:
                raise NotFound(f"collection {self._name!r} does not exist")
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                if self._active == 0:
                    self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            while self._active:
                self._cond.wait()


@dataclass
class _Collection:
    spec: CollectionSpec
    bm25_settings: Bm25Settings
    directory: Path
    shard: qe.EdgeShard
    bm25: qe.Bm25
    write_lock: threading.Lock = field(default_factory=threading.Lock)
    gate: _Gate = field(init=False)

    def __post_init__(self) -> None:
        self.gate = _Gate(self.spec.name)


def _spec_to_json(spec: CollectionSpec, bm25: Bm25Settings) -> dict[str, Any]:
    spec_dict = asdict(spec)
    spec_dict["filterable"] = list(spec.filterable)
    return {"format": _FORMAT, "spec": spec_dict, "bm25": asdict(bm25), "shard": _SHARD_DIR}


def _spec_from_json(doc: Mapping[str, Any]) -> tuple[CollectionSpec, Bm25Settings]:
    if doc.get("format") != _FORMAT:
        raise ValueError(f"unsupported collection format {doc.get('format')!r}")
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


def _write_json_atomic(path: Path, doc: Mapping[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class EdgeStore:
    """A ``VectorStore`` on qdrant-edge: one EdgeShard per collection under ``root``.

    One process owns ``root`` (the engine locks each shard's WAL).
    """

    def __init__(self, root: Path, *, bm25: Bm25Settings | None = None) -> None:
        self._root = Path(root)
        self._bm25_settings = bm25 or Bm25Settings()
        self._lock = threading.Lock()
        self._collections: dict[str, _Collection] | None = None

    @property
    def root(self) -> Path:
        return self._root

    # ------------------------------------------------------------ lifecycle

    def open(self) -> None:
        with self._lock:
            if self._collections is not None:
                return
            base = self._collections_dir
            try:
                base.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise Unavailable(
                    f"cannot create the data directory {str(base)!r}: {exc.strerror}",
                    dependency=DEPENDENCY,
                ) from None
            loaded: dict[str, _Collection] = {}
            try:
                for entry in sorted(base.iterdir()):
                    if entry.name.startswith(_DROPPED_PREFIX):
                        shutil.rmtree(entry, ignore_errors=True)
                        continue
                    if not entry.is_dir() or not COLLECTION_NAME_RE.fullmatch(entry.name):
                        continue
                    if not (entry / _SPEC_FILE).is_file():
                        log.warning("skipping %s: unfinished collection (no %s)", entry, _SPEC_FILE)
                        continue
                    loaded[entry.name] = self._load(entry)
            except BaseException:
                for coll in loaded.values():
                    self._close_shard(coll)
                raise
            self._collections = loaded
            log.info("edge store open at %s: %d collection(s)", self._root, len(loaded))

    def close(self) -> None:
        with self._lock:
            if self._collections is None:
                return
            collections, self._collections = self._collections, None
        for coll in collections.values():
            coll.gate.close()
            self._close_shard(coll)

    def optimize(self, name: str) -> bool:
        """Run the engine's segment optimizers (HNSW build, vacuum) now, blocking.

        Not part of ``VectorStore``: qdrant-edge has no background optimizer, so a
        freshly filled collection is searched by brute force until this runs. Writes
        to the collection wait meanwhile. Returns whether anything was optimized.
        """
        coll = self._get(name)
        with coll.gate.enter(), coll.write_lock:
            try:
                return coll.shard.optimize()
            except Exception:
                raise _engine_error(f"optimize collection {name!r}") from None

    # ------------------------------------------------------------ collections

    def create_collection(self, spec: CollectionSpec) -> None:
        validate_spec(spec)
        with self._lock:
            collections = self._require_open()
            if spec.name in collections:
                raise AlreadyExists(f"collection {spec.name!r} already exists")
            directory = self._collections_dir / spec.name
            if directory.exists():  # an unfinished create: nothing was ever served from it
                shutil.rmtree(directory)
            shard: qe.EdgeShard | None = None
            try:
                shard = qe.EdgeShard.create(str(directory / _SHARD_DIR), self._edge_config(spec))
                for field_name in self._indexed_fields(spec):
                    shard.update(
                        qe.UpdateOperation.create_field_index(
                            payload_key(field_name), qe.PayloadSchemaType.Keyword
                        )
                    )
                _write_json_atomic(directory / _SPEC_FILE, _spec_to_json(spec, self._bm25_settings))
            except Exception:
                if shard is not None:
                    try:
                        shard.close()
                    except Exception:
                        log.exception("closing a half-created shard failed")
                shutil.rmtree(directory, ignore_errors=True)
                raise _engine_error(f"create collection {spec.name!r}") from None
            collections[spec.name] = _Collection(
                spec=spec,
                bm25_settings=self._bm25_settings,
                directory=directory,
                shard=shard,
                bm25=self._bm25_settings.model(),
            )
        log.info("created collection %s (%d dims)", spec.name, spec.dense_dims)

    def list_collections(self) -> list[CollectionSpec]:
        with self._lock:
            collections = self._require_open()
            return [collections[name].spec for name in sorted(collections)]

    def describe(self, name: str) -> CollectionStats:
        coll = self._get(name)
        with coll.gate.enter():
            try:
                chunks = coll.shard.count(qe.CountRequest(exact=True))
                sources = 0
                if chunks:
                    facets = coll.shard.facet(
                        qe.FacetRequest(key="source_id", limit=chunks, exact=True)
                    )
                    # exact facets list values whose points were all deleted with count 0
                    sources = sum(1 for hit in facets.hits if hit.count > 0)
            except Exception:
                raise _engine_error(f"describe collection {name!r}") from None
        return CollectionStats(spec=coll.spec, chunks=chunks, sources=sources)

    def drop_collection(self, name: str) -> None:
        validate_collection_name(name)
        with self._lock:
            collections = self._require_open()
            coll = collections.pop(name, None)
            if coll is None:
                raise NotFound(f"collection {name!r} does not exist")
            coll.gate.close()
            self._close_shard(coll)
            tombstone = self._collections_dir / f"{_DROPPED_PREFIX}{name}-{uuid.uuid4().hex}"
            try:
                os.replace(coll.directory, tombstone)
            except OSError:
                log.exception("could not move %s aside", coll.directory)
                raise BackendFailure(
                    f"collection {name!r} was closed but its files could not be removed",
                    dependency=DEPENDENCY,
                ) from None
        shutil.rmtree(tombstone, ignore_errors=True)
        log.info("dropped collection %s", name)

    # ------------------------------------------------------------ writes

    def upsert(self, name: str, chunks: Sequence[tuple[Chunk, ChunkVectors]]) -> None:
        coll = self._get(name)
        points = [self._point(coll, chunk, vectors, i) for i, (chunk, vectors) in enumerate(chunks)]
        if not points:
            return
        with coll.gate.enter(), coll.write_lock:
            try:
                for start in range(0, len(points), _UPSERT_BATCH):
                    batch = points[start : start + _UPSERT_BATCH]
                    coll.shard.update(qe.UpdateOperation.upsert_points(batch))
            except Exception:
                raise _engine_error(f"write to collection {name!r}") from None

    def delete_by_source(self, name: str, source_id: str) -> int:
        coll = self._get(name)
        if not source_id:
            raise InvalidInput("source_id must not be empty")
        flt = qe.Filter(must=[qe.FieldCondition("source_id", match=qe.MatchValue(source_id))])
        with coll.gate.enter(), coll.write_lock:
            try:
                removed = coll.shard.count(qe.CountRequest(exact=True, filter=flt))
                if removed:
                    coll.shard.update(qe.UpdateOperation.delete_points_by_filter(flt))
            except Exception:
                raise _engine_error(f"delete from collection {name!r}") from None
        return removed

    def delete_chunks(self, name: str, chunk_ids: Sequence[str]) -> int:
        coll = self._get(name)
        ids: list[int | uuid.UUID | str] = [_canonical_id(c, "chunk_id") for c in chunk_ids]
        if not ids:
            return 0
        with coll.gate.enter(), coll.write_lock:
            try:
                coll.shard.update(qe.UpdateOperation.delete_points(ids))
            except Exception:
                raise _engine_error(f"delete from collection {name!r}") from None
        return len(ids)

    def source_hashes(self, name: str, source_id: str) -> dict[str, str]:
        coll = self._get(name)
        if not source_id:
            raise InvalidInput("source_id must not be empty")
        flt = qe.Filter(must=[qe.FieldCondition("source_id", match=qe.MatchValue(source_id))])
        hashes: dict[str, str] = {}
        offset: qe.PointId | None = None
        with coll.gate.enter():
            try:
                while True:
                    records, offset = coll.shard.scroll(
                        qe.ScrollRequest(
                            offset=offset,
                            limit=_SCROLL_PAGE,
                            filter=flt,
                            with_payload=qe.PayloadSelector.Include(["content_hash"]),
                            with_vector=False,
                        )
                    )
                    for record in records:
                        payload = record.payload or {}
                        hashes[str(record.id)] = str(payload.get("content_hash", ""))
                    if offset is None:
                        break
            except Exception:
                raise _engine_error(f"read collection {name!r}") from None
        return hashes

    # ------------------------------------------------------------ search

    def search(self, name: str, query: SearchQuery) -> SearchResult:
        coll = self._get(name)
        spec = coll.spec
        self._validate_query(query)
        flt = self._filter(spec, query.filters)
        ranked: dict[SearchPath, list[tuple[str, float]]] = {}
        reports: list[PathReport] = []
        with coll.gate.enter():
            for path in PATH_ORDER:
                if path not in query.paths:
                    continue
                request_or_reason = self._path_request(coll, path, query, flt)
                if isinstance(request_or_reason, str):
                    reports.append(
                        PathReport(
                            path=path, ms=0.0, hits=0, skipped=True, reason=request_or_reason
                        )
                    )
                    continue
                started = time.perf_counter()
                try:
                    points = coll.shard.query(request_or_reason)
                except Exception:
                    raise _engine_error(f"search collection {name!r} ({path.value} path)") from None
                ms = (time.perf_counter() - started) * 1000.0
                ranked[path] = [(str(p.id), float(p.score)) for p in points]
                reports.append(PathReport(path=path, ms=ms, hits=len(points)))
            fused = fuse(
                ranked,
                fusion=query.fusion,
                rrf_k=query.rrf_k,
                weights=query.weights,
                limit=query.limit,
            )
            try:
                records = coll.shard.retrieve([f.point_id for f in fused], True, False)
            except Exception:
                raise _engine_error(f"read results from collection {name!r}") from None
        payloads = {str(r.id): r.payload for r in records}
        hits = tuple(
            Hit(
                chunk=chunk_from_payload(f.point_id, payloads[f.point_id]),
                score=f.score,
                path_ranks=f.ranks,
                path_scores=f.scores,
            )
            for f in fused
            if f.point_id in payloads  # deleted between the path queries and the read
        )
        return SearchResult(hits=hits, paths=tuple(reports))

    # ------------------------------------------------------------ internals

    @property
    def _collections_dir(self) -> Path:
        return self._root / "collections"

    def _require_open(self) -> dict[str, _Collection]:
        if self._collections is None:
            raise Unavailable("the vector store is not open", dependency=DEPENDENCY)
        return self._collections

    def _get(self, name: str) -> _Collection:
        validate_collection_name(name)
        with self._lock:
            coll = self._require_open().get(name)
        if coll is None:
            raise NotFound(f"collection {name!r} does not exist")
        return coll

    def _load(self, directory: Path) -> _Collection:
        name = directory.name
        try:
            with (directory / _SPEC_FILE).open(encoding="utf-8") as fh:
                spec, settings = _spec_from_json(json.load(fh))
        except (OSError, ValueError, KeyError, TypeError):
            log.exception("unreadable %s in %s", _SPEC_FILE, directory)
            raise BackendFailure(
                f"collection {name!r} has an unreadable {_SPEC_FILE}", dependency=DEPENDENCY
            ) from None
        if spec.name != name:
            raise BackendFailure(
                f"collection folder {name!r} holds the spec of {spec.name!r}",
                dependency=DEPENDENCY,
            )
        try:
            shard = qe.EdgeShard.load(str(directory / _SHARD_DIR))
        except Exception:
            log.exception("loading shard %s failed", directory / _SHARD_DIR)
            raise BackendFailure(
                f"collection {name!r} could not be opened; another process may be using "
                f"{str(self._root)!r}",
                dependency=DEPENDENCY,
            ) from None
        return _Collection(
            spec=spec,
            bm25_settings=settings,
            directory=directory,
            shard=shard,
            bm25=settings.model(),
        )

    @staticmethod
    def _close_shard(coll: _Collection) -> None:
        try:
            coll.shard.flush()
        except Exception:
            log.exception("flushing collection %s failed", coll.spec.name)
        try:
            coll.shard.close()
        except Exception:
            log.exception("closing collection %s failed", coll.spec.name)

    @staticmethod
    def _indexed_fields(spec: CollectionSpec) -> list[str]:
        # source_id is always indexed: delete_by_source, source_hashes and describe use it.
        return ["source_id", *(f for f in spec.filterable if f != "source_id")]

    @staticmethod
    def _edge_config(spec: CollectionSpec) -> qe.EdgeConfig:
        sparse: dict[str, qe.EdgeSparseVectorParams] = {}
        if spec.learned_sparse:
            sparse[SPARSE_VECTOR] = qe.EdgeSparseVectorParams()
        if spec.bm25:
            sparse[BM25_VECTOR] = qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)
        return qe.EdgeConfig(
            vectors={DENSE_VECTOR: qe.EdgeVectorParams(spec.dense_dims, qe.Distance.Cosine)},
            sparse_vectors=sparse or None,
        )

    @staticmethod
    def _point(coll: _Collection, chunk: Chunk, vectors: ChunkVectors, i: int) -> qe.Point:
        spec = coll.spec
        where = f"chunk {i}"
        chunk_id = _canonical_id(chunk.chunk_id, where)
        if not chunk.source_id:
            raise InvalidInput(f"{where} ({chunk_id}) has an empty source_id")
        if vectors.dense is None:
            raise InvalidInput(
                f"{where} ({chunk_id}) has no dense vector; collection {spec.name!r} "
                f"expects {spec.dense_dims} dimensions"
            )
        named: dict[str, qe.NamedVector] = {
            DENSE_VECTOR: _dense_list(
                vectors.dense, spec.dense_dims, f"the dense vector of {where} ({chunk_id})"
            )
        }
        if vectors.sparse is not None:
            if not spec.learned_sparse:
                raise InvalidInput(
                    f"{where} ({chunk_id}) has a sparse vector but collection "
                    f"{spec.name!r} was created without learned sparse vectors"
                )
            sparse = _sparse_vector(vectors.sparse, f"the sparse vector of {where} ({chunk_id})")
            if sparse is not None:
                named[SPARSE_VECTOR] = sparse
        if spec.bm25:
            bm25 = coll.bm25.embed_document(bm25_document_text(chunk))
            if bm25.indices:
                named[BM25_VECTOR] = bm25
        return qe.Point(chunk_id, named, chunk_payload(chunk, chunk_id))

    @staticmethod
    def _validate_query(query: SearchQuery) -> None:
        if not query.paths:
            raise InvalidInput("a search needs at least one path (dense, sparse or bm25)")
        for label, value in (("limit", query.limit), ("path_limit", query.path_limit)):
            if not 1 <= value <= MAX_LIMIT:
                raise InvalidInput(f"{label} must be between 1 and {MAX_LIMIT}, got {value}")
        if query.rrf_k < 0:
            raise InvalidInput(f"rrf_k must not be negative, got {query.rrf_k}")
        for path, weight in query.weights.items():
            if not math.isfinite(weight) or weight < 0:
                raise InvalidInput(
                    f"the weight of the {path.value} path must be a non-negative number"
                )
        if not math.isfinite(query.dense_floor):
            raise InvalidInput("dense_floor must be a finite number")

    @staticmethod
    def _filter(spec: CollectionSpec, filters: Sequence[FieldFilter]) -> qe.Filter | None:
        if not filters:
            return None
        conditions: list[qe.ConditionType] = []
        for f in filters:
            if f.field not in spec.filterable:
                allowed = ", ".join(spec.filterable) or "none"
                raise InvalidInput(
                    f"collection {spec.name!r} cannot filter on {f.field!r}; "
                    f"filterable fields: {allowed}"
                )
            if not f.any_of:
                raise InvalidInput(f"the filter on {f.field!r} lists no values")
            conditions.append(
                qe.FieldCondition(payload_key(f.field), match=qe.MatchAny(list(f.any_of)))
            )
        return qe.Filter(must=conditions)

    @staticmethod
    def _path_request(
        coll: _Collection, path: SearchPath, query: SearchQuery, flt: qe.Filter | None
    ) -> qe.QueryRequest | str:
        """The engine request for one path, or the reason it is skipped."""
        spec = coll.spec
        vector: qe.NamedVector
        threshold: float | None = None
        if path is SearchPath.DENSE:
            if query.dense is None:
                return "the query has no dense vector"
            vector = _dense_list(query.dense, spec.dense_dims, "the dense query vector")
            threshold = query.dense_floor
        elif path is SearchPath.SPARSE:
            if not spec.learned_sparse:
                return f"collection {spec.name!r} has no learned sparse vectors"
            if query.sparse is None:
                return "the query has no sparse vector"
            sparse = _sparse_vector(query.sparse, "the sparse query vector")
            if sparse is None:
                return "the query's sparse vector is empty"
            vector = sparse
        else:
            if not spec.bm25:
                return f"collection {spec.name!r} has no BM25 index"
            if not query.text.strip():
                return "the query has no text"
            bm25 = coll.bm25.embed_query(query.text)
            if not bm25.indices:
                return "the query text has no searchable terms (only stop words)"
            vector = bm25
        return qe.QueryRequest(
            limit=query.path_limit,
            query=qe.Query.Nearest(vector, using=VECTOR_NAMES[path]),
            filter=flt,
            score_threshold=threshold,
            with_payload=False,
            with_vector=False,
        )
