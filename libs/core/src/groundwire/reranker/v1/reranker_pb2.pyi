from groundwire.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RerankRequest(_message.Message):
    __slots__ = ("query", "passages", "top_n", "threshold")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    PASSAGES_FIELD_NUMBER: _ClassVar[int]
    TOP_N_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    query: str
    passages: _containers.RepeatedScalarFieldContainer[str]
    top_n: int
    threshold: float
    def __init__(self, query: _Optional[str] = ..., passages: _Optional[_Iterable[str]] = ..., top_n: _Optional[int] = ..., threshold: _Optional[float] = ...) -> None: ...

class RerankResult(_message.Message):
    __slots__ = ("index", "score")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    index: int
    score: float
    def __init__(self, index: _Optional[int] = ..., score: _Optional[float] = ...) -> None: ...

class RerankResponse(_message.Message):
    __slots__ = ("results", "total_tokens", "timing")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[RerankResult]
    total_tokens: int
    timing: _common_pb2.Timing
    def __init__(self, results: _Optional[_Iterable[_Union[RerankResult, _Mapping]]] = ..., total_tokens: _Optional[int] = ..., timing: _Optional[_Union[_common_pb2.Timing, _Mapping]] = ...) -> None: ...

class InfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class InfoResponse(_message.Message):
    __slots__ = ("model_id", "profile", "max_tokens", "ready", "max_batch_passages", "queue_depth", "ms_per_passage", "quantized", "entailment_ready", "entailment_model_id", "entailment_max_tokens")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_PASSAGES_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    MS_PER_PASSAGE_FIELD_NUMBER: _ClassVar[int]
    QUANTIZED_FIELD_NUMBER: _ClassVar[int]
    ENTAILMENT_READY_FIELD_NUMBER: _ClassVar[int]
    ENTAILMENT_MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    ENTAILMENT_MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    profile: str
    max_tokens: int
    ready: bool
    max_batch_passages: int
    queue_depth: int
    ms_per_passage: float
    quantized: bool
    entailment_ready: bool
    entailment_model_id: str
    entailment_max_tokens: int
    def __init__(self, model_id: _Optional[str] = ..., profile: _Optional[str] = ..., max_tokens: _Optional[int] = ..., ready: _Optional[bool] = ..., max_batch_passages: _Optional[int] = ..., queue_depth: _Optional[int] = ..., ms_per_passage: _Optional[float] = ..., quantized: _Optional[bool] = ..., entailment_ready: _Optional[bool] = ..., entailment_model_id: _Optional[str] = ..., entailment_max_tokens: _Optional[int] = ...) -> None: ...

class EntailPair(_message.Message):
    __slots__ = ("premise", "hypothesis")
    PREMISE_FIELD_NUMBER: _ClassVar[int]
    HYPOTHESIS_FIELD_NUMBER: _ClassVar[int]
    premise: str
    hypothesis: str
    def __init__(self, premise: _Optional[str] = ..., hypothesis: _Optional[str] = ...) -> None: ...

class EntailRequest(_message.Message):
    __slots__ = ("pairs",)
    PAIRS_FIELD_NUMBER: _ClassVar[int]
    pairs: _containers.RepeatedCompositeFieldContainer[EntailPair]
    def __init__(self, pairs: _Optional[_Iterable[_Union[EntailPair, _Mapping]]] = ...) -> None: ...

class EntailProbabilities(_message.Message):
    __slots__ = ("entailment", "neutral", "contradiction")
    ENTAILMENT_FIELD_NUMBER: _ClassVar[int]
    NEUTRAL_FIELD_NUMBER: _ClassVar[int]
    CONTRADICTION_FIELD_NUMBER: _ClassVar[int]
    entailment: float
    neutral: float
    contradiction: float
    def __init__(self, entailment: _Optional[float] = ..., neutral: _Optional[float] = ..., contradiction: _Optional[float] = ...) -> None: ...

class EntailResponse(_message.Message):
    __slots__ = ("results", "total_tokens", "timing")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[EntailProbabilities]
    total_tokens: int
    timing: _common_pb2.Timing
    def __init__(self, results: _Optional[_Iterable[_Union[EntailProbabilities, _Mapping]]] = ..., total_tokens: _Optional[int] = ..., timing: _Optional[_Union[_common_pb2.Timing, _Mapping]] = ...) -> None: ...
