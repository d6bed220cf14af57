"""The retriever's logic: collections, ingestion and search over a VectorStore.

No gRPC here; the store is synchronous (the embedded engine is in-process Rust) and
is called through worker threads so the event loop keeps serving, except for small
searches on the embedded engine (see ``INLINE_CANDIDATES``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from groundwire_core.clients.embedder import EmbedderClient, EmbedderInfo
from groundwire_core.errors import (
    AlreadyExists,
    GroundwireError,
    InvalidInput,
    NotFound,
    PermissionDenied,
)
from groundwire_core.identity import current_identity
from groundwire_retriever.access import caller_access, parse_access
from groundwire_retriever.domain import (
    Chunk,
    ChunkVectors,
    CollectionSpec,
    CollectionStats,
    SearchQuery,
    SearchResult,
    SourceChunks,
    SourcePage,
    SparseVec,
)
from groundwire_retriever.ingest.pipeline import ChunkingPolicy, DocumentInput, prepare_chunks
from groundwire_retriever.ingest.sandbox import ParseSandbox
from groundwire_retriever.store.base import VectorStore
from groundwire_retriever.store.validation import check_model, validate_collection_name

log = logging.getLogger("groundwire.retriever")

BASE_FILTERABLE = ("source_id", "doc_type", "title")

INLINE_CANDIDATES = 1_000
"""A search on the embedded engine whose paths fetch at most this many candidates in
all runs on the event loop: it takes ~2-4 ms at 100k chunks, short enough to hold the
loop for, and the hop to a worker thread and back added ~0.65 ms to it on a 2-core
machine (benchmarks/retrieval_bench.py). Larger searches, and every search on a
Qdrant server (network I/O), go to a worker thread."""


@dataclass(frozen=True)
class DocumentOutcome:
    source_id: str
    status: str  # "ingested" (new) | "updated" (replaced) | "unchanged" | "skipped"
    chunks: int = 0
    reason: str = ""


@dataclass(frozen=True)
class IngestTick:
    done: int
    total: int
    outcome: DocumentOutcome


@dataclass(frozen=True)
class IngestSummary:
    outcomes: tuple[DocumentOutcome, ...]
    chunks_written: int
    seconds: float
    cancelled: bool = False
    """Stopped by ``cancelled()`` before every document was done (a full re-index
    then switched nothing)."""


class RetrieverCore:
    """Collections, ingest and hybrid search; errors are GroundwireErrors."""

    def __init__(
        self,
        store: VectorStore,
        embedder: EmbedderClient,
        *,
        policy: ChunkingPolicy | None = None,
        embed_batch: int = 32,
        optimize_after_chunks: int = 10_000,
        sandbox: ParseSandbox | None = None,
        keep_multi_vectors: bool = False,
    ) -> None:
        """``keep_multi_vectors``: collections created (or fully re-indexed) while the
        embedder's model has ColBERT vectors keep them, for late interaction."""
        self._store = store
        self._embedder = embedder
        self._policy = policy or ChunkingPolicy()
        self._embed_batch = embed_batch
        self._optimize_after = optimize_after_chunks
        self._sandbox = sandbox  # parses under a budget; None: in this process's threads
        self._keep_multi = keep_multi_vectors
        self._unindexed: dict[str, int] = {}  # chunks written since the last optimize

    @property
    def engine(self) -> str:
        """``edge`` or ``qdrant``."""
        return self._store.engine

    @property
    def location(self) -> str:
        """The store's folder or server URL."""
        return self._store.location

    async def start(self) -> None:
        """Opens the store and builds the search indexes of whatever a previous run
        wrote without building them (instant when there is nothing to build)."""
        await asyncio.to_thread(self._store.open)
        for spec in await asyncio.to_thread(self._store.list_collections):
            # nothing is served before start returns: build in place, no copy
            await self._optimize(spec.name, "on start", in_place=True)

    async def _wrote(self, name: str, chunks: int) -> None:
        """Counts written chunks; past ``optimize_after_chunks`` (0: only on start) builds the
        collection's search indexes. On the embedded engine the build copies the
        collection and writes wait for it (see ``EdgeStore.optimize``), so it runs once
        per that many chunks, not after every write."""
        if not self._optimize_after or chunks <= 0:
            return
        total = self._unindexed.get(name, 0) + chunks
        self._unindexed[name] = total
        if total >= self._optimize_after:
            await self._optimize(name, f"after {total} new chunks")

    async def _optimize(self, name: str, why: str, *, in_place: bool = False) -> None:
        started = time.perf_counter()
        try:
            built = await asyncio.to_thread(self._store.optimize, name, in_place=in_place)
        except GroundwireError as error:  # searches still work, by brute force
            log.warning("collection %s: building the search index failed: %s", name, error)
            return
        self._unindexed.pop(name, None)
        if built:
            log.info(
                "collection %s: search index built %s in %.1f s",
                name,
                why,
                time.perf_counter() - started,
            )

    async def stop(self) -> None:
        await asyncio.to_thread(self._store.close)

    async def check(self) -> None:
        """Unavailable while the store's backend does not answer."""
        await asyncio.to_thread(self._store.ping)

    def storage_warning(self) -> str:
        """Why writes are refused now (the data disk under its floor), naming the data
        path; empty while they are accepted. Searches are not affected."""
        return self._store.storage_warning()

    async def create_collection(
        self,
        name: str,
        extra_filterable: Sequence[str] = (),
        *,
        default_access: Sequence[str] = (),
        restricted: bool = False,
        tenant: str = "",
    ) -> CollectionSpec:
        """Creates ``name`` sized for the embedder's model, with the access list of
        documents ingested without one (empty = public). Raises AlreadyExists,
        Unavailable, InvalidInput for a malformed access entry."""
        access = parse_access(default_access, "default_access") or ("public",)
        spec = replace(
            await self._new_spec(name, extra_filterable),
            default_access=access,
            restricted=restricted,
            tenant=tenant or "public",
        )
        await asyncio.to_thread(self._store.create_collection, spec)
        return spec

    async def _new_spec(self, name: str, extra_filterable: Sequence[str] = ()) -> CollectionSpec:
        info = await self._embedder.info()
        return CollectionSpec(
            name=name,
            dense_dims=info.dense_dims,
            learned_sparse="sparse" in info.outputs,
            bm25=True,
            multi_vector_dims=_multi_dims(info, self._keep_multi),
            filterable=tuple(dict.fromkeys((*BASE_FILTERABLE, *extra_filterable))),
            embedder_model=info.model_id,
        )

    async def list_collections(self, *, counts: bool) -> list[CollectionStats]:
        """Every collection; with ``counts`` its chunk and source counts (``describe``
        for each: they count and facet every chunk, an admin call), else zeros and no
        chunk is read (what request paths need: names and filterable fields)."""
        specs = await self.list_specs()
        if not counts:
            return [CollectionStats(spec, chunks=0, sources=0) for spec in specs]
        return [await self.describe(spec.name) for spec in specs]

    async def list_specs(self) -> list[CollectionSpec]:
        """Every collection's spec, without ``describe``'s counts (see ``spec``)."""
        return await asyncio.to_thread(self._store.list_collections)

    async def spec(self, name: str) -> CollectionSpec:
        """The collection's spec without ``describe``'s counts: those count and facet
        every chunk (~0.75 s at 100k chunks), and every Ingest or Upsert call needs the
        spec. Raises InvalidInput for a bad name, NotFound for a missing collection."""
        validate_collection_name(name)
        for spec in await self.list_specs():
            if spec.name == name:
                return spec
        raise NotFound(f"collection {name!r} does not exist")

    async def describe(self, name: str) -> CollectionStats:
        """The collection's spec and what the caller may see of it: counts of the
        chunks and sources its access entries reach (zeros in a restricted collection
        for a caller without an end user). Raises NotFound."""
        spec = await self.spec(name)
        try:
            access = caller_access(spec, current_identity())
        except PermissionDenied:
            return CollectionStats(spec, chunks=0, sources=0)
        return await asyncio.to_thread(self._store.describe, name, access=access)

    def _access(self, name: str) -> tuple[str, ...] | None:
        """The caller's access entries in ``name`` (see ``access.caller_access``),
        from the identity the request carries. Raises PermissionDenied. Inline: the
        store's spec list is in memory, and a thread hop costs a small search ~0.65 ms;
        a missing collection is left to the store's own NotFound."""
        identity = current_identity()
        for spec in self._store.list_collections():
            if spec.name == name:
                return caller_access(spec, identity)
        return caller_access(CollectionSpec(name=name, dense_dims=1), identity)

    async def drop_collection(self, name: str) -> None:
        await asyncio.to_thread(self._store.drop_collection, name)

    async def search(self, name: str, query: SearchQuery) -> SearchResult:
        """Hybrid search as the caller: the access filter from its identity is applied
        inside every path (whatever ``query.access`` said). Raises NotFound,
        PermissionDenied, InvalidInput."""
        query = replace(query, access=self._access(name))
        if (
            self._store.engine == "edge"
            and query.path_limit * len(query.paths) <= INLINE_CANDIDATES
            and query.limit <= INLINE_CANDIDATES
        ):
            return self._store.search(name, query)
        return await asyncio.to_thread(self._store.search, name, query)

    async def delete_by_source(self, name: str, source_id: str) -> int:
        return await asyncio.to_thread(self._store.delete_by_source, name, source_id)

    async def list_sources(
        self, name: str, *, page_token: str = "", limit: int = 100
    ) -> SourcePage:
        """A page of the collection's sources (see ``VectorStore.list_sources``).
        Raises InvalidInput, NotFound, PermissionDenied (the caller's access applies)."""
        access = self._access(name)
        return await asyncio.to_thread(
            self._store.list_sources, name, page_token=page_token, limit=limit, access=access
        )

    async def read_source(
        self, name: str, source_id: str, *, offset: int = 0, limit: int = 1000
    ) -> SourceChunks:
        """A source's chunks in document order (see ``VectorStore.read_source``).
        Raises InvalidInput, NotFound (also for a source the caller may not see),
        PermissionDenied."""
        access = self._access(name)
        return await asyncio.to_thread(
            self._store.read_source, name, source_id, offset=offset, limit=limit, access=access
        )

    async def upsert(self, name: str, chunks: Sequence[tuple[Chunk, ChunkVectors]]) -> int:
        """Stores chunks, embedding those that come without a dense vector."""
        spec = await self.spec(name)
        missing = [i for i, (_, v) in enumerate(chunks) if v.dense is None]
        filled = list(chunks)
        if missing:
            vectors = await self._embed([chunks[i][0].text for i in missing], spec)
            for i, vec in zip(missing, vectors, strict=True):
                filled[i] = (chunks[i][0], vec)
        await asyncio.to_thread(self._store.upsert, name, filled)
        await self._wrote(name, len(filled))
        return len(filled)

    async def ingest(
        self,
        name: str,
        documents: Sequence[DocumentInput],
        *,
        create: bool = False,
        full_reindex: bool = False,
        cancelled: Callable[[], bool] | None = None,
    ) -> AsyncGenerator[IngestTick | IngestSummary, None]:
        """Ingests documents one by one, yielding a tick per document then a summary.

        Each changed document replaces its source's chunks atomically (readers see the
        old set or the new one); an unchanged one is a no-op. With ``full_reindex`` the
        documents build a new generation of the whole collection that replaces it at
        once when all are done (sources not listed disappear); if the ingest fails or
        is cancelled, the old generation keeps serving. A bad document is skipped with
        its reason; the rest go in. Raises NotFound when the collection is missing and
        ``create`` is false, AlreadyExists when a full re-index of it is running.

        ``cancelled`` is polled before each document and before a document is written:
        once it answers True the ingest stops, the document in flight is dropped
        unwritten, and the summary says ``cancelled`` (an ingest job's cancel).
        """
        stop = cancelled or _never
        started = time.perf_counter()
        missing = False
        try:
            spec = await self.spec(name)
        except GroundwireError as error:
            if not create or error.code != "not_found":
                raise
            # A full re-index builds on the collection; otherwise it is created with the
            # first document that is written, so a batch whose every document is
            # skipped leaves no empty collection behind.
            spec = await (self.create_collection(name) if full_reindex else self._new_spec(name))
            missing = not full_reindex

        async def ensure_collection() -> None:
            nonlocal missing
            if missing:
                try:
                    await asyncio.to_thread(self._store.create_collection, spec)
                except AlreadyExists:
                    pass  # a concurrent ingest created it first
                missing = False

        generation: str | None = None
        info = await self._embedder.info()  # the model as it is now, asked once
        if full_reindex:
            spec = _next_spec(spec, info, self._keep_multi)
            generation = await asyncio.to_thread(self._store.begin_reindex, spec)
        else:  # refused up front rather than document by document
            check_model(spec, info.model_id, "the embedder's vectors")
        policy = self._policy_for_model(info)
        outcomes: list[DocumentOutcome] = []
        written = 0
        stopped = False
        try:
            for done, doc in enumerate(documents, start=1):
                try:
                    found = None
                    if not stop():
                        found = await self._ingest_one(
                            spec, doc, generation, policy, ensure_collection, stop
                        )
                except InvalidInput as error:
                    found = DocumentOutcome(doc.source_id, "skipped", reason=error.message)
                if found is None:  # cancelled: nothing of this document was written
                    stopped = True
                    break
                outcome = found
                if outcome.status in ("ingested", "updated"):
                    written += outcome.chunks
                outcomes.append(outcome)
                yield IngestTick(done, len(documents), outcome)
            if generation is not None and not stopped:
                await asyncio.to_thread(self._store.commit_reindex, name, generation)
                generation = None
        finally:
            if generation is not None:
                # Failed, cancelled or abandoned by the caller: drop the unfinished
                # generation. Called directly: a cancelled task cannot await a thread.
                self._store.abort_reindex(name, generation)
        await self._wrote(name, written)
        yield IngestSummary(tuple(outcomes), written, time.perf_counter() - started, stopped)

    def preparer(self, name: str) -> Callable[[DocumentInput], Awaitable[list[Chunk]]]:
        """A function giving the chunks ``ingest`` would store for a document of
        collection ``name`` now (same policy, parser sandbox, kept properties and
        content hashes), neither embedded nor written: a sync compares them with the
        stored sources. Its first call asks the embedder's model and the collection's
        spec, once for all the documents, as one ``ingest`` call does. It raises
        InvalidInput for a refused document, Unavailable when the embedder does not
        answer."""
        policy: ChunkingPolicy | None = None
        keep: tuple[str, ...] = BASE_FILTERABLE

        async def prepare(doc: DocumentInput) -> list[Chunk]:
            nonlocal policy, keep
            if policy is None:
                info = await self._embedder.info()
                with contextlib.suppress(NotFound):  # ingest creates it with the base fields
                    keep = (await self.spec(name)).filterable
                policy = self._policy_for_model(info)
            return await prepare_chunks(
                doc,
                policy,
                count_tokens=self._embedder.count_tokens,
                sandbox=self._sandbox,
                keep_properties=keep,
            )

        return prepare

    def _policy_for_model(self, info: EmbedderInfo) -> ChunkingPolicy:
        """The chunking policy capped at what the embedder reads: text past its
        max_tokens would be stored and shown but never embedded (MiniLM reads 256)."""
        max_tokens = info.max_tokens or self._policy.max_tokens
        if max_tokens >= self._policy.max_tokens:
            return self._policy
        return replace(
            self._policy,
            max_tokens=max_tokens,
            min_tokens=min(self._policy.min_tokens, max_tokens // 2),
            overlap_tokens=min(self._policy.overlap_tokens, max_tokens // 8),
        )

    async def _ingest_one(
        self,
        spec: CollectionSpec,
        doc: DocumentInput,
        generation: str | None,
        policy: ChunkingPolicy,
        ensure_collection: Callable[[], Awaitable[None]],
        stop: Callable[[], bool],
    ) -> DocumentOutcome | None:
        """The document's outcome; None when ``stop()`` turned True before it was written."""
        chunks = await prepare_chunks(
            doc,
            policy,
            count_tokens=self._embedder.count_tokens,
            sandbox=self._sandbox,
            keep_properties=spec.filterable,  # front matter the collection filters on
        )
        await ensure_collection()
        stored: dict[str, str] = {}
        if generation is None:
            # content_hash covers everything stored with a chunk (text, title, URL, type,
            # metadata, chunking settings), so any change rewrites the whole source
            stored = await asyncio.to_thread(self._store.source_hashes, spec.name, doc.source_id)
            if stored == {c.chunk_id: c.content_hash for c in chunks}:
                return DocumentOutcome(doc.source_id, "unchanged", chunks=len(chunks))
        vectors = await self._embed([c.text for c in chunks], spec, stop)
        if stop():
            return None
        # One thread does both steps: if this task is cancelled meanwhile, the thread
        # still publishes (or discards) what it staged, leaving no hidden orphans.
        await asyncio.to_thread(
            self._replace_source,
            spec.name,
            doc.source_id,
            list(zip(chunks, vectors, strict=True)),
            generation,
        )
        status = "updated" if stored else "ingested"
        return DocumentOutcome(doc.source_id, status, chunks=len(chunks))

    def _replace_source(
        self,
        name: str,
        source_id: str,
        chunks: Sequence[tuple[Chunk, ChunkVectors]],
        generation: str | None,
    ) -> None:
        staged = self._store.stage_source(name, source_id, chunks, generation=generation)
        try:
            self._store.publish_source(staged)
        except BaseException:
            self._store.discard_source(staged)
            raise

    async def _embed(
        self, texts: Sequence[str], spec: CollectionSpec, stop: Callable[[], bool] | None = None
    ) -> list[ChunkVectors]:
        """Vectors for ``spec``'s collection; InvalidInput when the embedder now serves
        another model than the collection was indexed with. Stops early (fewer vectors)
        once ``stop()`` answers True: the caller drops them."""
        outputs = ("dense", "sparse") if spec.learned_sparse else ("dense",)
        if spec.multi_vector_dims:  # kept for late interaction (late_interaction.py)
            outputs = (*outputs, "multi_vector")
        vectors: list[ChunkVectors] = []
        for start in range(0, len(texts), self._embed_batch):
            if stop is not None and stop():
                break
            batch = texts[start : start + self._embed_batch]
            # bulk: behind every search in the embedder, which never falls back for it
            embedded = await self._embedder.embed(batch, query=False, outputs=outputs, bulk=True)
            if embedded:  # one reply, one model
                check_model(spec, embedded[0].model, "the embedder's vectors")
            for emb in embedded:
                sparse = (
                    SparseVec(tuple(emb.sparse), tuple(emb.sparse.values()))
                    if emb.sparse is not None
                    else None
                )
                multi = emb.multi_vector if spec.multi_vector_dims and emb.multi_vector else None
                vectors.append(ChunkVectors(dense=emb.dense, sparse=sparse, multi=multi))
        return vectors


def _never() -> bool:
    return False


def _next_spec(spec: CollectionSpec, info: EmbedderInfo, keep_multi: bool) -> CollectionSpec:
    """The spec of a re-index: the embedder's model as it is now (it may have changed
    since the collection was created), the collection's filter fields."""
    return replace(
        spec,
        dense_dims=info.dense_dims,
        learned_sparse="sparse" in info.outputs,
        embedder_model=info.model_id,
        multi_vector_dims=_multi_dims(info, keep_multi),
    )


def _multi_dims(info: EmbedderInfo, keep: bool) -> int:
    """The ColBERT width a new collection (or generation) keeps: with ``keep``, the
    model's when it produces multi-vectors (BGE-M3); 0 otherwise (nothing extra stored).
    Off by default: one 512-token chunk's vectors at 1,024 dims take 2 MiB."""
    return info.multi_vector_dims if keep and "multi_vector" in info.outputs else 0
