"""``QdrantServerStore``: the vector store on a Qdrant server, through qdrant-client.

Locations: an ``http(s)://`` URL is a Qdrant server (REST). ``:memory:`` or a folder
path runs qdrant-client's local mode in-process: the same client API, brute force,
meant for tests (the congruence tests run it against ``EdgeStore``), never as the
embedded default.

Layout on the server: each generation of collection ``docs`` is a Qdrant collection
``docs.<hex12>`` (user names cannot contain ``.``, so these never clash), and the
alias ``docs`` points at the current one; a full re-index swaps the alias in one
request, which Qdrant applies atomically. Each generation's collection metadata holds
``{"groundwire": {format, spec, bm25, revisions}}``. A ``<name>.<hex12>`` collection
with that metadata and no alias pointing at it is a re-index that never switched:
removed on open. The schema, payload and BM25 vectors are the ones ``EdgeStore``
writes (built in ``payload``, ``bm25`` and ``versioned``).

On a cluster, each generation is created with the ``ClusterLayout`` (shards,
replication, write consistency) and read with its read consistency. With several
retriever replicas (``replicas``), writes are coordinated through the server
(``replicas``): that cleanup on open is then skipped, since a generation no alias
points to may be another replica's re-index in progress.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import uuid
import weakref
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException

from groundwire_core.errors import AlreadyExists, BackendFailure, GroundwireError, Unavailable
from groundwire_retriever.domain import CollectionSpec, SparseVec
from groundwire_retriever.store.bm25 import Bm25Settings
from groundwire_retriever.store.engine import PointData, StoredCollection, Where
from groundwire_retriever.store.payload import (
    BM25_VECTOR,
    DENSE_VECTOR,
    MULTI_VECTOR,
    SPARSE_VECTOR,
    indexed_fields,
)
from groundwire_retriever.store.replicas import ReplicaPolicy, WriteLeases
from groundwire_retriever.store.versioned import VersionedStore

__all__ = ["ClusterLayout", "QdrantEngine", "QdrantServerStore"]

log = logging.getLogger(__name__)

DEPENDENCY = "qdrant"
META_KEY = "groundwire"

_UPSERT_BATCH = 256
_SCROLL_PAGE = 1_000
_GENERATION_RE = re.compile(r"^(?P<name>[a-z0-9][a-z0-9_-]{0,63})\.[0-9a-f]{12}$")


def _filter(where: Where) -> models.Filter | None:
    if where.empty:
        return None
    must: list[models.Condition] = [
        models.FieldCondition(key=key, match=models.MatchAny(any=list(values)))
        for key, values in where.must
    ]
    must += [
        models.Filter(
            should=[
                models.FieldCondition(key=key, match=models.MatchAny(any=list(values))),
                models.IsEmptyCondition(is_empty=models.PayloadField(key=key)),
            ]
        )
        for key, values in where.must_or_missing
    ]
    must_not: list[models.Condition] = [
        models.FieldCondition(key=key, match=models.MatchAny(any=list(values)))
        for key, values in where.must_not
    ]
    return models.Filter(must=must or None, must_not=must_not or None)


_LOCKS: weakref.WeakKeyDictionary[QdrantClient, threading.RLock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def _shared_lock(client: QdrantClient) -> threading.RLock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(client, threading.RLock())


@dataclass(frozen=True)
class ClusterLayout:
    """How a generation's collection is laid out on a Qdrant cluster (settings
    ``QDRANT_SHARDS``, ``QDRANT_REPLICATION_FACTOR``, ``QDRANT_WRITE_CONSISTENCY``,
    ``QDRANT_READ_CONSISTENCY``); the defaults are a single node's."""

    shard_number: int = 1
    replication_factor: int = 1
    write_consistency_factor: int = 1
    read_consistency: models.ReadConsistencyType | int | None = None


def _sparse(vec: SparseVec) -> models.SparseVector:
    return models.SparseVector(indices=list(vec.indices), values=list(vec.values))


class QdrantEngine:
    """Generations as Qdrant collections behind an alias; see the module docstring."""

    kind = "qdrant"
    dependency = DEPENDENCY

    def __init__(
        self,
        location: str,
        *,
        api_key: str | None = None,
        timeout_s: int = 10,
        cluster: ClusterLayout | None = None,
        client: QdrantClient | None = None,
        remove_orphans: bool = True,
    ) -> None:
        self._location = location
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._cluster = cluster or ClusterLayout()
        self._local = not location.startswith(("http://", "https://"))
        # a client passed in is the caller's (replicas in one process share local mode)
        self._given = client
        self._client: QdrantClient | None = None
        self._current: dict[str, str] = {}
        # with replicas, a generation no alias points to may be another's re-index
        self._remove_orphans = remove_orphans
        # local mode is plain Python objects: one call at a time, across sharing engines
        self._call_lock: threading.RLock | None = None
        if self._local:
            self._call_lock = _shared_lock(client) if client is not None else threading.RLock()

    @property
    def location(self) -> str:
        return self._location

    # ------------------------------------------------------------ catalog

    def open(self) -> dict[str, StoredCollection]:
        if self._given is not None:
            self._client = self._given
        elif self._location == ":memory:":
            self._client = QdrantClient(location=":memory:")
        elif self._local:
            try:
                self._client = QdrantClient(path=self._location)
            except (OSError, RuntimeError) as exc:
                raise Unavailable(
                    f"cannot open the local Qdrant folder {self._location!r}: {exc}",
                    dependency=DEPENDENCY,
                ) from None
        else:
            self._client = QdrantClient(
                url=self._location,
                api_key=self._api_key,
                timeout=self._timeout_s,
                check_compatibility=False,
            )
        try:
            with self._calling("list collections") as client:
                names = [c.name for c in client.get_collections().collections]
                aliases = {a.alias_name: a.collection_name for a in client.get_aliases().aliases}
                ours: dict[str, tuple[str, Mapping[str, Any]]] = {}
                for cname in names:
                    match = _GENERATION_RE.fullmatch(cname)
                    if match is None:
                        continue
                    metadata = client.get_collection(cname).config.metadata or {}
                    meta = metadata.get(META_KEY)
                    if isinstance(meta, Mapping):
                        ours[cname] = (match["name"], meta)
            found: dict[str, StoredCollection] = {}
            for alias, target in aliases.items():
                if target in ours and ours[target][0] == alias:
                    found[alias] = StoredCollection(target, ours[target][1])
                    self._current[alias] = target
            current = set(self._current.values())
            for cname, (owner, _) in ours.items():
                if cname not in current and self._remove_orphans:
                    log.warning("removing %s: a generation of %s no alias points to", cname, owner)
                    self.drop_generation(owner, cname)
        except BaseException:
            self.close()
            raise
        return found

    def close(self) -> None:
        client, self._client = self._client, None
        self._current = {}
        if client is not None and client is not self._given:
            try:
                client.close()
            except Exception:
                log.exception("closing the Qdrant client failed")

    def ping(self) -> None:
        client = self._client
        if client is None:
            raise Unavailable("the vector store is not open", dependency=DEPENDENCY)
        if self._local:  # local mode runs in this process
            return
        try:
            client.get_collections()
        except Exception:  # refused, timed out, 5xx: the caller only needs "away"
            raise Unavailable(
                f"the Qdrant server at {self._location} does not answer", dependency=DEPENDENCY
            ) from None

    def storage_warning(self) -> str:
        """The server guards its own disk (it answers a write it has no room for with
        an error, which maps to BackendFailure): nothing to report here."""
        return ""

    def create(self, name: str, spec: CollectionSpec, meta: Mapping[str, Any]) -> str:
        gid = f"{name}.{uuid.uuid4().hex[:12]}"
        sparse: dict[str, models.SparseVectorParams] = {}
        if spec.learned_sparse:
            sparse[SPARSE_VECTOR] = models.SparseVectorParams()
        if spec.bm25:
            sparse[BM25_VECTOR] = models.SparseVectorParams(modifier=models.Modifier.IDF)
        vectors = {
            DENSE_VECTOR: models.VectorParams(size=spec.dense_dims, distance=models.Distance.COSINE)
        }
        if spec.multi_vector_dims:
            # read back for MaxSim rescoring only, never searched: no HNSW graph (m=0)
            vectors[MULTI_VECTOR] = models.VectorParams(
                size=spec.multi_vector_dims,
                distance=models.Distance.COSINE,
                multivector_config=models.MultiVectorConfig(
                    comparator=models.MultiVectorComparator.MAX_SIM
                ),
                hnsw_config=models.HnswConfigDiff(m=0),
            )
        with self._calling(f"create collection {name!r}") as client:
            client.create_collection(
                gid,
                vectors_config=vectors,
                sparse_vectors_config=sparse or None,
                metadata={META_KEY: dict(meta)},
                shard_number=self._cluster.shard_number,
                replication_factor=self._cluster.replication_factor,
                write_consistency_factor=self._cluster.write_consistency_factor,
            )
            try:
                if not self._local:  # local mode has no payload indexes (and warns)
                    for key in indexed_fields(spec):
                        client.create_payload_index(
                            gid, key, models.PayloadSchemaType.KEYWORD, wait=True
                        )
            except BaseException:
                client.delete_collection(gid)
                raise
        return gid

    def make_current(self, name: str, generation: str, meta: Mapping[str, Any]) -> None:
        with self._calling(f"switch collection {name!r}") as client:
            client.update_collection(generation, metadata={META_KEY: dict(meta)})
            aliases = {a.alias_name: a.collection_name for a in client.get_aliases().aliases}
            operations: list[models.AliasOperations] = []
            if name in aliases:
                if aliases[name] != self._current.get(name):
                    raise AlreadyExists(
                        f"the Qdrant server has an alias {name!r} this retriever does not manage"
                    )
                operations.append(
                    models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=name))
                )
            elif client.collection_exists(name):
                raise AlreadyExists(
                    f"the Qdrant server has a collection {name!r} this retriever does not manage"
                )
            operations.append(
                models.CreateAliasOperation(
                    create_alias=models.CreateAlias(collection_name=generation, alias_name=name)
                )
            )
            client.update_collection_aliases(change_aliases_operations=operations)
        self._current[name] = generation

    def save_meta(
        self, name: str, generation: str, meta: Mapping[str, Any], *, durable: bool
    ) -> None:
        with self._calling(f"save the state of collection {name!r}") as client:
            client.update_collection(generation, metadata={META_KEY: dict(meta)})

    def drop_generation(self, name: str, generation: str) -> None:
        with self._calling(f"delete a generation of collection {name!r}") as client:
            client.delete_collection(generation)

    def drop(self, name: str, generations: Sequence[str]) -> None:
        with self._calling(f"drop collection {name!r}") as client:
            aliases = {a.alias_name for a in client.get_aliases().aliases}
            if name in aliases:
                client.update_collection_aliases(
                    change_aliases_operations=[
                        models.DeleteAliasOperation(
                            delete_alias=models.DeleteAlias(alias_name=name)
                        )
                    ]
                )
            for gid in generations:
                client.delete_collection(gid)
        self._current.pop(name, None)

    # ------------------------------------------------------------ points

    def upsert(self, generation: str, points: Sequence[PointData]) -> None:
        with self._calling(f"write to {self._label(generation)}") as client:
            for start in range(0, len(points), _UPSERT_BATCH):
                batch = [self._point(p) for p in points[start : start + _UPSERT_BATCH]]
                client.upsert(generation, points=batch, wait=True)

    def delete(self, generation: str, where: Where) -> None:
        flt = _filter(where)
        if flt is None:
            raise ValueError("refusing to delete with an empty filter")
        with self._calling(f"delete from {self._label(generation)}") as client:
            client.delete(generation, points_selector=models.FilterSelector(filter=flt), wait=True)

    def count(self, generation: str, where: Where) -> int:
        with self._calling(f"count {self._label(generation)}") as client:
            return client.count(generation, count_filter=_filter(where), exact=True).count

    def facet(self, generation: str, key: str, where: Where, limit: int) -> dict[str, int]:
        with self._calling(f"read {self._label(generation)}") as client:
            response = client.facet(
                generation, key, facet_filter=_filter(where), limit=max(1, limit), exact=True
            )
        return {str(hit.value): hit.count for hit in response.hits if hit.count > 0}

    def scroll(
        self, generation: str, where: Where, fields: Sequence[str]
    ) -> list[tuple[str, dict[str, Any]]]:
        rows: list[tuple[str, dict[str, Any]]] = []
        offset: models.ExtendedPointId | None = None
        with self._calling(f"read {self._label(generation)}") as client:
            while True:
                records, offset = client.scroll(
                    generation,
                    scroll_filter=_filter(where),
                    limit=_SCROLL_PAGE,
                    offset=offset,
                    with_payload=list(fields),
                    with_vectors=False,
                )
                rows.extend((str(r.id), dict(r.payload or {})) for r in records)
                if offset is None:
                    return rows

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
        query: list[float] | models.SparseVector = (
            vector if isinstance(vector, list) else _sparse(vector)
        )
        with self._calling(f"search {self._label(generation)} ({using} path)") as client:
            response = client.query_points(
                generation,
                query=query,
                using=using,
                query_filter=_filter(where),
                limit=limit,
                score_threshold=score_threshold,
                with_payload=False,
                with_vectors=False,
                consistency=self._cluster.read_consistency,
            )
        return [(str(p.id), float(p.score)) for p in response.points]

    def retrieve(
        self, generation: str, ids: Sequence[Hashable]
    ) -> dict[Hashable, Mapping[str, Any]]:
        with self._calling(f"read results from {self._label(generation)}") as client:
            records = client.retrieve(
                generation,
                ids=[str(i) for i in ids],
                with_payload=True,
                with_vectors=False,
                consistency=self._cluster.read_consistency,
            )
        return {str(r.id): r.payload or {} for r in records}

    def multi_vectors(
        self, generation: str, ids: Sequence[Hashable]
    ) -> dict[Hashable, list[list[float]]]:
        with self._calling(f"read vectors from {self._label(generation)}") as client:
            records = client.retrieve(
                generation,
                ids=[str(i) for i in ids],
                with_payload=False,
                with_vectors=[MULTI_VECTOR],
                consistency=self._cluster.read_consistency,
            )
        found: dict[Hashable, list[list[float]]] = {}
        for r in records:
            multi = r.vector.get(MULTI_VECTOR) if isinstance(r.vector, dict) else None
            if isinstance(multi, list) and multi:
                found[str(r.id)] = multi  # type: ignore[assignment]
        return found

    def catalog(self) -> dict[str, StoredCollection]:
        """Every collection's current generation and its metadata, read now; unlike
        ``open`` it removes nothing (a replica's periodic refresh)."""
        with self._calling("list collections") as client:
            aliases = {a.alias_name: a.collection_name for a in client.get_aliases().aliases}
            found: dict[str, StoredCollection] = {}
            for alias, target in aliases.items():
                match = _GENERATION_RE.fullmatch(target)
                if match is None or match["name"] != alias:
                    continue
                meta = (client.get_collection(target).config.metadata or {}).get(META_KEY)
                if isinstance(meta, Mapping):
                    found[alias] = StoredCollection(target, meta)
            self._current = {name: stored.generation for name, stored in found.items()}
        return found

    def session(self, action: str) -> contextlib.AbstractContextManager[QdrantClient]:
        """The client for one call, errors mapped as for the engine's own calls."""
        return self._calling(action)

    # ------------------------------------------------------------ internals

    @contextlib.contextmanager
    def _calling(self, action: str) -> Iterator[QdrantClient]:
        """The client, with failures mapped: unreachable -> Unavailable, anything else
        the client raises -> BackendFailure (details logged, not sent)."""
        client = self._client
        if client is None:
            raise Unavailable("the vector store is not open", dependency=DEPENDENCY)
        lock = self._call_lock if self._call_lock is not None else contextlib.nullcontext()
        try:
            with lock:
                yield client
        except GroundwireError:
            raise
        except ResponseHandlingException:
            log.exception("Qdrant unreachable: %s", action)
            raise Unavailable(
                f"the Qdrant server at {self._location} cannot be reached", dependency=DEPENDENCY
            ) from None
        except Exception:
            log.exception("Qdrant failed: %s", action)
            raise BackendFailure(
                f"the vector store failed to {action}", dependency=DEPENDENCY
            ) from None

    @staticmethod
    def _label(generation: str) -> str:
        return f"collection {generation.rsplit('.', 1)[0]!r}"

    @staticmethod
    def _point(point: PointData) -> models.PointStruct:
        vector: dict[str, list[float] | list[list[float]] | models.SparseVector] = {
            DENSE_VECTOR: point.dense
        }
        if point.sparse is not None:
            vector[SPARSE_VECTOR] = _sparse(point.sparse)
        if point.bm25 is not None:
            vector[BM25_VECTOR] = _sparse(point.bm25)
        if point.multi is not None:
            vector[MULTI_VECTOR] = point.multi
        return models.PointStruct(id=point.id, vector=vector, payload=dict(point.payload))


class QdrantServerStore(VersionedStore):
    """A ``VectorStore`` on a Qdrant server (URL) or qdrant-client's local mode
    (``:memory:`` or a folder)."""

    def __init__(
        self,
        location: str,
        *,
        api_key: str | None = None,
        timeout_s: int = 10,
        bm25: Bm25Settings | None = None,
        cluster: ClusterLayout | None = None,
        replicas: ReplicaPolicy | None = None,
        client: QdrantClient | None = None,
    ) -> None:
        """``replicas``: several retriever replicas share the server (store/replicas.py);
        ``client``: an already built client (tests sharing one local-mode instance)."""
        engine = QdrantEngine(
            location,
            api_key=api_key,
            timeout_s=timeout_s,
            cluster=cluster,
            client=client,
            remove_orphans=replicas is None,
        )
        leases = (
            WriteLeases(
                engine.session,
                replicas,
                catalog=engine.catalog,
                replication_factor=(cluster or ClusterLayout()).replication_factor,
            )
            if replicas is not None
            else None
        )
        super().__init__(engine, bm25=bm25, leases=leases)
