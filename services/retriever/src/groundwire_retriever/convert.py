"""The one module converting between retriever protobuf messages and domain types."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from groundwire.common.v1 import common_pb2
from groundwire.retriever.v1 import retriever_pb2
from groundwire_core.errors import InvalidInput
from groundwire_retriever.domain import (
    Chunk,
    ChunkVectors,
    CollectionStats,
    FieldFilter,
    Fusion,
    Hit,
    LateInteractionReport,
    PathReport,
    SearchPath,
    SearchQuery,
    SourceChunks,
    SourcePage,
    SparseVec,
)
from groundwire_retriever.ingest.pipeline import DocumentInput
from groundwire_retriever.live import LiveResult
from groundwire_retriever.service import DocumentOutcome
from groundwire_retriever.sync import (
    SourceKind,
    SourceOutcome,
    SyncDefinition,
    SyncDelta,
    SyncProgress,
    SyncReport,
)
from groundwire_retriever.sync.definition import (
    DEFAULT_DELAY_S,
    DEFAULT_MAX_BYTES,
    DEFAULT_PAGE_LIMIT,
)

K = TypeVar("K", bound=int)
T = TypeVar("T")

PATHS = {
    retriever_pb2.SEARCH_PATH_DENSE: SearchPath.DENSE,
    retriever_pb2.SEARCH_PATH_SPARSE: SearchPath.SPARSE,
    retriever_pb2.SEARCH_PATH_BM25: SearchPath.BM25,
}
PATH_ENUMS = {v: k for k, v in PATHS.items()}
FORMATS = {
    retriever_pb2.DOCUMENT_FORMAT_UNSPECIFIED: "",
    retriever_pb2.DOCUMENT_FORMAT_MARKDOWN: "markdown",
    retriever_pb2.DOCUMENT_FORMAT_TEXT: "text",
    retriever_pb2.DOCUMENT_FORMAT_HTML: "html",
    retriever_pb2.DOCUMENT_FORMAT_PDF: "pdf",
    retriever_pb2.DOCUMENT_FORMAT_RST: "rst",
    retriever_pb2.DOCUMENT_FORMAT_DOCX: "docx",
    retriever_pb2.DOCUMENT_FORMAT_PPTX: "pptx",
    retriever_pb2.DOCUMENT_FORMAT_NOTEBOOK: "notebook",
    retriever_pb2.DOCUMENT_FORMAT_EPUB: "epub",
}
FUSIONS = {retriever_pb2.Fusion.Value(f"FUSION_{f.name}"): f for f in Fusion}
"""Each ``Fusion`` by its wire value, matched by name: a member without a value in
the proto fails here, at import."""
DEFAULT_FUSION = Fusion.RRF
"""What ``FUSION_UNSPECIFIED`` means (documented in retriever.proto)."""
STATUSES = {
    "ingested": retriever_pb2.DOCUMENT_STATUS_INGESTED,
    "unchanged": retriever_pb2.DOCUMENT_STATUS_UNCHANGED,
    "skipped": retriever_pb2.DOCUMENT_STATUS_SKIPPED,
    "updated": retriever_pb2.DOCUMENT_STATUS_UPDATED,
}


def collection_to_proto(stats: CollectionStats) -> retriever_pb2.Collection:
    spec = stats.spec
    return retriever_pb2.Collection(
        name=spec.name,
        dense_dims=spec.dense_dims,
        learned_sparse=spec.learned_sparse,
        bm25=spec.bm25,
        filterable=list(spec.filterable),
        embedder_model=spec.embedder_model,
        chunks=stats.chunks,
        sources=stats.sources,
        default_access=list(spec.default_access),
        restricted=spec.restricted,
        tenant=spec.tenant,
    )


def _enum(table: Mapping[K, T], value: K, what: str) -> T:
    """``table[value]``; ``InvalidInput`` for a value this server does not know (a
    newer client's), instead of quietly treating it as another."""
    try:
        return table[value]
    except KeyError:
        raise InvalidInput(f"unknown {what} value {value}") from None


def fusion_from_proto(value: int) -> Fusion:
    """The fusion method; UNSPECIFIED is ``DEFAULT_FUSION``. Raises InvalidInput for an
    unknown value."""
    if value == retriever_pb2.FUSION_UNSPECIFIED:
        return DEFAULT_FUSION
    return _enum(FUSIONS, value, "fusion")


def document_from_proto(doc: retriever_pb2.Document) -> DocumentInput:
    """Raises InvalidInput for an unknown document format value."""
    return DocumentInput(
        source_id=doc.source_id,
        content=doc.content,
        format=_enum(FORMATS, doc.format, "document format"),
        title=doc.title,
        url=doc.url,
        doc_type=doc.doc_type,
        filename=doc.filename,
        metadata=dict(doc.metadata),
        access=tuple(doc.access),
    )


def outcome_to_proto(outcome: DocumentOutcome) -> retriever_pb2.DocumentResult:
    return retriever_pb2.DocumentResult(
        source_id=outcome.source_id,
        status=STATUSES[outcome.status],
        chunks=outcome.chunks,
        reason=outcome.reason,
    )


def _sparse(vec: common_pb2.SparseVector) -> SparseVec:
    if len(vec.indices) != len(vec.values):
        raise InvalidInput("sparse vector indices and values differ in length")
    return SparseVec(tuple(vec.indices), tuple(vec.values))


def chunk_from_proto(chunk: retriever_pb2.Chunk) -> tuple[Chunk, ChunkVectors]:
    return (
        Chunk(
            chunk_id=chunk.chunk_id,
            source_id=chunk.source_id,
            text=chunk.text,
            title=chunk.title,
            heading_path=tuple(chunk.heading_path),
            chunk_index=chunk.chunk_index,
            url=chunk.url,
            doc_type=chunk.doc_type,
            content_hash=chunk.content_hash,
            metadata=dict(chunk.metadata),
            created_at=chunk.created_at,
            # doc_start/doc_end are not taken: one upserted chunk cannot vouch for its
            # range in a document made of chunks it does not see
        ),
        ChunkVectors(
            dense=tuple(chunk.dense.values) if chunk.HasField("dense") else None,
            sparse=_sparse(chunk.sparse) if chunk.HasField("sparse") else None,
        ),
    )


def chunk_to_proto(chunk: Chunk, out: retriever_pb2.Chunk | None = None) -> retriever_pb2.Chunk:
    """The chunk as a message; with ``out``, filled into that (empty) message.

    Fields are set in place: passing a built message to a parent's constructor
    copies it, and map fields built from dicts go through a Python ``update``.
    Filling in place made a 50-hit search response ~3x cheaper to build.
    """
    msg = retriever_pb2.Chunk() if out is None else out
    msg.chunk_id = chunk.chunk_id
    msg.source_id = chunk.source_id
    msg.text = chunk.text
    msg.title = chunk.title
    msg.heading_path.extend(chunk.heading_path)
    msg.chunk_index = chunk.chunk_index
    msg.url = chunk.url
    msg.doc_type = chunk.doc_type
    msg.content_hash = chunk.content_hash
    for key, value in chunk.metadata.items():
        msg.metadata[key] = value
    msg.created_at = chunk.created_at
    if chunk.doc_span is not None:
        msg.doc_start, msg.doc_end = chunk.doc_span
    return msg


def query_from_proto(request: retriever_pb2.SearchRequest) -> SearchQuery:
    """Raises InvalidInput for an unknown path or fusion value, or a weight of an
    unknown path."""
    dense = tuple(request.dense.values) if request.HasField("dense") else None
    sparse = _sparse(request.sparse) if request.HasField("sparse") else None
    if request.paths:
        paths = frozenset(_enum(PATHS, p, "search path") for p in request.paths)
    else:
        paths = frozenset(SearchPath)
    weights: dict[SearchPath, float] = {}
    for name, weight in request.weights.items():
        try:
            weights[SearchPath(name)] = weight
        except ValueError:
            raise InvalidInput(f"unknown path {name!r} in weights") from None
    return SearchQuery(
        text=request.text,
        dense=dense,
        sparse=sparse,
        paths=paths,
        path_limit=request.path_limit or 100,
        fusion=fusion_from_proto(request.fusion),
        rrf_k=request.rrf_k or 60,
        weights=weights,
        filters=tuple(FieldFilter(f.field, tuple(f.any_of)) for f in request.filters),
        dense_floor=request.dense_floor if request.HasField("dense_floor") else 0.3,
        limit=request.limit or 50,
        drop_off=request.drop_off if request.HasField("drop_off") else None,
        embedder_model=request.embedder_model,
        group_by_source=_group_by_source(request.group_by),
        multi=tuple(tuple(v.values) for v in request.multi_vector) or None,
        late_interaction_depth=request.late_interaction_depth,
    )


def _group_by_source(value: int) -> bool:
    """Raises InvalidInput for a value this retriever does not know."""
    if value in (retriever_pb2.GROUP_BY_UNSPECIFIED, retriever_pb2.GROUP_BY_CHUNK):
        return False
    if value == retriever_pb2.GROUP_BY_DOCUMENT:
        return True
    raise InvalidInput(f"unknown group_by {value}")


def hit_to_proto(hit: Hit, out: retriever_pb2.SearchHit | None = None) -> retriever_pb2.SearchHit:
    """The hit as a message; with ``out`` (``response.hits.add()``), filled in place."""
    msg = retriever_pb2.SearchHit() if out is None else out
    chunk_to_proto(hit.chunk, msg.chunk)
    msg.score = hit.score
    for path, rank in hit.path_ranks.items():
        msg.path_ranks[path.value] = rank
    for path, score in hit.path_scores.items():
        msg.path_scores[path.value] = score
    msg.matching_chunks = hit.matching_chunks
    msg.other_headings.extend(hit.other_headings)
    return msg


def late_interaction_to_proto(report: LateInteractionReport) -> retriever_pb2.LateInteractionReport:
    return retriever_pb2.LateInteractionReport(
        rescored=report.rescored, ms=report.ms, skipped=report.skipped, reason=report.reason
    )


def path_report_to_proto(report: PathReport) -> retriever_pb2.PathReport:
    return retriever_pb2.PathReport(
        path=PATH_ENUMS[report.path],
        ms=report.ms,
        hits=report.hits,
        skipped=report.skipped,
        reason=report.reason,
    )


def source_page_to_proto(page: SourcePage) -> retriever_pb2.ListSourcesResponse:
    return retriever_pb2.ListSourcesResponse(
        sources=[
            retriever_pb2.SourceSummary(
                source_id=s.source_id,
                title=s.title,
                url=s.url,
                doc_type=s.doc_type,
                chunks=s.chunks,
                content_hash=s.content_hash,
                ingested_at=s.ingested_at,
            )
            for s in page.sources
        ],
        next_page_token=page.next_page_token,
        total=page.total,
    )


def source_chunks_to_proto(found: SourceChunks) -> retriever_pb2.ReadSourceResponse:
    reply = retriever_pb2.ReadSourceResponse(total=found.total)
    for chunk in found.chunks:
        chunk_to_proto(chunk, reply.chunks.add())
    return reply


SYNC_KINDS = {
    retriever_pb2.SYNC_SOURCE_KIND_FOLDER: SourceKind.FOLDER,
    retriever_pb2.SYNC_SOURCE_KIND_GIT: SourceKind.GIT,
    retriever_pb2.SYNC_SOURCE_KIND_WEB: SourceKind.WEB,
}
SYNC_KIND_ENUMS = {v: k for k, v in SYNC_KINDS.items()}


def sync_definition_from_proto(d: retriever_pb2.SyncDefinition) -> SyncDefinition:
    """The definition; zero limits mean the defaults. InvalidInput for an unknown or
    unspecified kind."""
    kind = SYNC_KINDS.get(d.kind)
    if kind is None:
        raise InvalidInput("the sync definition needs a kind: folder, git or web")
    return SyncDefinition(
        kind=kind,
        location=d.location,
        include=tuple(d.include),
        exclude=tuple(d.exclude),
        max_bytes=d.max_bytes or DEFAULT_MAX_BYTES,
        page_limit=d.page_limit or DEFAULT_PAGE_LIMIT,
        delay_s=d.delay_s if d.HasField("delay_s") else DEFAULT_DELAY_S,
        prefix=d.prefix,
        url_prefix=d.url_prefix,
    )


def sync_definition_to_proto(d: SyncDefinition) -> retriever_pb2.SyncDefinition:
    return retriever_pb2.SyncDefinition(
        kind=SYNC_KIND_ENUMS[d.kind],
        location=d.location,
        include=list(d.include),
        exclude=list(d.exclude),
        max_bytes=d.max_bytes,
        page_limit=d.page_limit,
        delay_s=d.delay_s,
        prefix=d.prefix,
        url_prefix=d.url_prefix,
    )


def sync_delta_to_proto(delta: SyncDelta) -> retriever_pb2.JobDelta:
    return retriever_pb2.JobDelta(
        new=list(delta.new),
        changed=list(delta.changed),
        unchanged=delta.unchanged,
        deleted=list(delta.deleted),
        renamed=[retriever_pb2.JobRename(from_id=r.old, to_id=r.new) for r in delta.renamed],
    )


def sync_source_to_proto(s: SourceOutcome) -> retriever_pb2.SyncSource:
    return retriever_pb2.SyncSource(
        source_id=s.source_id, outcome=s.outcome, chunks=s.chunks, reason=s.reason
    )


def sync_event_to_proto(item: SyncProgress | SyncReport) -> retriever_pb2.SyncEvent:
    if isinstance(item, SyncProgress):
        return retriever_pb2.SyncEvent(
            progress=retriever_pb2.SyncProgress(
                phase=item.phase,
                done=item.done,
                total=item.total,
                source=sync_source_to_proto(item.source),
            )
        )
    return retriever_pb2.SyncEvent(
        report=retriever_pb2.SyncReport(
            collection=item.collection,
            delta=sync_delta_to_proto(item.delta),
            sources=[sync_source_to_proto(s) for s in item.sources],
            chunks_written=item.chunks_written,
            dry_run=item.dry_run,
            complete=item.complete,
            cancelled=item.cancelled,
            seconds=item.seconds,
        )
    )


def live_result_to_proto(result: LiveResult) -> retriever_pb2.LookupLiveResponse:
    """A live lookup's sections, the pages it tried and its counts."""
    response = retriever_pb2.LookupLiveResponse(
        fetches=[
            retriever_pb2.LiveFetch(
                url=f.url, outcome=f.outcome, reason=f.reason, fetched_at=f.fetched_at
            )
            for f in result.fetches
        ],
        lookups=result.lookups,
        allowed_domains=list(result.allowed_domains),
        candidates=result.candidates,
        seconds=result.seconds,
    )
    for hit in result.hits:
        hit_to_proto(hit, response.hits.add())
    return response
