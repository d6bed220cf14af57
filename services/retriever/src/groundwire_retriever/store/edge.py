"""``EdgeStore``: the vector store on Qdrant's engine embedded in-process (qdrant-edge).

Layout under ``root``::

    collections/<name>/collection.json   the collection's pointer and metadata: the
                                         current generation's shard folder, spec, BM25
                                         settings and revision state (written by
                                         rename; a folder without it is an unfinished
                                         create)
    collections/<name>/shard-<hex>/      one generation: an EdgeShard (segments, WAL)
    collections/.dropped-<name>-<hex>/   a drop in progress (removed on open)

A shard folder that ``collection.json`` does not name is a re-index that never
switched, an index build that never finished, or an old generation whose removal was
interrupted: removed on open.

Each shard has the named vectors ``dense`` (cosine; with an int8 scalar-quantized copy
for search, rescored with the originals), ``sparse`` (learned lexical weights, only
when the spec asks for them) and ``bm25`` (qdrant-edge's BM25 embedding, computed in
``store.bm25``; Qdrant applies the IDF modifier at query time), keyword indexes on
``revision``, ``source_id`` and the filterable fields, and its payload in RAM (see
``shard_config``).

Writes are visible to searches as soon as ``EdgeShard.update`` returns and are
durable through the shard's write-ahead log; closing flushes the segments. One
process owns ``root`` (the engine locks each shard's WAL). Every write first asks
``disk.DiskGuard`` for room: the engine writes through memory-mapped files, and a
full disk under them kills the process with SIGBUS. Every call also checks that the
generation's folder is still there, so searches fail as health does (``ping``) once
the data folder is deleted or unmounted, instead of answering from files that are
gone (a restart would come up without them). Visibility, atomic
re-ingest and re-index are ``VersionedStore``'s; this module only runs the engine.

Why one module of this size: it is the one adapter to one engine (qdrant-edge's own
classes, folder layout, crash recovery of that layout, index builds on a copy); no
other module touches the engine's API.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from groundwire_core.errors import BackendFailure, Unavailable
from groundwire_retriever.domain import CollectionSpec, SparseVec
from groundwire_retriever.store import disk
from groundwire_retriever.store.bm25 import Bm25Settings
from groundwire_retriever.store.engine import PointData, StoredCollection, Where
from groundwire_retriever.store.payload import (
    BM25_VECTOR,
    DENSE_VECTOR,
    MULTI_VECTOR,
    REVISION_KEY,
    SPARSE_VECTOR,
    SPEC_FORMAT,
    indexed_fields,
    spec_from_json,
    spec_to_json,
)
from groundwire_retriever.store.validation import COLLECTION_NAME_RE
from groundwire_retriever.store.versioned import VersionedStore

__all__ = [
    "DEFAULT_SEARCH_THREADS",
    "DENSE_SEARCH_PARAMS",
    "Bm25Settings",
    "EdgeEngine",
    "EdgeStore",
    "shard_config",
]

log = logging.getLogger(__name__)

DEPENDENCY = "qdrant-edge"
LEGACY_REVISION = "0"
"""The revision given to points written before revisions existed (format 1)."""

_UPSERT_BATCH = 256
_SCROLL_PAGE = 1_000
_SPEC_FILE = "collection.json"
_SHARD_RE = re.compile(r"^shard(-[0-9a-f]{12})?$")
_DROPPED_PREFIX = ".dropped-"
OPTIMIZER = [sys.executable, "-m", "groundwire_retriever.store.optimize_shard"]
"""The command that builds a shard folder's indexes in a process of its own."""


DENSE_SEARCH_PARAMS = qe.SearchParams(quantization=qe.QuantizationSearchParams(rescore=True))
"""Dense searches on int8-quantized vectors rescore the candidates with the original
vectors, which keeps quantization's ranking error out of the results."""


def _engine_error(action: str) -> BackendFailure:
    log.exception("qdrant-edge failed: %s", action)
    return BackendFailure(f"the vector store failed to {action}", dependency=DEPENDENCY)


def _write_json_atomic(path: Path, doc: Mapping[str, Any], *, durable: bool = True) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, sort_keys=True)
        if durable:
            fh.flush()
            os.fsync(fh.fileno())
    os.replace(tmp, path)


def _filter(where: Where) -> qe.Filter | None:
    if where.empty:
        return None
    must: list[qe.ConditionType] = [
        qe.FieldCondition(key, match=qe.MatchAny(list(values))) for key, values in where.must
    ]
    must += [
        qe.Filter(
            should=[
                qe.FieldCondition(key, match=qe.MatchAny(list(values))),
                qe.IsEmptyCondition(key),
            ]
        )
        for key, values in where.must_or_missing
    ]
    must_not: list[qe.ConditionType] = [
        qe.FieldCondition(key, match=qe.MatchAny(list(values))) for key, values in where.must_not
    ]
    return qe.Filter(must=must or None, must_not=must_not or None)


def _sparse(vec: SparseVec) -> qe.SparseVector:
    return qe.SparseVector(list(vec.indices), list(vec.values))


DEFAULT_SEARCH_THREADS = 1
"""Threads in each shard's search pool, which reads a shard's segments in parallel.
Searches run one at a time on the event loop (``service.INLINE_CANDIDATES``), and at
100k chunks in two segments one thread searched fastest on 2 cores: 2.3 ms per hybrid
search against 2.7 with two threads and 3.0 with the engine's default of eight
(``EdgeStore.search``, alternating blocks of 50 queries). More threads pay off with
more cores and more segments: ``GROUNDWIRE_RETRIEVER_SEARCH_THREADS``."""


def shard_config(
    spec: CollectionSpec, *, quantize: bool, search_threads: int = DEFAULT_SEARCH_THREADS
) -> qe.EdgeConfig:
    """An EdgeShard's schema and placement for ``spec``.

    Payload lives in RAM (``Memory.Cached``) rather than the engine's default
    on-disk store: every search reads the payload of its results, and reading
    them from cold pages cost ~2.5 ms per 50 hits against ~0.4 ms warm
    (benchmarks/retrieval_bench.py, 100k chunks). With ``quantize`` the dense
    vectors also get an int8 scalar-quantized copy that HNSW searches use
    (rescored with the originals): dense search at 100k went from ~1.9 to ~0.7 ms.
    The quantized copy is built by ``optimize``. The point-id tracker is kept in RAM
    too (every search maps its hits' ids), and the shard's search pool has
    ``search_threads`` threads (see ``DEFAULT_SEARCH_THREADS``; 0 = the engine's own
    default, derived from the CPUs).
    """
    sparse: dict[str, qe.EdgeSparseVectorParams] = {}
    if spec.learned_sparse:
        sparse[SPARSE_VECTOR] = qe.EdgeSparseVectorParams()
    if spec.bm25:
        sparse[BM25_VECTOR] = qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)
    quantization = (
        qe.ScalarQuantizationConfig(qe.ScalarType.Int8, quantile=0.99, memory=qe.Memory.Cached)
        if quantize
        else None
    )
    vectors = {
        DENSE_VECTOR: qe.EdgeVectorParams(
            spec.dense_dims, qe.Distance.Cosine, quantization_config=quantization
        )
    }
    if spec.multi_vector_dims:
        # read back for MaxSim rescoring only, never searched: no HNSW graph (m=0)
        vectors[MULTI_VECTOR] = qe.EdgeVectorParams(
            spec.multi_vector_dims,
            qe.Distance.Cosine,
            multivector_config=qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim),
            hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000),
        )
    return qe.EdgeConfig(
        vectors=vectors,
        sparse_vectors=sparse or None,
        payload_memory=qe.Memory.Cached,
        id_tracker_memory=qe.Memory.Cached,
        max_search_threads=search_threads or None,
    )


class EdgeEngine:
    """Generations as EdgeShard folders under ``root``; see the module docstring."""

    kind = "edge"
    dependency = DEPENDENCY

    def __init__(
        self,
        root: Path,
        *,
        quantize: bool = True,
        search_threads: int = DEFAULT_SEARCH_THREADS,
        min_free_bytes: int = disk.DEFAULT_MIN_FREE_MIB * disk.MIB,
    ) -> None:
        self._root = Path(root)
        self._disk = disk.DiskGuard(self._base, min_free_bytes, dependency=DEPENDENCY)
        self._quantize = quantize
        self._search_threads = search_threads
        self._dense_params = DENSE_SEARCH_PARAMS if quantize else None
        self._lock = threading.Lock()
        self._shards: dict[str, qe.EdgeShard] = {}
        self._current: dict[str, str] = {}
        self._folders: dict[str, str] = {}
        """generation -> its shard folder, once an index build moved it (see optimize)."""
        self._replaced: dict[str, list[tuple[qe.EdgeShard, Path]]] = {}
        """generation -> shards an index build replaced, open until release_replaced."""
        self._removals: list[threading.Thread] = []
        self._dirs: dict[str, str] = {}
        """generation -> its folder as a string: checked on every call (see _shard)."""

    @property
    def location(self) -> str:
        return str(self._root)

    def _folder(self, generation: str) -> Path:
        name, dirname = generation.split("/", 1)
        return self._base / name / self._folders.get(generation, dirname)

    def _config(self, spec: CollectionSpec) -> qe.EdgeConfig:
        return shard_config(spec, quantize=self._quantize, search_threads=self._search_threads)

    @property
    def root(self) -> Path:
        return self._root

    # ------------------------------------------------------------ catalog

    def open(self) -> dict[str, StoredCollection]:
        base = self._base
        try:
            base.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise Unavailable(
                f"cannot create the data directory {str(base)!r}: {exc.strerror}",
                dependency=DEPENDENCY,
            ) from None
        found: dict[str, StoredCollection] = {}
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
                found[entry.name] = self._load(entry)
        except BaseException:
            self.close()
            raise
        return found

    def close(self) -> None:
        with self._lock:
            shards, self._shards = self._shards, {}
            self._current = {}
            self._dirs = {}
            replaced = list(self._replaced)
        for gid in replaced:
            self.release_replaced(gid)
        for gid, shard in shards.items():
            self._close_shard(gid, shard)
        with self._lock:
            removals, self._removals = self._removals, []
        for thread in removals:  # closed means settled: no folder still going away
            thread.join()

    def ping(self) -> None:
        """The engine runs in this process; only its folders can go away (a volume
        unmounted or deleted under it): the same check every search makes (``_shard``).
        Logs when the disk goes under the write floor or comes back: a low disk refuses
        writes but searches go on, so it is reported (``storage_warning``), not failed."""
        if not self._base.is_dir():
            raise Unavailable(self._gone(str(self._base)), dependency=DEPENDENCY)
        with self._lock:
            current = list(self._current.values())
        for gid in current:
            self._shard(gid)
        self._disk.watch()

    def storage_warning(self) -> str:
        """Why writes are refused now (the disk under its floor, or the data folder
        gone); empty while they are accepted."""
        try:
            return self._disk.space().warning()
        except Unavailable as error:
            return str(error.message)

    def create(self, name: str, spec: CollectionSpec, meta: Mapping[str, Any]) -> str:
        directory = self._base / name
        dirname = f"shard-{uuid.uuid4().hex[:12]}"
        self._disk.require(disk.COLLECTION_CREATE_BYTES, f"create collection {name!r}")
        shard: qe.EdgeShard | None = None
        try:
            with self._lock:
                if name not in self._current and directory.exists():
                    shutil.rmtree(directory)  # an unfinished create: nothing was served from it
            directory.mkdir(parents=True, exist_ok=True)
            config = self._config(spec)
            shard = qe.EdgeShard.create(str(directory / dirname), config)
            for key in indexed_fields(spec):
                shard.update(
                    qe.UpdateOperation.create_field_index(key, qe.PayloadSchemaType.Keyword)
                )
        except Exception:
            if shard is not None:
                self._close_shard(dirname, shard)
            shutil.rmtree(directory / dirname, ignore_errors=True)
            raise _engine_error(f"create collection {name!r}") from None
        gid = f"{name}/{dirname}"
        with self._lock:
            self._shards[gid] = shard
        return gid

    def make_current(self, name: str, generation: str, meta: Mapping[str, Any]) -> None:
        dirname = self._folder(generation).name
        self._disk.require(disk.METADATA_WRITE_BYTES, f"switch collection {name!r}")
        try:
            _write_json_atomic(self._base / name / _SPEC_FILE, {**meta, "shard": dirname})
        except OSError:
            raise _engine_error(f"switch collection {name!r}") from None
        with self._lock:
            self._current[name] = generation

    def save_meta(
        self, name: str, generation: str, meta: Mapping[str, Any], *, durable: bool
    ) -> None:
        # A generation being built has nothing to persist: if the process dies, its
        # folder is an orphan and open() removes it.
        if self._current.get(name) != generation:
            return
        dirname = self._folder(generation).name
        self._disk.require(disk.METADATA_WRITE_BYTES, f"save the state of collection {name!r}")
        try:
            _write_json_atomic(
                self._base / name / _SPEC_FILE, {**meta, "shard": dirname}, durable=durable
            )
        except OSError:
            raise _engine_error(f"save the state of collection {name!r}") from None

    def drop_generation(self, name: str, generation: str) -> None:
        folder = self._folder(generation)
        self.release_replaced(generation)
        with self._lock:
            shard = self._shards.pop(generation, None)
            self._folders.pop(generation, None)
            self._dirs.pop(generation, None)
        if shard is not None:
            self._close_shard(generation, shard)
        shutil.rmtree(folder, ignore_errors=True)

    def drop(self, name: str, generations: Sequence[str]) -> None:
        for gid in generations:
            self.release_replaced(gid)
            with self._lock:
                shard = self._shards.pop(gid, None)
                self._folders.pop(gid, None)
                self._dirs.pop(gid, None)
            if shard is not None:
                self._close_shard(gid, shard)
        with self._lock:
            self._current.pop(name, None)
        directory = self._base / name
        tombstone = self._base / f"{_DROPPED_PREFIX}{name}-{uuid.uuid4().hex}"
        try:
            os.replace(directory, tombstone)
        except OSError:
            log.exception("could not move %s aside", directory)
            raise BackendFailure(
                f"collection {name!r} was closed but its files could not be removed",
                dependency=DEPENDENCY,
            ) from None
        shutil.rmtree(tombstone, ignore_errors=True)

    def optimize(self, generation: str) -> bool:
        """Builds the generation's search indexes on a copy of its shard, in a child
        process (see ``optimize_shard``: in this process the build would hold the GIL
        and stop every search), then serves the built copy under the same generation
        id. The caller keeps writes out meanwhile; searches go on from the original.
        The original stays open for searches already running on it until
        ``release_replaced``. Returns whether anything was built.
        """
        shard = self._shard(generation)
        name = generation.split("/", 1)[0]
        source = self._folder(generation)
        target = source.with_name(f"shard-{uuid.uuid4().hex[:12]}")
        # the copy is written out in full (sparse files too) and then indexed
        self._disk.require(
            disk.folder_bytes(source) + disk.folder_bytes(source, allocated=True),
            f"build the search index of collection {name!r} (it copies the collection)",
        )
        try:
            shard.flush()  # every write is in the segments the copy takes
            built = self._build(source, target, name)
            if not built:
                self._remove_in_background(target)
                return False
            # the copy's edge_config.json is the one this process loaded the original with
            fresh = qe.EdgeShard.load(str(target), None)
        except BackendFailure:
            self._remove_in_background(target)
            raise
        except Exception:
            self._remove_in_background(target)
            raise _engine_error(f"build the search index of collection {name!r}") from None
        try:
            if self._current.get(name) == generation:  # the commit point: the pointer
                pointer = self._base / name / _SPEC_FILE
                with pointer.open(encoding="utf-8") as fh:
                    doc = json.load(fh)
                _write_json_atomic(pointer, {**doc, "shard": target.name})
        except (OSError, ValueError):
            self._close_shard(target.name, fresh)
            self._remove_in_background(target)
            raise _engine_error(f"switch collection {name!r} to its built index") from None
        with self._lock:
            self._replaced.setdefault(generation, []).append((self._shards[generation], source))
            self._shards[generation] = fresh
            self._folders[generation] = target.name
            self._dirs[generation] = str(target)
        return True

    def optimize_in_place(self, generation: str) -> bool:
        """Builds the generation's indexes in this process (holding the GIL throughout)."""
        shard = self._shard(generation)
        # the optimizer writes merged, indexed segments before it drops the old ones
        self._disk.require(
            disk.folder_bytes(self._folder(generation), allocated=True),
            f"build the search index of {self._label(generation)}",
        )
        try:
            return bool(shard.optimize())
        except Exception:
            raise _engine_error(f"optimize {generation!r}") from None

    def _build(self, source: Path, target: Path, name: str) -> bool:
        """Runs the optimizer process (copy ``source`` to ``target``, build the copy);
        whether it built anything."""
        done = subprocess.run(
            [*OPTIMIZER, str(source), str(target)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            log.error(
                "building the search index of collection %s failed (exit %d): %s",
                name,
                done.returncode,
                done.stderr.strip()[-2000:],
            )
            raise BackendFailure(
                f"the vector store failed to build the search index of collection {name!r}",
                dependency=DEPENDENCY,
            )
        report = json.loads(done.stdout.strip().splitlines()[-1])
        log.info("collection %s: index build took %.1f s", name, report["seconds"])
        return bool(report["built"])

    def release_replaced(self, generation: str) -> None:
        """Closes the shards ``optimize`` replaced (call once no search uses them) and
        removes their folders in the background."""
        with self._lock:
            replaced = self._replaced.pop(generation, [])
        for shard, folder in replaced:
            self._close_shard(str(folder), shard)
            self._remove_in_background(folder)

    def _remove_in_background(self, folder: Path) -> None:
        """Removes ``folder`` on a thread of its own (``close`` waits for it). File by
        file, each removal waits for the GIL, which qdrant-edge's searches hold while
        they run: back-to-back searches made a synchronous removal take minutes. One
        left behind by a crash is an orphan that ``open`` removes."""
        thread = threading.Thread(
            target=shutil.rmtree,
            args=(folder,),
            kwargs={"ignore_errors": True},
            name="edge-remove",
            daemon=True,
        )
        with self._lock:
            self._removals = [t for t in self._removals if t.is_alive()]
            self._removals.append(thread)
        thread.start()

    # ------------------------------------------------------------ points

    def upsert(self, generation: str, points: Sequence[PointData]) -> None:
        shard = self._shard(generation)
        action = f"write to {self._label(generation)}"
        # all of it up front (nothing half-written for want of room), then each batch
        # again: other writers share the disk. Each batch is sized once.
        batches = [points[i : i + _UPSERT_BATCH] for i in range(0, len(points), _UPSERT_BATCH)]
        sizes = [disk.estimated_bytes(b) for b in batches]
        self._disk.require(sum(sizes), action)
        for n, (chunk, size) in enumerate(zip(batches, sizes, strict=True)):
            if n:
                self._disk.require(size, action)
            try:
                batch = [self._point(p) for p in chunk]
                shard.update(qe.UpdateOperation.upsert_points(batch))
            except Exception:
                raise _engine_error(action) from None

    def delete(self, generation: str, where: Where) -> None:
        flt = _filter(where)
        if flt is None:
            raise ValueError("refusing to delete with an empty filter")
        shard = self._shard(generation)
        # a delete writes a WAL record and deleted flags; it frees nothing until a build
        self._disk.require(disk.METADATA_WRITE_BYTES, f"delete from {self._label(generation)}")
        try:
            shard.update(qe.UpdateOperation.delete_points_by_filter(flt))
        except Exception:
            raise _engine_error(f"delete from {self._label(generation)}") from None

    def count(self, generation: str, where: Where) -> int:
        shard = self._shard(generation)
        try:
            return shard.count(qe.CountRequest(exact=True, filter=_filter(where)))
        except Exception:
            raise _engine_error(f"count {self._label(generation)}") from None

    def facet(self, generation: str, key: str, where: Where, limit: int) -> dict[str, int]:
        shard = self._shard(generation)
        try:
            response = shard.facet(
                qe.FacetRequest(key=key, limit=max(1, limit), exact=True, filter=_filter(where))
            )
        except Exception:
            raise _engine_error(f"read {self._label(generation)}") from None
        # exact facets list values whose points were all deleted with count 0
        return {str(hit.value): hit.count for hit in response.hits if hit.count > 0}

    def scroll(
        self, generation: str, where: Where, fields: Sequence[str]
    ) -> list[tuple[str, dict[str, Any]]]:
        shard = self._shard(generation)
        rows: list[tuple[str, dict[str, Any]]] = []
        offset: qe.PointId | None = None
        try:
            while True:
                records, offset = shard.scroll(
                    qe.ScrollRequest(
                        offset=offset,
                        limit=_SCROLL_PAGE,
                        filter=_filter(where),
                        with_payload=qe.PayloadSelector.Include(list(fields)),
                        with_vector=False,
                    )
                )
                rows.extend((str(r.id), dict(r.payload or {})) for r in records)
                if offset is None:
                    return rows
        except Exception:
            raise _engine_error(f"read {self._label(generation)}") from None

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
        named: qe.NamedVector = vector if isinstance(vector, list) else _sparse(vector)
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(named, using=using),
            filter=_filter(where),
            score_threshold=score_threshold,
            params=self._dense_params if using == DENSE_VECTOR else None,
            with_payload=False,
            with_vector=False,
        )
        shard = self._shard(generation)
        try:
            points = shard.query(request)
        except Exception:
            raise _engine_error(f"search {self._label(generation)} ({using} path)") from None
        # Every point id here is a UUID (``payload.point_id``); its 128-bit integer
        # hashes in C, where ``uuid.UUID.__hash__`` is Python code run ~1,000 times
        # per fused search.
        return [(p.id.int, p.score) for p in points]  # type: ignore[union-attr]

    def retrieve(
        self, generation: str, ids: Sequence[Hashable]
    ) -> dict[Hashable, Mapping[str, Any]]:
        wanted: list[qe.PointId] = [uuid.UUID(int=i) for i in ids]  # type: ignore[arg-type]
        shard = self._shard(generation)
        try:
            records = shard.retrieve(wanted, True, False)
        except Exception:
            raise _engine_error(f"read results from {self._label(generation)}") from None
        return {r.id.int: r.payload or {} for r in records}  # type: ignore[union-attr]

    def multi_vectors(
        self, generation: str, ids: Sequence[Hashable]
    ) -> dict[Hashable, list[list[float]]]:
        wanted: list[qe.PointId] = [uuid.UUID(int=i) for i in ids]  # type: ignore[arg-type]
        shard = self._shard(generation)
        try:
            records = shard.retrieve(wanted, False, [MULTI_VECTOR])
        except Exception:
            raise _engine_error(f"read vectors from {self._label(generation)}") from None
        found: dict[Hashable, list[list[float]]] = {}
        for r in records:
            named = r.vector if isinstance(r.vector, dict) else {}
            multi = named.get(MULTI_VECTOR)
            if isinstance(multi, list) and multi:
                found[r.id.int] = multi  # type: ignore[union-attr,assignment]
        return found

    # ------------------------------------------------------------ internals

    @property
    def _base(self) -> Path:
        return self._root / "collections"

    @staticmethod
    def _label(generation: str) -> str:
        return f"collection {generation.split('/', 1)[0]!r}"

    def _shard(self, generation: str) -> qe.EdgeShard:
        """The generation's open shard. Unavailable once its folder is gone: the engine
        would go on answering from files deleted under it (memory-mapped, so still
        readable) and writing into them, and a restart would come up without them.
        One ``stat`` per call: ~3 µs here, four per hybrid search (~0.5% of one)."""
        shard = self._shards.get(generation)
        if shard is None:
            raise Unavailable("the vector store is not open", dependency=DEPENDENCY)
        folder = self._dirs.get(generation)
        if folder is None:  # under the lock: an index build may be moving it
            with self._lock:
                folder = self._dirs.setdefault(generation, str(self._folder(generation)))
        if not os.path.isdir(folder):
            raise Unavailable(self._gone(folder), dependency=DEPENDENCY)
        return shard

    def _gone(self, folder: str) -> str:
        return (
            f"the data folder {folder} is gone (deleted or unmounted under the running "
            f"retriever; data path {self._root}): searches and writes fail until it is back"
        )

    def _load(self, directory: Path) -> StoredCollection:
        name = directory.name
        try:
            with (directory / _SPEC_FILE).open(encoding="utf-8") as fh:
                doc = json.load(fh)
            version = doc.get("format")
            if version not in (1, SPEC_FORMAT):
                raise ValueError(f"unsupported collection format {version!r}")
            spec, settings = spec_from_json(doc)
            dirname = str(doc["shard"])
            if not _SHARD_RE.fullmatch(dirname):
                raise ValueError(f"bad shard folder {dirname!r}")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            log.exception("unreadable %s in %s", _SPEC_FILE, directory)
            raise BackendFailure(
                f"collection {name!r} has an unreadable {_SPEC_FILE}", dependency=DEPENDENCY
            ) from None
        try:
            # The configuration is given again so that memory placement and
            # quantization follow this release's settings for shards made by older
            # ones (the engine checks it is compatible and records it).
            config = self._config(spec)
            shard = qe.EdgeShard.load(str(directory / dirname), config)
        except Exception:
            log.exception("loading shard %s failed", directory / dirname)
            raise BackendFailure(
                f"collection {name!r} could not be opened; another process may be using "
                f"{str(self._root)!r}",
                dependency=DEPENDENCY,
            ) from None
        gid = f"{name}/{dirname}"
        with self._lock:
            self._shards[gid] = shard
            self._current[name] = gid
        meta = {k: v for k, v in doc.items() if k != "shard"}
        if version == 1:
            meta = self._migrate(name, gid, shard, spec, settings)
        for other in directory.iterdir():
            if other.is_dir() and _SHARD_RE.fullmatch(other.name) and other.name != dirname:
                log.warning("removing %s: a generation no collection points to", other)
                shutil.rmtree(other, ignore_errors=True)
        return StoredCollection(gid, meta)

    def _migrate(
        self,
        name: str,
        gid: str,
        shard: qe.EdgeShard,
        spec: CollectionSpec,
        settings: Bm25Settings,
    ) -> dict[str, Any]:
        """Format 1 (no revisions): index ``revision`` and give every point one."""
        # every point's payload is rewritten
        self._disk.require(
            disk.folder_bytes(self._folder(gid), allocated=True), f"upgrade collection {name!r}"
        )
        try:
            shard.update(
                qe.UpdateOperation.create_field_index(REVISION_KEY, qe.PayloadSchemaType.Keyword)
            )
            shard.update(
                qe.UpdateOperation.set_payload_by_filter(
                    qe.Filter(must=[qe.IsEmptyCondition(REVISION_KEY)]),
                    {REVISION_KEY: LEGACY_REVISION},
                )
            )
        except Exception:
            raise _engine_error(f"upgrade collection {name!r}") from None
        meta: dict[str, Any] = {
            "format": SPEC_FORMAT,
            **spec_to_json(spec, settings),
            "revisions": {"pending": {}, "retired": {}},
        }
        self.save_meta(name, gid, meta, durable=True)
        log.info("collection %s upgraded to format %d", name, SPEC_FORMAT)
        return meta

    @staticmethod
    def _close_shard(label: str, shard: qe.EdgeShard) -> None:
        try:
            shard.flush()
        except Exception:
            log.exception("flushing %s failed", label)
        try:
            shard.close()
        except Exception:
            log.exception("closing %s failed", label)

    @staticmethod
    def _point(point: PointData) -> qe.Point:
        named: dict[str, qe.NamedVector] = {DENSE_VECTOR: point.dense}
        if point.sparse is not None:
            named[SPARSE_VECTOR] = _sparse(point.sparse)
        if point.bm25 is not None:
            named[BM25_VECTOR] = _sparse(point.bm25)
        if point.multi is not None:
            named[MULTI_VECTOR] = point.multi
        return qe.Point(point.id, named, dict(point.payload))


class EdgeStore(VersionedStore):
    """A ``VectorStore`` on qdrant-edge: one EdgeShard per collection generation under
    ``root``. One process owns ``root``."""

    def __init__(
        self,
        root: Path,
        *,
        bm25: Bm25Settings | None = None,
        quantize: bool = True,
        search_threads: int = DEFAULT_SEARCH_THREADS,
        min_free_bytes: int = disk.DEFAULT_MIN_FREE_MIB * disk.MIB,
    ) -> None:
        self._edge = EdgeEngine(
            Path(root),
            quantize=quantize,
            search_threads=search_threads,
            min_free_bytes=min_free_bytes,
        )
        super().__init__(self._edge, bm25=bm25)

    @property
    def root(self) -> Path:
        return self._edge.root

    def optimize(self, name: str, *, in_place: bool = False) -> bool:
        """Run the engine's segment optimizers (HNSW build, quantization, vacuum) now,
        blocking the caller. Returns whether anything was optimized.

        qdrant-edge has no background optimizer, so a freshly filled collection is
        searched by brute force until this runs (100k chunks: ~11 ms per hybrid search
        instead of ~5). The build runs in a child process on a copy of the shard
        (``EdgeEngine.optimize``): in this process the engine would hold Python's GIL
        for all of it (~30 s at 100k chunks on 2 cores) and nothing else would run.
        Searches go on from the original meanwhile and move to the built copy when it
        is ready; writes to the collection wait. The disk holds both copies until then.

        ``in_place`` builds in this process, holding it for the build but copying
        nothing: for start-up, when nothing is served yet and a copy would only cost
        time (a copy of 140k chunks, 600 MB, took 5.1 s when there was nothing to build).
        """
        coll = self._get(name)
        with self._writing(coll) as gen:
            if in_place:
                return self._edge.optimize_in_place(gen.id)
            try:
                built = self._edge.optimize(gen.id)
                if built:
                    # the built copy serves new searches; wait out the ones still
                    # running on the original before closing it
                    self._install(coll, gen, wait=True)
            finally:
                self._edge.release_replaced(gen.id)
        return built
