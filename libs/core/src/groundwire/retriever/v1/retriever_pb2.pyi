from groundwire.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SearchPath(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_PATH_UNSPECIFIED: _ClassVar[SearchPath]
    SEARCH_PATH_DENSE: _ClassVar[SearchPath]
    SEARCH_PATH_SPARSE: _ClassVar[SearchPath]
    SEARCH_PATH_BM25: _ClassVar[SearchPath]

class Fusion(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FUSION_UNSPECIFIED: _ClassVar[Fusion]
    FUSION_RRF: _ClassVar[Fusion]
    FUSION_WEIGHTED: _ClassVar[Fusion]

class DocumentFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DOCUMENT_FORMAT_UNSPECIFIED: _ClassVar[DocumentFormat]
    DOCUMENT_FORMAT_MARKDOWN: _ClassVar[DocumentFormat]
    DOCUMENT_FORMAT_TEXT: _ClassVar[DocumentFormat]
    DOCUMENT_FORMAT_HTML: _ClassVar[DocumentFormat]
    DOCUMENT_FORMAT_PDF: _ClassVar[DocumentFormat]
    DOCUMENT_FORMAT_RST: _ClassVar[DocumentFormat]
    DOCUMENT_FORMAT_DOCX: _ClassVar[DocumentFormat]
    DOCUMENT_FORMAT_PPTX: _ClassVar[DocumentFormat]
    DOCUMENT_FORMAT_NOTEBOOK: _ClassVar[DocumentFormat]
    DOCUMENT_FORMAT_EPUB: _ClassVar[DocumentFormat]

class DocumentStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DOCUMENT_STATUS_UNSPECIFIED: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_INGESTED: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_UNCHANGED: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_SKIPPED: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_UPDATED: _ClassVar[DocumentStatus]

class GroupBy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    GROUP_BY_UNSPECIFIED: _ClassVar[GroupBy]
    GROUP_BY_CHUNK: _ClassVar[GroupBy]
    GROUP_BY_DOCUMENT: _ClassVar[GroupBy]

class JobKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_KIND_UNSPECIFIED: _ClassVar[JobKind]
    JOB_KIND_INGEST: _ClassVar[JobKind]
    JOB_KIND_SYNC: _ClassVar[JobKind]

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATE_UNSPECIFIED: _ClassVar[JobState]
    JOB_STATE_QUEUED: _ClassVar[JobState]
    JOB_STATE_RUNNING: _ClassVar[JobState]
    JOB_STATE_SUCCEEDED: _ClassVar[JobState]
    JOB_STATE_FAILED: _ClassVar[JobState]
    JOB_STATE_CANCELLED: _ClassVar[JobState]

class SyncSourceKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SYNC_SOURCE_KIND_UNSPECIFIED: _ClassVar[SyncSourceKind]
    SYNC_SOURCE_KIND_FOLDER: _ClassVar[SyncSourceKind]
    SYNC_SOURCE_KIND_GIT: _ClassVar[SyncSourceKind]
    SYNC_SOURCE_KIND_WEB: _ClassVar[SyncSourceKind]
SEARCH_PATH_UNSPECIFIED: SearchPath
SEARCH_PATH_DENSE: SearchPath
SEARCH_PATH_SPARSE: SearchPath
SEARCH_PATH_BM25: SearchPath
FUSION_UNSPECIFIED: Fusion
FUSION_RRF: Fusion
FUSION_WEIGHTED: Fusion
DOCUMENT_FORMAT_UNSPECIFIED: DocumentFormat
DOCUMENT_FORMAT_MARKDOWN: DocumentFormat
DOCUMENT_FORMAT_TEXT: DocumentFormat
DOCUMENT_FORMAT_HTML: DocumentFormat
DOCUMENT_FORMAT_PDF: DocumentFormat
DOCUMENT_FORMAT_RST: DocumentFormat
DOCUMENT_FORMAT_DOCX: DocumentFormat
DOCUMENT_FORMAT_PPTX: DocumentFormat
DOCUMENT_FORMAT_NOTEBOOK: DocumentFormat
DOCUMENT_FORMAT_EPUB: DocumentFormat
DOCUMENT_STATUS_UNSPECIFIED: DocumentStatus
DOCUMENT_STATUS_INGESTED: DocumentStatus
DOCUMENT_STATUS_UNCHANGED: DocumentStatus
DOCUMENT_STATUS_SKIPPED: DocumentStatus
DOCUMENT_STATUS_UPDATED: DocumentStatus
GROUP_BY_UNSPECIFIED: GroupBy
GROUP_BY_CHUNK: GroupBy
GROUP_BY_DOCUMENT: GroupBy
JOB_KIND_UNSPECIFIED: JobKind
JOB_KIND_INGEST: JobKind
JOB_KIND_SYNC: JobKind
JOB_STATE_UNSPECIFIED: JobState
JOB_STATE_QUEUED: JobState
JOB_STATE_RUNNING: JobState
JOB_STATE_SUCCEEDED: JobState
JOB_STATE_FAILED: JobState
JOB_STATE_CANCELLED: JobState
SYNC_SOURCE_KIND_UNSPECIFIED: SyncSourceKind
SYNC_SOURCE_KIND_FOLDER: SyncSourceKind
SYNC_SOURCE_KIND_GIT: SyncSourceKind
SYNC_SOURCE_KIND_WEB: SyncSourceKind

class Collection(_message.Message):
    __slots__ = ("name", "dense_dims", "learned_sparse", "bm25", "filterable", "embedder_model", "chunks", "sources", "default_access", "restricted", "tenant")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DENSE_DIMS_FIELD_NUMBER: _ClassVar[int]
    LEARNED_SPARSE_FIELD_NUMBER: _ClassVar[int]
    BM25_FIELD_NUMBER: _ClassVar[int]
    FILTERABLE_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_MODEL_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_ACCESS_FIELD_NUMBER: _ClassVar[int]
    RESTRICTED_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    name: str
    dense_dims: int
    learned_sparse: bool
    bm25: bool
    filterable: _containers.RepeatedScalarFieldContainer[str]
    embedder_model: str
    chunks: int
    sources: int
    default_access: _containers.RepeatedScalarFieldContainer[str]
    restricted: bool
    tenant: str
    def __init__(self, name: _Optional[str] = ..., dense_dims: _Optional[int] = ..., learned_sparse: _Optional[bool] = ..., bm25: _Optional[bool] = ..., filterable: _Optional[_Iterable[str]] = ..., embedder_model: _Optional[str] = ..., chunks: _Optional[int] = ..., sources: _Optional[int] = ..., default_access: _Optional[_Iterable[str]] = ..., restricted: _Optional[bool] = ..., tenant: _Optional[str] = ...) -> None: ...

class CreateCollectionRequest(_message.Message):
    __slots__ = ("name", "filterable", "default_access", "restricted", "tenant")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FILTERABLE_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_ACCESS_FIELD_NUMBER: _ClassVar[int]
    RESTRICTED_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    name: str
    filterable: _containers.RepeatedScalarFieldContainer[str]
    default_access: _containers.RepeatedScalarFieldContainer[str]
    restricted: bool
    tenant: str
    def __init__(self, name: _Optional[str] = ..., filterable: _Optional[_Iterable[str]] = ..., default_access: _Optional[_Iterable[str]] = ..., restricted: _Optional[bool] = ..., tenant: _Optional[str] = ...) -> None: ...

class ListCollectionsRequest(_message.Message):
    __slots__ = ("counts",)
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    counts: bool
    def __init__(self, counts: _Optional[bool] = ...) -> None: ...

class ListCollectionsResponse(_message.Message):
    __slots__ = ("collections",)
    COLLECTIONS_FIELD_NUMBER: _ClassVar[int]
    collections: _containers.RepeatedCompositeFieldContainer[Collection]
    def __init__(self, collections: _Optional[_Iterable[_Union[Collection, _Mapping]]] = ...) -> None: ...

class DescribeCollectionRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DropCollectionRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DropCollectionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Document(_message.Message):
    __slots__ = ("source_id", "content", "format", "title", "url", "doc_type", "filename", "metadata", "access")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    DOC_TYPE_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ACCESS_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    content: bytes
    format: DocumentFormat
    title: str
    url: str
    doc_type: str
    filename: str
    metadata: _containers.ScalarMap[str, str]
    access: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, source_id: _Optional[str] = ..., content: _Optional[bytes] = ..., format: _Optional[_Union[DocumentFormat, str]] = ..., title: _Optional[str] = ..., url: _Optional[str] = ..., doc_type: _Optional[str] = ..., filename: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., access: _Optional[_Iterable[str]] = ...) -> None: ...

class IngestRequest(_message.Message):
    __slots__ = ("collection", "documents", "create_collection", "full_reindex")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    CREATE_COLLECTION_FIELD_NUMBER: _ClassVar[int]
    FULL_REINDEX_FIELD_NUMBER: _ClassVar[int]
    collection: str
    documents: _containers.RepeatedCompositeFieldContainer[Document]
    create_collection: bool
    full_reindex: bool
    def __init__(self, collection: _Optional[str] = ..., documents: _Optional[_Iterable[_Union[Document, _Mapping]]] = ..., create_collection: _Optional[bool] = ..., full_reindex: _Optional[bool] = ...) -> None: ...

class DocumentResult(_message.Message):
    __slots__ = ("source_id", "status", "chunks", "reason")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    status: DocumentStatus
    chunks: int
    reason: str
    def __init__(self, source_id: _Optional[str] = ..., status: _Optional[_Union[DocumentStatus, str]] = ..., chunks: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class IngestEvent(_message.Message):
    __slots__ = ("progress", "report")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    progress: IngestProgress
    report: IngestReport
    def __init__(self, progress: _Optional[_Union[IngestProgress, _Mapping]] = ..., report: _Optional[_Union[IngestReport, _Mapping]] = ...) -> None: ...

class IngestProgress(_message.Message):
    __slots__ = ("done", "total", "document")
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    done: int
    total: int
    document: DocumentResult
    def __init__(self, done: _Optional[int] = ..., total: _Optional[int] = ..., document: _Optional[_Union[DocumentResult, _Mapping]] = ...) -> None: ...

class IngestReport(_message.Message):
    __slots__ = ("documents", "ingested", "unchanged", "skipped", "chunks_written", "seconds", "updated")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    INGESTED_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[DocumentResult]
    ingested: int
    unchanged: int
    skipped: int
    chunks_written: int
    seconds: float
    updated: int
    def __init__(self, documents: _Optional[_Iterable[_Union[DocumentResult, _Mapping]]] = ..., ingested: _Optional[int] = ..., unchanged: _Optional[int] = ..., skipped: _Optional[int] = ..., chunks_written: _Optional[int] = ..., seconds: _Optional[float] = ..., updated: _Optional[int] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("chunk_id", "source_id", "text", "title", "heading_path", "chunk_index", "url", "doc_type", "content_hash", "metadata", "created_at", "dense", "sparse", "doc_start", "doc_end")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    HEADING_PATH_FIELD_NUMBER: _ClassVar[int]
    CHUNK_INDEX_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    DOC_TYPE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DENSE_FIELD_NUMBER: _ClassVar[int]
    SPARSE_FIELD_NUMBER: _ClassVar[int]
    DOC_START_FIELD_NUMBER: _ClassVar[int]
    DOC_END_FIELD_NUMBER: _ClassVar[int]
    chunk_id: str
    source_id: str
    text: str
    title: str
    heading_path: _containers.RepeatedScalarFieldContainer[str]
    chunk_index: int
    url: str
    doc_type: str
    content_hash: str
    metadata: _containers.ScalarMap[str, str]
    created_at: float
    dense: _common_pb2.DenseVector
    sparse: _common_pb2.SparseVector
    doc_start: int
    doc_end: int
    def __init__(self, chunk_id: _Optional[str] = ..., source_id: _Optional[str] = ..., text: _Optional[str] = ..., title: _Optional[str] = ..., heading_path: _Optional[_Iterable[str]] = ..., chunk_index: _Optional[int] = ..., url: _Optional[str] = ..., doc_type: _Optional[str] = ..., content_hash: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., created_at: _Optional[float] = ..., dense: _Optional[_Union[_common_pb2.DenseVector, _Mapping]] = ..., sparse: _Optional[_Union[_common_pb2.SparseVector, _Mapping]] = ..., doc_start: _Optional[int] = ..., doc_end: _Optional[int] = ...) -> None: ...

class UpsertRequest(_message.Message):
    __slots__ = ("collection", "chunks")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    collection: str
    chunks: _containers.RepeatedCompositeFieldContainer[Chunk]
    def __init__(self, collection: _Optional[str] = ..., chunks: _Optional[_Iterable[_Union[Chunk, _Mapping]]] = ...) -> None: ...

class UpsertResponse(_message.Message):
    __slots__ = ("upserted",)
    UPSERTED_FIELD_NUMBER: _ClassVar[int]
    upserted: int
    def __init__(self, upserted: _Optional[int] = ...) -> None: ...

class DeleteBySourceRequest(_message.Message):
    __slots__ = ("collection", "source_id")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    collection: str
    source_id: str
    def __init__(self, collection: _Optional[str] = ..., source_id: _Optional[str] = ...) -> None: ...

class DeleteBySourceResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: int
    def __init__(self, deleted: _Optional[int] = ...) -> None: ...

class ListSourcesRequest(_message.Message):
    __slots__ = ("collection", "page_token", "limit")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    collection: str
    page_token: str
    limit: int
    def __init__(self, collection: _Optional[str] = ..., page_token: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class SourceSummary(_message.Message):
    __slots__ = ("source_id", "title", "url", "doc_type", "chunks", "content_hash", "ingested_at")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    DOC_TYPE_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    INGESTED_AT_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    title: str
    url: str
    doc_type: str
    chunks: int
    content_hash: str
    ingested_at: float
    def __init__(self, source_id: _Optional[str] = ..., title: _Optional[str] = ..., url: _Optional[str] = ..., doc_type: _Optional[str] = ..., chunks: _Optional[int] = ..., content_hash: _Optional[str] = ..., ingested_at: _Optional[float] = ...) -> None: ...

class ListSourcesResponse(_message.Message):
    __slots__ = ("sources", "next_page_token", "total")
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    sources: _containers.RepeatedCompositeFieldContainer[SourceSummary]
    next_page_token: str
    total: int
    def __init__(self, sources: _Optional[_Iterable[_Union[SourceSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total: _Optional[int] = ...) -> None: ...

class ReadSourceRequest(_message.Message):
    __slots__ = ("collection", "source_id", "offset", "limit")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    collection: str
    source_id: str
    offset: int
    limit: int
    def __init__(self, collection: _Optional[str] = ..., source_id: _Optional[str] = ..., offset: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class ReadSourceResponse(_message.Message):
    __slots__ = ("chunks", "total")
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    chunks: _containers.RepeatedCompositeFieldContainer[Chunk]
    total: int
    def __init__(self, chunks: _Optional[_Iterable[_Union[Chunk, _Mapping]]] = ..., total: _Optional[int] = ...) -> None: ...

class FieldFilter(_message.Message):
    __slots__ = ("field", "any_of")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    ANY_OF_FIELD_NUMBER: _ClassVar[int]
    field: str
    any_of: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, field: _Optional[str] = ..., any_of: _Optional[_Iterable[str]] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("collection", "text", "dense", "sparse", "paths", "path_limit", "fusion", "rrf_k", "weights", "filters", "dense_floor", "limit", "drop_off", "embedder_model", "group_by", "multi_vector", "late_interaction_depth")
    class WeightsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DENSE_FIELD_NUMBER: _ClassVar[int]
    SPARSE_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    PATH_LIMIT_FIELD_NUMBER: _ClassVar[int]
    FUSION_FIELD_NUMBER: _ClassVar[int]
    RRF_K_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    DENSE_FLOOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    DROP_OFF_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_MODEL_FIELD_NUMBER: _ClassVar[int]
    GROUP_BY_FIELD_NUMBER: _ClassVar[int]
    MULTI_VECTOR_FIELD_NUMBER: _ClassVar[int]
    LATE_INTERACTION_DEPTH_FIELD_NUMBER: _ClassVar[int]
    collection: str
    text: str
    dense: _common_pb2.DenseVector
    sparse: _common_pb2.SparseVector
    paths: _containers.RepeatedScalarFieldContainer[SearchPath]
    path_limit: int
    fusion: Fusion
    rrf_k: int
    weights: _containers.ScalarMap[str, float]
    filters: _containers.RepeatedCompositeFieldContainer[FieldFilter]
    dense_floor: float
    limit: int
    drop_off: float
    embedder_model: str
    group_by: GroupBy
    multi_vector: _containers.RepeatedCompositeFieldContainer[_common_pb2.DenseVector]
    late_interaction_depth: int
    def __init__(self, collection: _Optional[str] = ..., text: _Optional[str] = ..., dense: _Optional[_Union[_common_pb2.DenseVector, _Mapping]] = ..., sparse: _Optional[_Union[_common_pb2.SparseVector, _Mapping]] = ..., paths: _Optional[_Iterable[_Union[SearchPath, str]]] = ..., path_limit: _Optional[int] = ..., fusion: _Optional[_Union[Fusion, str]] = ..., rrf_k: _Optional[int] = ..., weights: _Optional[_Mapping[str, float]] = ..., filters: _Optional[_Iterable[_Union[FieldFilter, _Mapping]]] = ..., dense_floor: _Optional[float] = ..., limit: _Optional[int] = ..., drop_off: _Optional[float] = ..., embedder_model: _Optional[str] = ..., group_by: _Optional[_Union[GroupBy, str]] = ..., multi_vector: _Optional[_Iterable[_Union[_common_pb2.DenseVector, _Mapping]]] = ..., late_interaction_depth: _Optional[int] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("chunk", "score", "path_ranks", "path_scores", "matching_chunks", "other_headings")
    class PathRanksEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class PathScoresEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    PATH_RANKS_FIELD_NUMBER: _ClassVar[int]
    PATH_SCORES_FIELD_NUMBER: _ClassVar[int]
    MATCHING_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    OTHER_HEADINGS_FIELD_NUMBER: _ClassVar[int]
    chunk: Chunk
    score: float
    path_ranks: _containers.ScalarMap[str, int]
    path_scores: _containers.ScalarMap[str, float]
    matching_chunks: int
    other_headings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, chunk: _Optional[_Union[Chunk, _Mapping]] = ..., score: _Optional[float] = ..., path_ranks: _Optional[_Mapping[str, int]] = ..., path_scores: _Optional[_Mapping[str, float]] = ..., matching_chunks: _Optional[int] = ..., other_headings: _Optional[_Iterable[str]] = ...) -> None: ...

class PathReport(_message.Message):
    __slots__ = ("path", "ms", "hits", "skipped", "reason")
    PATH_FIELD_NUMBER: _ClassVar[int]
    MS_FIELD_NUMBER: _ClassVar[int]
    HITS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    path: SearchPath
    ms: float
    hits: int
    skipped: bool
    reason: str
    def __init__(self, path: _Optional[_Union[SearchPath, str]] = ..., ms: _Optional[float] = ..., hits: _Optional[int] = ..., skipped: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits", "paths", "timing", "late_interaction")
    HITS_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    LATE_INTERACTION_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    paths: _containers.RepeatedCompositeFieldContainer[PathReport]
    timing: _common_pb2.Timing
    late_interaction: LateInteractionReport
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ..., paths: _Optional[_Iterable[_Union[PathReport, _Mapping]]] = ..., timing: _Optional[_Union[_common_pb2.Timing, _Mapping]] = ..., late_interaction: _Optional[_Union[LateInteractionReport, _Mapping]] = ...) -> None: ...

class LateInteractionReport(_message.Message):
    __slots__ = ("rescored", "ms", "skipped", "reason")
    RESCORED_FIELD_NUMBER: _ClassVar[int]
    MS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    rescored: int
    ms: float
    skipped: bool
    reason: str
    def __init__(self, rescored: _Optional[int] = ..., ms: _Optional[float] = ..., skipped: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("collections", "engine")
    COLLECTIONS_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    collections: _containers.RepeatedCompositeFieldContainer[Collection]
    engine: str
    def __init__(self, collections: _Optional[_Iterable[_Union[Collection, _Mapping]]] = ..., engine: _Optional[str] = ...) -> None: ...

class InfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class InfoResponse(_message.Message):
    __slots__ = ("engine", "location", "embedder", "collections", "storage_warning")
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    COLLECTIONS_FIELD_NUMBER: _ClassVar[int]
    STORAGE_WARNING_FIELD_NUMBER: _ClassVar[int]
    engine: str
    location: str
    embedder: str
    collections: int
    storage_warning: str
    def __init__(self, engine: _Optional[str] = ..., location: _Optional[str] = ..., embedder: _Optional[str] = ..., collections: _Optional[int] = ..., storage_warning: _Optional[str] = ...) -> None: ...

class IngestJob(_message.Message):
    __slots__ = ("documents", "create_collection", "full_reindex")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    CREATE_COLLECTION_FIELD_NUMBER: _ClassVar[int]
    FULL_REINDEX_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[Document]
    create_collection: bool
    full_reindex: bool
    def __init__(self, documents: _Optional[_Iterable[_Union[Document, _Mapping]]] = ..., create_collection: _Optional[bool] = ..., full_reindex: _Optional[bool] = ...) -> None: ...

class StartJobRequest(_message.Message):
    __slots__ = ("collection", "ingest", "sync")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    INGEST_FIELD_NUMBER: _ClassVar[int]
    SYNC_FIELD_NUMBER: _ClassVar[int]
    collection: str
    ingest: IngestJob
    sync: SyncDefinition
    def __init__(self, collection: _Optional[str] = ..., ingest: _Optional[_Union[IngestJob, _Mapping]] = ..., sync: _Optional[_Union[SyncDefinition, _Mapping]] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("id", "tenant")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant: str
    def __init__(self, id: _Optional[str] = ..., tenant: _Optional[str] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("id", "tenant")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant: str
    def __init__(self, id: _Optional[str] = ..., tenant: _Optional[str] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("collection", "limit", "tenant")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    collection: str
    limit: int
    tenant: str
    def __init__(self, collection: _Optional[str] = ..., limit: _Optional[int] = ..., tenant: _Optional[str] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[Job]
    def __init__(self, jobs: _Optional[_Iterable[_Union[Job, _Mapping]]] = ...) -> None: ...

class JobCounts(_message.Message):
    __slots__ = ("total", "done", "ingested", "updated", "unchanged", "skipped", "failed", "deleted", "chunks_written")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    INGESTED_FIELD_NUMBER: _ClassVar[int]
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    total: int
    done: int
    ingested: int
    updated: int
    unchanged: int
    skipped: int
    failed: int
    deleted: int
    chunks_written: int
    def __init__(self, total: _Optional[int] = ..., done: _Optional[int] = ..., ingested: _Optional[int] = ..., updated: _Optional[int] = ..., unchanged: _Optional[int] = ..., skipped: _Optional[int] = ..., failed: _Optional[int] = ..., deleted: _Optional[int] = ..., chunks_written: _Optional[int] = ...) -> None: ...

class JobDocument(_message.Message):
    __slots__ = ("source_id", "outcome", "chunks", "error")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    outcome: str
    chunks: int
    error: str
    def __init__(self, source_id: _Optional[str] = ..., outcome: _Optional[str] = ..., chunks: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class JobRename(_message.Message):
    __slots__ = ("from_id", "to_id")
    FROM_ID_FIELD_NUMBER: _ClassVar[int]
    TO_ID_FIELD_NUMBER: _ClassVar[int]
    from_id: str
    to_id: str
    def __init__(self, from_id: _Optional[str] = ..., to_id: _Optional[str] = ...) -> None: ...

class JobDelta(_message.Message):
    __slots__ = ("new", "changed", "unchanged", "deleted", "renamed")
    NEW_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    RENAMED_FIELD_NUMBER: _ClassVar[int]
    new: _containers.RepeatedScalarFieldContainer[str]
    changed: _containers.RepeatedScalarFieldContainer[str]
    unchanged: int
    deleted: _containers.RepeatedScalarFieldContainer[str]
    renamed: _containers.RepeatedCompositeFieldContainer[JobRename]
    def __init__(self, new: _Optional[_Iterable[str]] = ..., changed: _Optional[_Iterable[str]] = ..., unchanged: _Optional[int] = ..., deleted: _Optional[_Iterable[str]] = ..., renamed: _Optional[_Iterable[_Union[JobRename, _Mapping]]] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ("id", "collection", "kind", "state", "created_at", "started_at", "finished_at", "counts", "documents", "error", "delta", "cancel_requested", "tenant")
    ID_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    id: str
    collection: str
    kind: JobKind
    state: JobState
    created_at: float
    started_at: float
    finished_at: float
    counts: JobCounts
    documents: _containers.RepeatedCompositeFieldContainer[JobDocument]
    error: str
    delta: JobDelta
    cancel_requested: bool
    tenant: str
    def __init__(self, id: _Optional[str] = ..., collection: _Optional[str] = ..., kind: _Optional[_Union[JobKind, str]] = ..., state: _Optional[_Union[JobState, str]] = ..., created_at: _Optional[float] = ..., started_at: _Optional[float] = ..., finished_at: _Optional[float] = ..., counts: _Optional[_Union[JobCounts, _Mapping]] = ..., documents: _Optional[_Iterable[_Union[JobDocument, _Mapping]]] = ..., error: _Optional[str] = ..., delta: _Optional[_Union[JobDelta, _Mapping]] = ..., cancel_requested: _Optional[bool] = ..., tenant: _Optional[str] = ...) -> None: ...

class SyncDefinition(_message.Message):
    __slots__ = ("kind", "location", "include", "exclude", "max_bytes", "page_limit", "delay_s", "prefix", "url_prefix")
    KIND_FIELD_NUMBER: _ClassVar[int]
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    PAGE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    DELAY_S_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    URL_PREFIX_FIELD_NUMBER: _ClassVar[int]
    kind: SyncSourceKind
    location: str
    include: _containers.RepeatedScalarFieldContainer[str]
    exclude: _containers.RepeatedScalarFieldContainer[str]
    max_bytes: int
    page_limit: int
    delay_s: float
    prefix: str
    url_prefix: str
    def __init__(self, kind: _Optional[_Union[SyncSourceKind, str]] = ..., location: _Optional[str] = ..., include: _Optional[_Iterable[str]] = ..., exclude: _Optional[_Iterable[str]] = ..., max_bytes: _Optional[int] = ..., page_limit: _Optional[int] = ..., delay_s: _Optional[float] = ..., prefix: _Optional[str] = ..., url_prefix: _Optional[str] = ...) -> None: ...

class SyncRequest(_message.Message):
    __slots__ = ("collection", "definition", "dry_run")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    collection: str
    definition: SyncDefinition
    dry_run: bool
    def __init__(self, collection: _Optional[str] = ..., definition: _Optional[_Union[SyncDefinition, _Mapping]] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class SyncSource(_message.Message):
    __slots__ = ("source_id", "outcome", "chunks", "reason")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    outcome: str
    chunks: int
    reason: str
    def __init__(self, source_id: _Optional[str] = ..., outcome: _Optional[str] = ..., chunks: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class SyncEvent(_message.Message):
    __slots__ = ("progress", "report")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    progress: SyncProgress
    report: SyncReport
    def __init__(self, progress: _Optional[_Union[SyncProgress, _Mapping]] = ..., report: _Optional[_Union[SyncReport, _Mapping]] = ...) -> None: ...

class SyncProgress(_message.Message):
    __slots__ = ("phase", "done", "total", "source")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    phase: str
    done: int
    total: int
    source: SyncSource
    def __init__(self, phase: _Optional[str] = ..., done: _Optional[int] = ..., total: _Optional[int] = ..., source: _Optional[_Union[SyncSource, _Mapping]] = ...) -> None: ...

class SyncReport(_message.Message):
    __slots__ = ("collection", "delta", "sources", "chunks_written", "dry_run", "complete", "cancelled", "seconds")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    collection: str
    delta: JobDelta
    sources: _containers.RepeatedCompositeFieldContainer[SyncSource]
    chunks_written: int
    dry_run: bool
    complete: bool
    cancelled: bool
    seconds: float
    def __init__(self, collection: _Optional[str] = ..., delta: _Optional[_Union[JobDelta, _Mapping]] = ..., sources: _Optional[_Iterable[_Union[SyncSource, _Mapping]]] = ..., chunks_written: _Optional[int] = ..., dry_run: _Optional[bool] = ..., complete: _Optional[bool] = ..., cancelled: _Optional[bool] = ..., seconds: _Optional[float] = ...) -> None: ...

class LookupLiveRequest(_message.Message):
    __slots__ = ("collection", "query", "max_lookups", "allowed_domains", "limit", "timeout_s", "domains_only")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    MAX_LOOKUPS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_DOMAINS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    DOMAINS_ONLY_FIELD_NUMBER: _ClassVar[int]
    collection: str
    query: str
    max_lookups: int
    allowed_domains: _containers.RepeatedScalarFieldContainer[str]
    limit: int
    timeout_s: float
    domains_only: bool
    def __init__(self, collection: _Optional[str] = ..., query: _Optional[str] = ..., max_lookups: _Optional[int] = ..., allowed_domains: _Optional[_Iterable[str]] = ..., limit: _Optional[int] = ..., timeout_s: _Optional[float] = ..., domains_only: _Optional[bool] = ...) -> None: ...

class LiveFetch(_message.Message):
    __slots__ = ("url", "outcome", "reason", "fetched_at")
    URL_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FETCHED_AT_FIELD_NUMBER: _ClassVar[int]
    url: str
    outcome: str
    reason: str
    fetched_at: float
    def __init__(self, url: _Optional[str] = ..., outcome: _Optional[str] = ..., reason: _Optional[str] = ..., fetched_at: _Optional[float] = ...) -> None: ...

class LookupLiveResponse(_message.Message):
    __slots__ = ("hits", "fetches", "lookups", "allowed_domains", "candidates", "seconds")
    HITS_FIELD_NUMBER: _ClassVar[int]
    FETCHES_FIELD_NUMBER: _ClassVar[int]
    LOOKUPS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_DOMAINS_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    fetches: _containers.RepeatedCompositeFieldContainer[LiveFetch]
    lookups: int
    allowed_domains: _containers.RepeatedScalarFieldContainer[str]
    candidates: int
    seconds: float
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ..., fetches: _Optional[_Iterable[_Union[LiveFetch, _Mapping]]] = ..., lookups: _Optional[int] = ..., allowed_domains: _Optional[_Iterable[str]] = ..., candidates: _Optional[int] = ..., seconds: _Optional[float] = ...) -> None: ...
