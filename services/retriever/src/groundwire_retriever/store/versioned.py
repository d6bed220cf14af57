"""``VersionedStore``: the ``VectorStore`` logic on any ``Engine``, with atomic writes.

Two kinds of version make writes atomic for readers:

* A **revision** per source. Every point carries the payload key ``revision``. A
  re-ingest writes the source's new chunks under a fresh revision that readers do not
  see (it is *pending*), then switches in one step: the new revision becomes visible
  and the source's previous revisions are *retired* (hidden), after which their
  points are deleted. Searches exclude pending and retired revisions with one
  ``must_not`` condition, which is absent when nothing is in flight, so steady-state
  searches carry no extra filter.
* A **generation** per collection. A full re-index builds a new physical collection
  (an EdgeShard folder, or a Qdrant collection behind an alias) and switches the
  collection to it at once; the old one serves until then, and on failure.

Readers pin a *view* (the current generation and its hidden revisions) for a whole
search, so its paths and the final payload read agree. A writer that changes what is
visible installs a new view and waits until no reader holds an older one before it
writes hidden points or deletes retired ones (a grace period, as in RCU). Hence a
reader sees a source's old chunk set or its new one: never both, never neither.

What must survive a crash is saved in the generation's metadata (the collection's
JSON for the embedded engine, the Qdrant collection's metadata for a server) before
it matters: a pending revision before its first point is written, so a killed
ingest's points are known orphans and are deleted on open; the switch itself (the
commit point); retired revisions until their points are gone. The current
generation is a durable pointer (JSON written by rename, or a Qdrant alias), so a
killed re-index leaves the old generation current and its own is removed on open.

Without ``leases`` one process writes a collection at a time and the views live in
that process (the embedded engine). With ``leases`` (store/replicas.py) several
replicas share one Qdrant server: writes take the collection's lease and save the
revision state fenced by its token; every replica re-reads the state every
``refresh_s`` and refuses reads (Unavailable) once it is ``stale_after_s`` old; and a
writer's grace period also waits ``grace_s``, so no replica can still hold a view
that shows points about to be written under a hidden revision or deleted.

Why one module of this size: the views, revisions, generations and the grace period
(and, with replicas, the adoption of the shared state into those views) are one
protocol whose invariants (what a reader may see, when a point may go) hold only
together. The lease and the shared state's storage live in ``replicas``; validation,
payload layout, BM25 and fusion live in their own modules.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import sys
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import qdrant_edge as qe

from groundwire_core.errors import (
    AlreadyExists,
    BackendFailure,
    GroundwireError,
    InsufficientStorage,
    InvalidInput,
    NotFound,
    Unavailable,
)
from groundwire_core.identity import PUBLIC
from groundwire_retriever.domain import (
    Chunk,
    ChunkVectors,
    CollectionSpec,
    CollectionStats,
    FieldFilter,
    Hit,
    PathReport,
    SearchPath,
    SearchQuery,
    SearchResult,
    SourceChunks,
    SourcePage,
    SourceSummary,
    SparseVec,
)
from groundwire_retriever.fusion import PATH_ORDER, fuse
from groundwire_retriever.grouping import group_by_source
from groundwire_retriever.late_interaction import multi_values, rescore, widened
from groundwire_retriever.store.base import StagedSource
from groundwire_retriever.store.bm25 import Bm25Settings, bm25_document_text
from groundwire_retriever.store.engine import Engine, PointData, StoredCollection, Where
from groundwire_retriever.store.payload import (
    ACCESS_KEY,
    CHUNK_FIELDS,
    REVISION_KEY,
    SPEC_FORMAT,
    VECTOR_NAMES,
    chunk_from_payload,
    chunk_payload,
    payload_key,
    point_id,
    spec_from_json,
    spec_to_json,
)
from groundwire_retriever.store.replicas import SharedState, WriteLeases
from groundwire_retriever.store.validation import (
    canonical_id,
    check_model,
    dense_values,
    sparse_values,
    validate_collection_name,
    validate_query,
    validate_spec,
)

log = logging.getLogger(__name__)

_REVISIONS_PER_SOURCE = 1_000  # facet limit: one normally, a few while ingests overlap
MAX_SOURCES_PAGE = 1_000
MAX_SOURCE_CHUNKS = 10_000
_SUMMARY_FIELDS = (
    "source_id",
    "title",
    "url",
    "doc_type",
    "chunk_index",
    "content_hash",
    "created_at",
)


def _new_revision() -> str:
    return uuid.uuid4().hex[:16]


def _meta(
    spec: CollectionSpec,
    bm25: Bm25Settings,
    pending: Mapping[str, str],
    retired: Mapping[str, str],
) -> dict[str, Any]:
    return {
        "format": SPEC_FORMAT,
        **spec_to_json(spec, bm25),
        "revisions": {"pending": dict(pending), "retired": dict(retired)},
    }


def _revisions(meta: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """The (pending, retired) revisions ``_meta`` recorded."""
    revisions = meta.get("revisions") or {}
    pending = {str(k): str(v) for k, v in (revisions.get("pending") or {}).items()}
    retired = {str(k): str(v) for k, v in (revisions.get("retired") or {}).items()}
    return pending, retired


class _Generation:
    """One physical collection and its revision state (guarded by the collection's
    write lock)."""

    def __init__(
        self,
        gid: str,
        spec: CollectionSpec,
        bm25_settings: Bm25Settings,
        pending: Mapping[str, str] | None = None,
        retired: Mapping[str, str] | None = None,
    ) -> None:
        self.id = gid
        self.spec = spec
        self.bm25_settings = bm25_settings
        self.bm25: qe.Bm25 = bm25_settings.model()
        self.pending: dict[str, str] = dict(pending or {})
        """revision -> source_id: written or being written, not yet visible."""
        self.retired: dict[str, str] = dict(retired or {})
        """revision -> source_id: replaced, hidden, points not yet deleted."""

    def meta(self) -> dict[str, Any]:
        return _meta(self.spec, self.bm25_settings, self.pending, self.retired)

    def hidden(self) -> tuple[str, ...]:
        return tuple(sorted({*self.pending, *self.retired}))

    def visible(self) -> Where:
        hidden = self.hidden()
        return Where(must_not=((REVISION_KEY, hidden),)) if hidden else Where()


class _View:
    """What readers see: a generation and the revisions hidden in it. Immutable;
    compared by identity."""

    __slots__ = ("generation", "where")

    def __init__(self, generation: _Generation) -> None:
        self.generation = generation
        self.where = generation.visible()


class _Collection:
    def __init__(self, name: str, generation: _Generation) -> None:
        self.name = name
        self.cond = threading.Condition()
        self.view = _View(generation)
        self.readers: dict[_View, int] = {}
        self.write_lock = threading.Lock()
        self.building: _Generation | None = None
        self.closed = False
        self.refreshed = time.monotonic()  # replicas: when the shared state was last read

    @property
    def current(self) -> _Generation:
        return self.view.generation


class VersionedStore:
    """A ``VectorStore`` over an ``Engine``; see the module docstring for how writes
    become visible."""

    def __init__(
        self, engine: Engine, *, bm25: Bm25Settings | None = None, leases: WriteLeases | None = None
    ) -> None:
        self._engine = engine
        self._leases = leases
        self._refresher: threading.Thread | None = None
        self._stop_refresh = threading.Event()
        self._bm25_settings = bm25 or Bm25Settings()
        self._lock = threading.Lock()  # guards the dict below
        self._catalog_lock = threading.Lock()  # serialises open, close, create, drop
        self._collections: dict[str, _Collection] | None = None

    @property
    def engine(self) -> str:
        return self._engine.kind

    @property
    def location(self) -> str:
        return self._engine.location

    # ------------------------------------------------------------ lifecycle

    def open(self) -> None:
        with self._catalog_lock:
            if self._collections is not None:
                return
            started = time.monotonic()
            stored = self._engine.open()
            loaded: dict[str, _Collection] = {}
            try:
                states: dict[str, SharedState] = {}
                if self._leases is not None:
                    self._leases.ensure()
                    states = self._leases.states()
                for name, found in sorted(stored.items()):
                    generation = self._generation(name, _shared(found, states.get(name)))
                    if self._leases is None:  # with replicas, pending may be another's
                        self._recover(name, generation)
                    loaded[name] = _Collection(name, generation)
                    loaded[name].refreshed = started
            except BaseException:
                self._engine.close()
                raise
            with self._lock:
                self._collections = loaded
            self._start_refresh()
        log.info(
            "%s store open at %s: %d collection(s)",
            self._engine.kind,
            self._engine.location,
            len(loaded),
        )

    def close(self) -> None:
        with self._catalog_lock:
            with self._lock:
                if self._collections is None:
                    return
                collections, self._collections = self._collections, None
            self._stop_refresh.set()
            if self._refresher is not None:
                self._refresher.join()
                self._refresher = None
            for coll in collections.values():
                self._shut(coll)
            self._engine.close()

    def ping(self) -> None:
        self._require_open()
        self._engine.ping()

    def storage_warning(self) -> str:
        return self._engine.storage_warning()

    # ------------------------------------------------------------ collections

    def create_collection(self, spec: CollectionSpec) -> None:
        validate_spec(spec)
        with self._catalog_lock:
            with self._lock:
                if spec.name in self._require_open():
                    raise AlreadyExists(f"collection {spec.name!r} already exists")
            meta = _meta(spec, self._bm25_settings, {}, {})
            gid = self._engine.create(spec.name, spec, meta)
            try:
                self._engine.make_current(spec.name, gid, meta)
            except BaseException:
                self._drop_quietly(spec.name, gid)
                raise
            generation = _Generation(gid, spec, self._bm25_settings)
            with self._lock:
                self._require_open()[spec.name] = _Collection(spec.name, generation)
        log.info("created collection %s (%d dims)", spec.name, spec.dense_dims)

    def list_collections(self) -> list[CollectionSpec]:
        with self._lock:
            collections = self._require_open()
            return [collections[name].current.spec for name in sorted(collections)]

    def describe(self, name: str, *, access: Sequence[str] | None = None) -> CollectionStats:
        with self._reading(name) as view:
            gen = view.generation
            where = _allowed(view.where, access)
            chunks = self._engine.count(gen.id, where)
            sources = (
                len(self._engine.facet(gen.id, "source_id", where, limit=chunks)) if chunks else 0
            )
        return CollectionStats(spec=gen.spec, chunks=chunks, sources=sources)

    def drop_collection(self, name: str) -> None:
        validate_collection_name(name)
        with self._catalog_lock:
            with self._lock:
                coll = self._require_open().pop(name, None)
            if coll is None:
                raise NotFound(f"collection {name!r} does not exist")
            self._shut(coll)
            generations = [coll.current.id]
            if coll.building is not None:
                generations.append(coll.building.id)
            self._engine.drop(name, generations)
        log.info("dropped collection %s", name)

    # ------------------------------------------------------------ writes

    def upsert(self, name: str, chunks: Sequence[tuple[Chunk, ChunkVectors]]) -> None:
        coll = self._get(name)
        with self._writing(coll) as gen:
            sources = sorted({chunk.source_id for chunk, _ in chunks if chunk.source_id})
            revisions = self._current_revisions(gen, sources)
            points = self._points(
                gen, chunks, lambda source: revisions.setdefault(source, _new_revision())
            )
            if points:
                self._engine.upsert(gen.id, points)

    def stage_source(
        self,
        name: str,
        source_id: str,
        chunks: Sequence[tuple[Chunk, ChunkVectors]],
        *,
        generation: str | None = None,
    ) -> StagedSource:
        if not source_id:
            raise InvalidInput("source_id must not be empty")
        for i, (chunk, _) in enumerate(chunks):
            if chunk.source_id != source_id:
                raise InvalidInput(
                    f"chunk {i} belongs to source {chunk.source_id!r}, not {source_id!r}"
                )
        coll = self._get(name)
        revision = _new_revision()
        with self._writing(coll):
            gen = self._target(coll, generation)
            points = self._points(gen, chunks, lambda _source: revision)
            gen.pending[revision] = source_id
            try:
                # durable before the first point lands: a crash leaves known orphans
                self._save(coll, gen, durable=True)
                self._show(coll, gen)
                if points:
                    self._engine.upsert(gen.id, points)
            except BaseException:
                self._forget(coll, gen, [revision])
                raise
        return StagedSource(name, source_id, gen.id, revision, len(points))

    def publish_source(self, staged: StagedSource) -> None:
        coll = self._get(staged.collection)
        with self._writing(coll):
            gen = self._live(coll, staged.generation)
            if gen.pending.get(staged.revision) != staged.source_id:
                raise InvalidInput(
                    f"nothing is staged for source {staged.source_id!r} under revision "
                    f"{staged.revision!r} (already published or discarded)"
                )
            old = self._revisions_of(gen, staged.source_id)
            del gen.pending[staged.revision]
            gen.retired.update(dict.fromkeys(old, staged.source_id))
            try:
                self._save(coll, gen, durable=True)
            except BaseException:
                gen.pending[staged.revision] = staged.source_id
                for revision in old:
                    gen.retired.pop(revision, None)
                raise
            self._show(coll, gen)  # the switch: waits for readers of the old view
            self._purge(coll, gen)

    def discard_source(self, staged: StagedSource) -> None:
        coll = self._find(staged.collection)
        if coll is None:
            return
        with self._write_locked(coll) as is_open:
            if not is_open:
                return
            for gen in (coll.current, coll.building):
                if gen is not None and gen.id == staged.generation:
                    if staged.revision in gen.pending:
                        self._forget(coll, gen, [staged.revision])
                    return

    def delete_by_source(self, name: str, source_id: str) -> int:
        coll = self._get(name)
        if not source_id:
            raise InvalidInput("source_id must not be empty")
        with self._writing(coll) as gen:
            old = self._revisions_of(gen, source_id)
            removed = sum(old.values())
            if not removed:
                return 0
            gen.retired.update(dict.fromkeys(old, source_id))
            try:
                self._save(coll, gen, durable=True)
            except BaseException:  # not retired after all (a full disk refuses the save)
                for revision in old:
                    gen.retired.pop(revision, None)
                raise
            self._show(coll, gen)
            self._purge(coll, gen)
        return removed

    def source_hashes(self, name: str, source_id: str) -> dict[str, str]:
        if not source_id:
            raise InvalidInput("source_id must not be empty")
        with self._reading(name) as view:
            rows = self._engine.scroll(
                view.generation.id,
                view.where.also("source_id", [source_id]),
                ["chunk_id", "content_hash"],
            )
        return {str(p.get("chunk_id") or pid): str(p.get("content_hash", "")) for pid, p in rows}

    # ------------------------------------------------------------ reading sources

    def list_sources(
        self,
        name: str,
        *,
        page_token: str = "",
        limit: int = 100,
        access: Sequence[str] | None = None,
    ) -> SourcePage:
        if not 1 <= limit <= MAX_SOURCES_PAGE:
            raise InvalidInput(f"limit must be between 1 and {MAX_SOURCES_PAGE}, got {limit}")
        with self._reading(name) as view:
            gen = view.generation
            where = _allowed(view.where, access)
            chunks = self._engine.count(gen.id, where)
            counts = self._engine.facet(gen.id, "source_id", where, limit=chunks) if chunks else {}
            after = sorted(source for source in counts if source > page_token)
            page = after[:limit]
            rows = (
                self._engine.scroll(gen.id, where.also("source_id", page), _SUMMARY_FIELDS)
                if page
                else []
            )
        by_source: dict[str, list[dict[str, Any]]] = {}
        for _, payload in rows:
            by_source.setdefault(str(payload.get("source_id", "")), []).append(payload)
        return SourcePage(
            sources=tuple(_summary(source, by_source.get(source, [])) for source in page),
            next_page_token=page[-1] if len(after) > limit else "",
            total=len(counts),
        )

    def read_source(
        self,
        name: str,
        source_id: str,
        *,
        offset: int = 0,
        limit: int = 1000,
        access: Sequence[str] | None = None,
    ) -> SourceChunks:
        if not source_id:
            raise InvalidInput("source_id must not be empty")
        if offset < 0:
            raise InvalidInput(f"offset must not be negative, got {offset}")
        if not 1 <= limit <= MAX_SOURCE_CHUNKS:
            raise InvalidInput(f"limit must be between 1 and {MAX_SOURCE_CHUNKS}, got {limit}")
        with self._reading(name) as view:
            rows = self._engine.scroll(
                view.generation.id,
                _allowed(view.where, access).also("source_id", [source_id]),
                CHUNK_FIELDS,
            )
        if not rows:
            raise NotFound(f"collection {name!r} has no source {source_id!r}")
        chunks = sorted(
            (chunk_from_payload(payload) for _, payload in rows),
            key=lambda chunk: (chunk.chunk_index, chunk.chunk_id),
        )
        return SourceChunks(tuple(chunks[offset : offset + limit]), len(chunks))

    # ------------------------------------------------------------ full re-index

    def begin_reindex(self, spec: CollectionSpec) -> str:
        validate_spec(spec)
        coll = self._get(spec.name)
        with self._writing(coll):
            if coll.building is not None:
                raise AlreadyExists(f"a full re-index of collection {spec.name!r} is running")
            meta = _meta(spec, self._bm25_settings, {}, {})
            gid = self._engine.create(spec.name, spec, meta)
            coll.building = _Generation(gid, spec, self._bm25_settings)
        log.info("collection %s: building generation %s", spec.name, gid)
        return gid

    def commit_reindex(self, name: str, generation: str) -> None:
        coll = self._get(name)
        with self._writing(coll) as old:
            gen = coll.building
            if gen is None or gen.id != generation:
                raise NotFound(f"no re-index {generation!r} of collection {name!r} is running")
            if gen.pending:  # staged and never published: not part of the new generation
                self._forget(coll, gen, list(gen.pending))
            self._purge(coll, gen)
            if self._leases is not None:  # fenced: a writer that lost its lease stops here
                self._leases.save(name, gen.id, gen.meta())
            self._engine.make_current(name, gen.id, gen.meta())  # the commit point
            coll.building = None
            self._install(coll, gen, wait=True)
            self._grace()  # other replicas may still read the old generation
            self._drop_quietly(name, old.id)
        log.info("collection %s: switched to generation %s", name, generation)

    def abort_reindex(self, name: str, generation: str) -> None:
        coll = self._find(name)
        if coll is None:
            return
        with coll.write_lock:
            gen = coll.building
            if coll.closed or gen is None or gen.id != generation:
                return
            coll.building = None
            self._drop_quietly(name, gen.id)
        log.info("collection %s: abandoned generation %s", name, generation)

    def optimize(self, name: str, *, in_place: bool = False) -> bool:
        """Nothing to do by default: a Qdrant server optimizes in the background.
        ``EdgeStore`` overrides it (qdrant-edge has no background optimizer)."""
        self._get(name)
        return False

    # ------------------------------------------------------------ search

    def _hides_terms(self, generation: str, where: Where, access: Sequence[str] | None) -> bool:
        """Whether a caller holding ``access`` would be ranked by BM25 statistics over
        chunks it cannot see (issue #31, item 9): the engine applies the IDF modifier
        at query time over the whole shard, not over the filtered points, so a hidden
        document's words move a visible one's score. Two exact counts on the indexed
        access field; nothing for a caller that sees everything."""
        if access is None:
            return False
        return self._engine.count(generation, _allowed(where, access)) < self._engine.count(
            generation, where
        )

    def search(self, name: str, query: SearchQuery) -> SearchResult:
        validate_query(query)
        ranked: dict[SearchPath, list[tuple[Hashable, float]]] = {}
        reports: list[PathReport] = []
        with self._reading(name) as view:
            gen = view.generation
            check_model(gen.spec, query.embedder_model, "the query's vectors")
            where = _allowed(
                Where(self._user_filter(gen.spec, query.filters), view.where.must_not),
                query.access,
            )
            for path in PATH_ORDER:
                if path not in query.paths:
                    continue
                request = self._path_vector(gen, path, query)
                if path is SearchPath.BM25 and self._hides_terms(gen.id, view.where, query.access):
                    request = HIDDEN_TERMS
                if isinstance(request, str):
                    reports.append(PathReport(path, ms=0.0, hits=0, skipped=True, reason=request))
                    continue
                vector, threshold = request
                started = time.perf_counter()
                found = self._engine.query(
                    gen.id,
                    VECTOR_NAMES[path],
                    vector,
                    limit=query.path_limit,
                    where=where,
                    score_threshold=threshold,
                )
                ms = (time.perf_counter() - started) * 1000.0
                ranked[path] = found
                reports.append(PathReport(path, ms=ms, hits=len(found)))
            # by document: every candidate is fused and grouped, then ``limit`` sources kept
            grouped = query.group_by_source
            every = replace(query, limit=sys.maxsize, drop_off=None) if grouped else query
            fused = fuse(ranked, widened(query, every))
            fused, late = rescore(self._engine, gen.id, gen.spec, fused, query)
            payloads = self._engine.retrieve(gen.id, [f.point_id for f in fused]) if fused else {}
        hits = tuple(
            Hit(
                chunk=chunk_from_payload(payloads[f.point_id]),
                score=f.score,
                path_ranks=f.ranks,
                path_scores=f.scores,
            )
            for f in fused
            if f.point_id in payloads
        )
        if grouped:
            hits = tuple(group_by_source(hits, query.limit, query.drop_off))
        return SearchResult(hits=hits, paths=tuple(reports), late_interaction=late)

    # ------------------------------------------------------------ internals: state

    def _require_open(self) -> dict[str, _Collection]:
        if self._collections is None:
            raise Unavailable("the vector store is not open", dependency=self._engine.dependency)
        return self._collections

    def _find(self, name: str) -> _Collection | None:
        with self._lock:
            return None if self._collections is None else self._collections.get(name)

    def _get(self, name: str) -> _Collection:
        validate_collection_name(name)
        with self._lock:
            coll = self._require_open().get(name)
        if coll is None:
            raise NotFound(f"collection {name!r} does not exist")
        return coll

    @contextmanager
    def _reading(self, name: str) -> Iterator[_View]:
        coll = self._get(name)
        self._check_fresh(coll)
        read_at = coll.refreshed
        with coll.cond:
            if coll.closed:
                raise NotFound(f"collection {name!r} does not exist")
            view = coll.view
            coll.readers[view] = coll.readers.get(view, 0) + 1
        try:
            yield view
            self._check_within_grace(name, read_at)
        finally:
            with coll.cond:
                left = coll.readers[view] - 1
                if left:
                    coll.readers[view] = left
                else:
                    del coll.readers[view]
                    coll.cond.notify_all()

    @contextmanager
    def _writing(self, coll: _Collection) -> Iterator[_Generation]:
        with self._write_locked(coll) as is_open:
            if not is_open:
                raise NotFound(f"collection {coll.name!r} does not exist")
            yield coll.current

    @contextmanager
    def _write_locked(self, coll: _Collection) -> Iterator[bool]:
        """Hold ``coll``'s write lock and, with replicas, its lease, having adopted the
        shared state (another replica may have written since the last refresh).
        Yields whether the collection is still open (dropped: nothing adopted)."""
        lease = self._leases.holding(coll.name) if self._leases else contextlib.nullcontext(0)
        with lease, coll.write_lock:
            if not coll.closed and self._leases is not None:
                self._pull(coll)
            yield not coll.closed

    # ------------------------------------------------------------ internals: replicas

    def _save(self, coll: _Collection, gen: _Generation, *, durable: bool) -> None:
        """Persist ``gen``'s revision state; with replicas, first the shared state,
        fenced by this replica's lease (Unavailable once another took it over)."""
        if self._leases is not None and gen is coll.current:
            self._leases.save(coll.name, gen.id, gen.meta())
        self._engine.save_meta(coll.name, gen.id, gen.meta(), durable=durable)

    def _grace(self) -> None:
        """With replicas: wait until every replica still serving has re-read the state."""
        if self._leases is not None:
            time.sleep(self._leases.policy.grace_s)

    def _check_within_grace(self, name: str, read_at: float) -> None:
        """With replicas: a read that outlasted the grace period counted from when its
        view's state was read may have met points a writer deleted or wrote since;
        refuse its result rather than return it."""
        if self._leases is None:
            return
        if time.monotonic() - read_at > self._leases.policy.grace_s:
            raise Unavailable(
                f"collection {name!r}: the read outlasted the replicas' grace period "
                f"({self._leases.policy.grace_s:g} s); retry it",
                dependency=self._engine.dependency,
            )

    def _check_fresh(self, coll: _Collection) -> None:
        if self._leases is None:
            return
        age = time.monotonic() - coll.refreshed
        if age > self._leases.policy.stale_after_s:
            raise Unavailable(
                f"collection {coll.name!r}: this replica has not read the shared state for "
                f"{age:.1f} s and stops serving the collection until it can",
                dependency=self._engine.dependency,
            )

    def _pull(self, coll: _Collection) -> None:
        """Adopt the collection's shared state now (caller holds its write lock)."""
        assert self._leases is not None
        started = time.monotonic()
        found = self._leases.catalog().get(coll.name)
        if found is not None:
            self._adopt(coll, _shared(found, self._leases.states().get(coll.name)), started)

    def _adopt(self, coll: _Collection, found: StoredCollection, read_at: float) -> None:
        """Make ``found`` (read from Qdrant starting at monotonic ``read_at``) what
        readers of ``coll`` see (caller holds its write lock)."""
        gen = coll.current
        if found.generation == gen.id:  # the usual case: no new BM25 model to build
            gen.pending, gen.retired = _revisions(found.meta)
        else:
            gen = self._generation(coll.name, found)
        self._install(coll, gen, wait=False)
        # from before the read: a writer's grace period runs from its save, which
        # may have come just after the read started
        coll.refreshed = read_at

    def _start_refresh(self) -> None:
        if self._leases is None:
            return
        self._stop_refresh.clear()
        self._refresher = threading.Thread(
            target=self._refresh_loop, name="replica-state", daemon=True
        )
        self._refresher.start()

    def _refresh_loop(self) -> None:
        assert self._leases is not None
        while not self._stop_refresh.wait(self._leases.policy.refresh_s):
            try:
                self._refresh()
            except GroundwireError as error:  # readers stop once the view is too old
                log.warning("could not read the shared collection state: %s", error)
            except Exception:  # the same, and the loop must outlive any surprise
                log.exception("could not adopt the shared collection state")

    def _refresh(self) -> None:
        """Adopt every collection's shared state; add collections other replicas
        created, forget the ones they dropped."""
        assert self._leases is not None
        started = time.monotonic()
        stored = self._leases.catalog()
        states = self._leases.states()
        with self._lock:
            if self._collections is None:
                return
            known = dict(self._collections)
            for name, found in stored.items():
                if name not in known:
                    generation = self._generation(name, _shared(found, states.get(name)))
                    self._collections[name] = _Collection(name, generation)
                    self._collections[name].refreshed = started
            for name in set(known) - set(stored):
                if known[name].write_lock.acquire(blocking=False):  # not one being created
                    try:
                        self._collections.pop(name, None)
                    finally:
                        known[name].write_lock.release()
        for name, coll in known.items():
            latest = stored.get(name)
            if latest is None:
                continue
            if not coll.write_lock.acquire(blocking=False):
                if self._leases.held(name):  # a local writer: no other replica can write
                    coll.refreshed = time.monotonic()
                continue
            try:
                if not coll.closed:
                    self._adopt(coll, _shared(latest, states.get(name)), started)
            finally:
                coll.write_lock.release()

    @staticmethod
    def _install(coll: _Collection, gen: _Generation, *, wait: bool) -> None:
        """Make ``gen`` with its current hidden revisions what new readers see; with
        ``wait``, return once no reader holds an older view."""
        view = _View(gen)
        with coll.cond:
            coll.view = view
            if wait:
                while any(v is not view for v in coll.readers):
                    coll.cond.wait()

    def _show(self, coll: _Collection, gen: _Generation, *, wait: bool = True) -> None:
        if gen is coll.current:
            self._install(coll, gen, wait=wait)
            if wait:
                self._grace()

    @staticmethod
    def _shut(coll: _Collection) -> None:
        with coll.write_lock, coll.cond:
            coll.closed = True
            while coll.readers:
                coll.cond.wait()

    def _target(self, coll: _Collection, generation: str | None) -> _Generation:
        if generation is None or generation == coll.current.id:
            return coll.current
        if coll.building is not None and coll.building.id == generation:
            return coll.building
        raise NotFound(f"no re-index {generation!r} of collection {coll.name!r} is running")

    @staticmethod
    def _live(coll: _Collection, generation: str) -> _Generation:
        for gen in (coll.current, coll.building):
            if gen is not None and gen.id == generation:
                return gen
        raise Unavailable(
            f"collection {coll.name!r} was re-indexed while this source was being written; "
            "ingest it again"
        )

    def _generation(self, name: str, found: StoredCollection) -> _Generation:
        try:
            spec, settings = spec_from_json(found.meta)
            pending, retired = _revisions(found.meta)
        except (KeyError, TypeError, ValueError, AttributeError):
            log.exception("unreadable metadata of collection %s", name)
            raise BackendFailure(
                f"collection {name!r} has unreadable metadata", dependency=self._engine.dependency
            ) from None
        if spec.name != name:
            raise BackendFailure(
                f"collection {name!r} holds the spec of {spec.name!r}",
                dependency=self._engine.dependency,
            )
        return _Generation(found.generation, spec, settings, pending, retired)

    def _recover(self, name: str, gen: _Generation) -> None:
        """Delete the points of revisions a crash left pending (an ingest that never
        switched) or retired (a switch whose cleanup never ran)."""
        stale = sorted({*gen.pending, *gen.retired})
        if not stale:
            return
        try:
            self._engine.delete(gen.id, Where(must=((REVISION_KEY, tuple(stale)),)))
        except InsufficientStorage as error:  # they stay hidden; the next open retries
            log.warning("collection %s: cleanup after an interrupted ingest waits: %s", name, error)
            return
        gen.pending.clear()
        gen.retired.clear()
        self._engine.save_meta(name, gen.id, gen.meta(), durable=True)
        log.warning(
            "collection %s: removed %d revision(s) left by an interrupted ingest", name, len(stale)
        )

    def _forget(self, coll: _Collection, gen: _Generation, revisions: Sequence[str]) -> None:
        """Delete pending revisions' points, then stop hiding them. Logs failures: the
        revisions stay pending (hidden) and are removed on the next open."""
        try:
            self._engine.delete(gen.id, Where(must=((REVISION_KEY, tuple(revisions)),)))
            for revision in revisions:
                gen.pending.pop(revision, None)
            self._save(coll, gen, durable=False)
        except GroundwireError:
            log.exception("collection %s: could not remove staged revisions", coll.name)
        self._show(coll, gen, wait=False)

    def _purge(self, coll: _Collection, gen: _Generation) -> None:
        """Delete every retired revision's points, then stop hiding them. Logs
        failures: they stay hidden and are retried by the next purge or open."""
        if not gen.retired:
            return
        revisions = tuple(sorted(gen.retired))
        try:
            self._engine.delete(gen.id, Where(must=((REVISION_KEY, revisions),)))
            for revision in revisions:
                gen.retired.pop(revision, None)
            self._save(coll, gen, durable=False)
        except GroundwireError:
            log.exception("collection %s: could not delete replaced chunks", coll.name)
        self._show(coll, gen, wait=False)

    def _drop_quietly(self, name: str, generation: str) -> None:
        try:
            self._engine.drop_generation(name, generation)
        except GroundwireError:
            log.exception("collection %s: generation %s left behind", name, generation)

    def _current_revisions(self, gen: _Generation, sources: Sequence[str]) -> dict[str, str]:
        """Each listed source's visible revision (its most common one, should a source
        have several); sources with no chunks are left out. One read for all."""
        if not sources:
            return {}
        counts: dict[str, dict[str, int]] = {}
        rows = self._engine.scroll(
            gen.id, gen.visible().also("source_id", sources), ["source_id", REVISION_KEY]
        )
        for _, payload in rows:
            per_source = counts.setdefault(str(payload.get("source_id", "")), {})
            revision = str(payload.get(REVISION_KEY, ""))
            per_source[revision] = per_source.get(revision, 0) + 1
        return {source: max(revs, key=lambda r: (revs[r], r)) for source, revs in counts.items()}

    def _revisions_of(self, gen: _Generation, source_id: str) -> dict[str, int]:
        """The source's visible revisions with their point counts (one, normally)."""
        return self._engine.facet(
            gen.id,
            REVISION_KEY,
            gen.visible().also("source_id", [source_id]),
            limit=_REVISIONS_PER_SOURCE,
        )

    # ------------------------------------------------------------ internals: points

    @staticmethod
    def _points(
        gen: _Generation,
        chunks: Sequence[tuple[Chunk, ChunkVectors]],
        revision_of: Callable[[str], str],
    ) -> list[PointData]:
        spec = gen.spec
        points: list[PointData] = []
        for i, (chunk, vectors) in enumerate(chunks):
            where = f"chunk {i}"
            chunk_id = canonical_id(chunk.chunk_id, where)
            if not chunk.source_id:
                raise InvalidInput(f"{where} ({chunk_id}) has an empty source_id")
            if vectors.dense is None:
                raise InvalidInput(
                    f"{where} ({chunk_id}) has no dense vector; collection {spec.name!r} "
                    f"expects {spec.dense_dims} dimensions"
                )
            dense = dense_values(
                vectors.dense, spec.dense_dims, f"the dense vector of {where} ({chunk_id})"
            )
            sparse: SparseVec | None = None
            if vectors.sparse is not None:
                if not spec.learned_sparse:
                    raise InvalidInput(
                        f"{where} ({chunk_id}) has a sparse vector but collection "
                        f"{spec.name!r} was created without learned sparse vectors"
                    )
                sparse = sparse_values(vectors.sparse, f"the sparse vector of {where} ({chunk_id})")
            bm25: SparseVec | None = None
            if spec.bm25:
                embedded = gen.bm25.embed_document(bm25_document_text(chunk))
                if embedded.indices:
                    bm25 = SparseVec(tuple(embedded.indices), tuple(embedded.values))
            revision = revision_of(chunk.source_id)
            payload = chunk_payload(chunk, chunk_id)
            payload[REVISION_KEY] = revision
            payload[ACCESS_KEY] = list(chunk.access or spec.default_access)
            multi = None
            if vectors.multi is not None:
                what = f"the multi-vector of {where} ({chunk_id})"
                multi = multi_values(vectors.multi, spec.multi_vector_dims, what)
            points.append(
                PointData(point_id(chunk_id, revision), dense, sparse, bm25, payload, multi)
            )
        return points

    @staticmethod
    def _user_filter(
        spec: CollectionSpec, filters: Sequence[FieldFilter]
    ) -> tuple[tuple[str, tuple[str, ...]], ...]:
        conditions: list[tuple[str, tuple[str, ...]]] = []
        for f in filters:
            if f.field not in spec.filterable:
                allowed = ", ".join(spec.filterable) or "none"
                raise InvalidInput(
                    f"collection {spec.name!r} cannot filter on {f.field!r}; "
                    f"filterable fields: {allowed}"
                )
            if not f.any_of:
                raise InvalidInput(f"the filter on {f.field!r} lists no values")
            conditions.append((payload_key(f.field), tuple(f.any_of)))
        return tuple(conditions)

    @staticmethod
    def _path_vector(
        gen: _Generation, path: SearchPath, query: SearchQuery
    ) -> tuple[list[float] | SparseVec, float | None] | str:
        """The query vector and score threshold of one path, or why it is skipped."""
        spec = gen.spec
        if path is SearchPath.DENSE:
            if query.dense is None:
                return "the query has no dense vector"
            dense = dense_values(query.dense, spec.dense_dims, "the dense query vector")
            return dense, query.dense_floor
        if path is SearchPath.SPARSE:
            if not spec.learned_sparse:
                return f"collection {spec.name!r} has no learned sparse vectors"
            if query.sparse is None:
                return "the query has no sparse vector"
            sparse = sparse_values(query.sparse, "the sparse query vector")
            if sparse is None:
                return "the query's sparse vector is empty"
            return sparse, None
        if not spec.bm25:
            return f"collection {spec.name!r} has no BM25 index"
        if not query.text.strip():
            return "the query has no text"
        embedded = gen.bm25.embed_query(query.text)
        if not embedded.indices:
            return "the query text has no searchable terms (only stop words)"
        return SparseVec(tuple(embedded.indices), tuple(embedded.values)), None


HIDDEN_TERMS = (
    "the collection holds documents this caller cannot see, and BM25's term statistics "
    "count every document: ranked by dense and sparse vectors only"
)


def _allowed(where: Where, access: Sequence[str] | None) -> Where:
    """``where`` narrowed to the chunks a caller holding ``access`` entries may see
    (None: no narrowing). A source the caller may not see reads as absent, so its
    counts, ids and scores never show. Chunks stored before access lists existed
    carry none: they were visible to every caller then, and stay public (they take an
    access list when their source is next ingested)."""
    if access is None:
        return where
    if PUBLIC in access:
        return where.also_or_missing(ACCESS_KEY, access)
    return where.also(ACCESS_KEY, access)


def _shared(found: StoredCollection, state: SharedState | None) -> StoredCollection:
    """The collection as the last writer saved it: the shared state when it is about
    the current generation (it is fenced; the collection metadata is not)."""
    if state is not None and state.generation == found.generation:
        return StoredCollection(found.generation, state.meta)
    return found


def _summary(source_id: str, payloads: Sequence[Mapping[str, Any]]) -> SourceSummary:
    """A source's summary from its chunks' payloads (any order)."""
    ordered = sorted(
        payloads, key=lambda p: (int(p.get("chunk_index", 0)), str(p.get("content_hash", "")))
    )
    digest = hashlib.sha256()
    for payload in ordered:
        digest.update(str(payload.get("content_hash", "")).encode())
        digest.update(b"\n")
    first = ordered[0] if ordered else {}
    return SourceSummary(
        source_id=source_id,
        title=str(first.get("title", "")),
        url=str(first.get("url", "")),
        doc_type=str(first.get("doc_type", "")),
        chunks=len(ordered),
        content_hash=digest.hexdigest(),
        ingested_at=max((float(p.get("created_at", 0.0)) for p in ordered), default=0.0),
    )
