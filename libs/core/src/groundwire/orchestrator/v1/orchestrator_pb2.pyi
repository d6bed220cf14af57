from groundwire.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_USER: _ClassVar[Role]
    ROLE_ASSISTANT: _ClassVar[Role]

class VerificationStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERIFICATION_STATUS_UNSPECIFIED: _ClassVar[VerificationStatus]
    VERIFICATION_STATUS_SUPPORTED: _ClassVar[VerificationStatus]
    VERIFICATION_STATUS_UNSUPPORTED: _ClassVar[VerificationStatus]
    VERIFICATION_STATUS_UNCHECKED: _ClassVar[VerificationStatus]
    VERIFICATION_STATUS_CONTRADICTED: _ClassVar[VerificationStatus]
    VERIFICATION_STATUS_QUOTED: _ClassVar[VerificationStatus]
    VERIFICATION_STATUS_SIMILAR: _ClassVar[VerificationStatus]
    VERIFICATION_STATUS_UNRELATED: _ClassVar[VerificationStatus]

class AnswerMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ANSWER_MODE_UNSPECIFIED: _ClassVar[AnswerMode]
    ANSWER_MODE_GENERATED: _ClassVar[AnswerMode]
    ANSWER_MODE_EXTRACTIVE: _ClassVar[AnswerMode]
    ANSWER_MODE_DECLINED: _ClassVar[AnswerMode]

class GroupBy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    GROUP_BY_UNSPECIFIED: _ClassVar[GroupBy]
    GROUP_BY_CHUNK: _ClassVar[GroupBy]
    GROUP_BY_DOCUMENT: _ClassVar[GroupBy]

class Fusion(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FUSION_UNSPECIFIED: _ClassVar[Fusion]
    FUSION_RRF: _ClassVar[Fusion]
    FUSION_WEIGHTED: _ClassVar[Fusion]

class DependencyStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEPENDENCY_STATUS_UNSPECIFIED: _ClassVar[DependencyStatus]
    DEPENDENCY_STATUS_SERVING: _ClassVar[DependencyStatus]
    DEPENDENCY_STATUS_NOT_SERVING: _ClassVar[DependencyStatus]
    DEPENDENCY_STATUS_DISABLED: _ClassVar[DependencyStatus]
ROLE_UNSPECIFIED: Role
ROLE_USER: Role
ROLE_ASSISTANT: Role
VERIFICATION_STATUS_UNSPECIFIED: VerificationStatus
VERIFICATION_STATUS_SUPPORTED: VerificationStatus
VERIFICATION_STATUS_UNSUPPORTED: VerificationStatus
VERIFICATION_STATUS_UNCHECKED: VerificationStatus
VERIFICATION_STATUS_CONTRADICTED: VerificationStatus
VERIFICATION_STATUS_QUOTED: VerificationStatus
VERIFICATION_STATUS_SIMILAR: VerificationStatus
VERIFICATION_STATUS_UNRELATED: VerificationStatus
ANSWER_MODE_UNSPECIFIED: AnswerMode
ANSWER_MODE_GENERATED: AnswerMode
ANSWER_MODE_EXTRACTIVE: AnswerMode
ANSWER_MODE_DECLINED: AnswerMode
GROUP_BY_UNSPECIFIED: GroupBy
GROUP_BY_CHUNK: GroupBy
GROUP_BY_DOCUMENT: GroupBy
FUSION_UNSPECIFIED: Fusion
FUSION_RRF: Fusion
FUSION_WEIGHTED: Fusion
DEPENDENCY_STATUS_UNSPECIFIED: DependencyStatus
DEPENDENCY_STATUS_SERVING: DependencyStatus
DEPENDENCY_STATUS_NOT_SERVING: DependencyStatus
DEPENDENCY_STATUS_DISABLED: DependencyStatus

class Message(_message.Message):
    __slots__ = ("role", "content")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    role: Role
    content: str
    def __init__(self, role: _Optional[_Union[Role, str]] = ..., content: _Optional[str] = ...) -> None: ...

class FieldFilter(_message.Message):
    __slots__ = ("field", "any_of")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    ANY_OF_FIELD_NUMBER: _ClassVar[int]
    field: str
    any_of: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, field: _Optional[str] = ..., any_of: _Optional[_Iterable[str]] = ...) -> None: ...

class AskRequest(_message.Message):
    __slots__ = ("collection", "messages", "filters", "listwise_rerank", "max_agent_steps", "instructions")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    LISTWISE_RERANK_FIELD_NUMBER: _ClassVar[int]
    MAX_AGENT_STEPS_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    collection: str
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    filters: _containers.RepeatedCompositeFieldContainer[FieldFilter]
    listwise_rerank: bool
    max_agent_steps: int
    instructions: str
    def __init__(self, collection: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., filters: _Optional[_Iterable[_Union[FieldFilter, _Mapping]]] = ..., listwise_rerank: _Optional[bool] = ..., max_agent_steps: _Optional[int] = ..., instructions: _Optional[str] = ...) -> None: ...

class Source(_message.Message):
    __slots__ = ("number", "chunk_id", "source_id", "title", "heading_path", "url", "text", "score", "match_reason", "injection_flagged", "matching_chunks", "other_headings", "live", "fetched_at")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    HEADING_PATH_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    MATCH_REASON_FIELD_NUMBER: _ClassVar[int]
    INJECTION_FLAGGED_FIELD_NUMBER: _ClassVar[int]
    MATCHING_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    OTHER_HEADINGS_FIELD_NUMBER: _ClassVar[int]
    LIVE_FIELD_NUMBER: _ClassVar[int]
    FETCHED_AT_FIELD_NUMBER: _ClassVar[int]
    number: int
    chunk_id: str
    source_id: str
    title: str
    heading_path: _containers.RepeatedScalarFieldContainer[str]
    url: str
    text: str
    score: float
    match_reason: str
    injection_flagged: bool
    matching_chunks: int
    other_headings: _containers.RepeatedScalarFieldContainer[str]
    live: bool
    fetched_at: float
    def __init__(self, number: _Optional[int] = ..., chunk_id: _Optional[str] = ..., source_id: _Optional[str] = ..., title: _Optional[str] = ..., heading_path: _Optional[_Iterable[str]] = ..., url: _Optional[str] = ..., text: _Optional[str] = ..., score: _Optional[float] = ..., match_reason: _Optional[str] = ..., injection_flagged: _Optional[bool] = ..., matching_chunks: _Optional[int] = ..., other_headings: _Optional[_Iterable[str]] = ..., live: _Optional[bool] = ..., fetched_at: _Optional[float] = ...) -> None: ...

class RetrievalEvent(_message.Message):
    __slots__ = ("sources",)
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    sources: _containers.RepeatedCompositeFieldContainer[Source]
    def __init__(self, sources: _Optional[_Iterable[_Union[Source, _Mapping]]] = ...) -> None: ...

class DeltaEvent(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ResetEvent(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class Span(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: int
    end: int
    def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class Citation(_message.Message):
    __slots__ = ("number", "sentence", "status", "support", "method", "contradiction", "answer_span", "source_span", "reason", "chunk_span")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    SENTENCE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SUPPORT_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    CONTRADICTION_FIELD_NUMBER: _ClassVar[int]
    ANSWER_SPAN_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SPAN_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SPAN_FIELD_NUMBER: _ClassVar[int]
    number: int
    sentence: str
    status: VerificationStatus
    support: float
    method: str
    contradiction: float
    answer_span: Span
    source_span: Span
    reason: str
    chunk_span: Span
    def __init__(self, number: _Optional[int] = ..., sentence: _Optional[str] = ..., status: _Optional[_Union[VerificationStatus, str]] = ..., support: _Optional[float] = ..., method: _Optional[str] = ..., contradiction: _Optional[float] = ..., answer_span: _Optional[_Union[Span, _Mapping]] = ..., source_span: _Optional[_Union[Span, _Mapping]] = ..., reason: _Optional[str] = ..., chunk_span: _Optional[_Union[Span, _Mapping]] = ...) -> None: ...

class Withheld(_message.Message):
    __slots__ = ("sentence", "numbers", "status", "reason")
    SENTENCE_FIELD_NUMBER: _ClassVar[int]
    NUMBERS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    sentence: str
    numbers: _containers.RepeatedScalarFieldContainer[int]
    status: VerificationStatus
    reason: str
    def __init__(self, sentence: _Optional[str] = ..., numbers: _Optional[_Iterable[int]] = ..., status: _Optional[_Union[VerificationStatus, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class CitationsEvent(_message.Message):
    __slots__ = ("sources", "citations", "withheld")
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_FIELD_NUMBER: _ClassVar[int]
    WITHHELD_FIELD_NUMBER: _ClassVar[int]
    sources: _containers.RepeatedCompositeFieldContainer[Source]
    citations: _containers.RepeatedCompositeFieldContainer[Citation]
    withheld: _containers.RepeatedCompositeFieldContainer[Withheld]
    def __init__(self, sources: _Optional[_Iterable[_Union[Source, _Mapping]]] = ..., citations: _Optional[_Iterable[_Union[Citation, _Mapping]]] = ..., withheld: _Optional[_Iterable[_Union[Withheld, _Mapping]]] = ...) -> None: ...

class StagesEvent(_message.Message):
    __slots__ = ("stages",)
    STAGES_FIELD_NUMBER: _ClassVar[int]
    stages: _containers.RepeatedCompositeFieldContainer[_common_pb2.StageReport]
    def __init__(self, stages: _Optional[_Iterable[_Union[_common_pb2.StageReport, _Mapping]]] = ...) -> None: ...

class DoneEvent(_message.Message):
    __slots__ = ("mode", "answer", "unsupported_citations", "llm_usage")
    MODE_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    UNSUPPORTED_CITATIONS_FIELD_NUMBER: _ClassVar[int]
    LLM_USAGE_FIELD_NUMBER: _ClassVar[int]
    mode: AnswerMode
    answer: str
    unsupported_citations: int
    llm_usage: LlmUsage
    def __init__(self, mode: _Optional[_Union[AnswerMode, str]] = ..., answer: _Optional[str] = ..., unsupported_citations: _Optional[int] = ..., llm_usage: _Optional[_Union[LlmUsage, _Mapping]] = ...) -> None: ...

class AskEvent(_message.Message):
    __slots__ = ("retrieval", "delta", "reset", "citations", "stages", "done", "error")
    RETRIEVAL_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    retrieval: RetrievalEvent
    delta: DeltaEvent
    reset: ResetEvent
    citations: CitationsEvent
    stages: StagesEvent
    done: DoneEvent
    error: _common_pb2.ErrorInfo
    def __init__(self, retrieval: _Optional[_Union[RetrievalEvent, _Mapping]] = ..., delta: _Optional[_Union[DeltaEvent, _Mapping]] = ..., reset: _Optional[_Union[ResetEvent, _Mapping]] = ..., citations: _Optional[_Union[CitationsEvent, _Mapping]] = ..., stages: _Optional[_Union[StagesEvent, _Mapping]] = ..., done: _Optional[_Union[DoneEvent, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("collection", "query", "limit", "filters", "rerank", "reasons", "fusion", "fusion_weights", "group_by")
    class FusionWeightsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    RERANK_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    FUSION_FIELD_NUMBER: _ClassVar[int]
    FUSION_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    GROUP_BY_FIELD_NUMBER: _ClassVar[int]
    collection: str
    query: str
    limit: int
    filters: _containers.RepeatedCompositeFieldContainer[FieldFilter]
    rerank: bool
    reasons: bool
    fusion: Fusion
    fusion_weights: _containers.ScalarMap[str, float]
    group_by: GroupBy
    def __init__(self, collection: _Optional[str] = ..., query: _Optional[str] = ..., limit: _Optional[int] = ..., filters: _Optional[_Iterable[_Union[FieldFilter, _Mapping]]] = ..., rerank: _Optional[bool] = ..., reasons: _Optional[bool] = ..., fusion: _Optional[_Union[Fusion, str]] = ..., fusion_weights: _Optional[_Mapping[str, float]] = ..., group_by: _Optional[_Union[GroupBy, str]] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("results", "stages", "llm_usage")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    LLM_USAGE_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[Source]
    stages: _containers.RepeatedCompositeFieldContainer[_common_pb2.StageReport]
    llm_usage: LlmUsage
    def __init__(self, results: _Optional[_Iterable[_Union[Source, _Mapping]]] = ..., stages: _Optional[_Iterable[_Union[_common_pb2.StageReport, _Mapping]]] = ..., llm_usage: _Optional[_Union[LlmUsage, _Mapping]] = ...) -> None: ...

class LlmUsage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "estimated")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    estimated: bool
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., estimated: _Optional[bool] = ...) -> None: ...

class DependenciesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Dependency(_message.Message):
    __slots__ = ("name", "status", "target", "latency_ms", "message")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    status: DependencyStatus
    target: str
    latency_ms: float
    message: str
    def __init__(self, name: _Optional[str] = ..., status: _Optional[_Union[DependencyStatus, str]] = ..., target: _Optional[str] = ..., latency_ms: _Optional[float] = ..., message: _Optional[str] = ...) -> None: ...

class DependenciesResponse(_message.Message):
    __slots__ = ("dependencies",)
    DEPENDENCIES_FIELD_NUMBER: _ClassVar[int]
    dependencies: _containers.RepeatedCompositeFieldContainer[Dependency]
    def __init__(self, dependencies: _Optional[_Iterable[_Union[Dependency, _Mapping]]] = ...) -> None: ...

class InfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class InfoResponse(_message.Message):
    __slots__ = ("llm_providers", "reranker_configured", "candidates", "rerank_keep", "max_agent_steps")
    LLM_PROVIDERS_FIELD_NUMBER: _ClassVar[int]
    RERANKER_CONFIGURED_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    RERANK_KEEP_FIELD_NUMBER: _ClassVar[int]
    MAX_AGENT_STEPS_FIELD_NUMBER: _ClassVar[int]
    llm_providers: _containers.RepeatedScalarFieldContainer[str]
    reranker_configured: bool
    candidates: int
    rerank_keep: int
    max_agent_steps: int
    def __init__(self, llm_providers: _Optional[_Iterable[str]] = ..., reranker_configured: _Optional[bool] = ..., candidates: _Optional[int] = ..., rerank_keep: _Optional[int] = ..., max_agent_steps: _Optional[int] = ...) -> None: ...
