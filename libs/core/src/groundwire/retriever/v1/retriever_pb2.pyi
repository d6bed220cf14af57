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

class DocumentStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DOCUMENT_STATUS_UNSPECIFIED: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_INGESTED: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_UNCHANGED: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_SKIPPED: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_UPDATED: _ClassVar[DocumentStatus]
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
DOCUMENT_STATUS_UNSPECIFIED: DocumentStatus
DOCUMENT_STATUS_INGESTED: DocumentStatus
DOCUMENT_STATUS_UNCHANGED: DocumentStatus
DOCUMENT_STATUS_SKIPPED: DocumentStatus
DOCUMENT_STATUS_UPDATED: DocumentStatus

class Collection(_message.Message):
    __slots__ = ("name", "dense_dims", "learned_sparse", "bm25", "filterable", "embedder_model", "chunks", "sources")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DENSE_DIMS_FIELD_NUMBER: _ClassVar[int]
    LEARNED_SPARSE_FIELD_NUMBER: _ClassVar[int]
    BM25_FIELD_NUMBER: _ClassVar[int]
    FILTERABLE_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_MODEL_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    name: str
    dense_dims: int
    learned_sparse: bool
    bm25: bool
    filterable: _containers.RepeatedScalarFieldContainer[str]
    embedder_model: str
    chunks: int
    sources: int
    def __init__(self, name: _Optional[str] = ..., dense_dims: _Optional[int] = ..., learned_sparse: _Optional[bool] = ..., bm25: _Optional[bool] = ..., filterable: _Optional[_Iterable[str]] = ..., embedder_model: _Optional[str] = ..., chunks: _Optional[int] = ..., sources: _Optional[int] = ...) -> None: ...

class CreateCollectionRequest(_message.Message):
    __slots__ = ("name", "filterable")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FILTERABLE_FIELD_NUMBER: _ClassVar[int]
    name: str
    filterable: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., filterable: _Optional[_Iterable[str]] = ...) -> None: ...

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
    __slots__ = ("source_id", "content", "format", "title", "url", "doc_type", "filename", "metadata")
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
    source_id: str
    content: bytes
    format: DocumentFormat
    title: str
    url: str
    doc_type: str
    filename: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, source_id: _Optional[str] = ..., content: _Optional[bytes] = ..., format: _Optional[_Union[DocumentFormat, str]] = ..., title: _Optional[str] = ..., url: _Optional[str] = ..., doc_type: _Optional[str] = ..., filename: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

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
    __slots__ = ("chunk_id", "source_id", "text", "title", "heading_path", "chunk_index", "url", "doc_type", "content_hash", "metadata", "created_at", "dense", "sparse")
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
    def __init__(self, chunk_id: _Optional[str] = ..., source_id: _Optional[str] = ..., text: _Optional[str] = ..., title: _Optional[str] = ..., heading_path: _Optional[_Iterable[str]] = ..., chunk_index: _Optional[int] = ..., url: _Optional[str] = ..., doc_type: _Optional[str] = ..., content_hash: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., created_at: _Optional[float] = ..., dense: _Optional[_Union[_common_pb2.DenseVector, _Mapping]] = ..., sparse: _Optional[_Union[_common_pb2.SparseVector, _Mapping]] = ...) -> None: ...

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
    __slots__ = ("collection", "text", "dense", "sparse", "paths", "path_limit", "fusion", "rrf_k", "weights", "filters", "dense_floor", "limit", "drop_off", "embedder_model")
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
    def __init__(self, collection: _Optional[str] = ..., text: _Optional[str] = ..., dense: _Optional[_Union[_common_pb2.DenseVector, _Mapping]] = ..., sparse: _Optional[_Union[_common_pb2.SparseVector, _Mapping]] = ..., paths: _Optional[_Iterable[_Union[SearchPath, str]]] = ..., path_limit: _Optional[int] = ..., fusion: _Optional[_Union[Fusion, str]] = ..., rrf_k: _Optional[int] = ..., weights: _Optional[_Mapping[str, float]] = ..., filters: _Optional[_Iterable[_Union[FieldFilter, _Mapping]]] = ..., dense_floor: _Optional[float] = ..., limit: _Optional[int] = ..., drop_off: _Optional[float] = ..., embedder_model: _Optional[str] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("chunk", "score", "path_ranks", "path_scores")
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
    chunk: Chunk
    score: float
    path_ranks: _containers.ScalarMap[str, int]
    path_scores: _containers.ScalarMap[str, float]
    def __init__(self, chunk: _Optional[_Union[Chunk, _Mapping]] = ..., score: _Optional[float] = ..., path_ranks: _Optional[_Mapping[str, int]] = ..., path_scores: _Optional[_Mapping[str, float]] = ...) -> None: ...

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
    __slots__ = ("hits", "paths", "timing")
    HITS_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    paths: _containers.RepeatedCompositeFieldContainer[PathReport]
    timing: _common_pb2.Timing
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ..., paths: _Optional[_Iterable[_Union[PathReport, _Mapping]]] = ..., timing: _Optional[_Union[_common_pb2.Timing, _Mapping]] = ...) -> None: ...

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
