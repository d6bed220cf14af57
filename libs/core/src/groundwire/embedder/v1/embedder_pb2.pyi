from groundwire.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TextKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TEXT_KIND_UNSPECIFIED: _ClassVar[TextKind]
    TEXT_KIND_QUERY: _ClassVar[TextKind]
    TEXT_KIND_DOCUMENT: _ClassVar[TextKind]

class Output(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTPUT_UNSPECIFIED: _ClassVar[Output]
    OUTPUT_DENSE: _ClassVar[Output]
    OUTPUT_SPARSE: _ClassVar[Output]
    OUTPUT_MULTI_VECTOR: _ClassVar[Output]
TEXT_KIND_UNSPECIFIED: TextKind
TEXT_KIND_QUERY: TextKind
TEXT_KIND_DOCUMENT: TextKind
OUTPUT_UNSPECIFIED: Output
OUTPUT_DENSE: Output
OUTPUT_SPARSE: Output
OUTPUT_MULTI_VECTOR: Output

class EmbedRequest(_message.Message):
    __slots__ = ("texts", "kind", "outputs", "bulk")
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    BULK_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedScalarFieldContainer[str]
    kind: TextKind
    outputs: _containers.RepeatedScalarFieldContainer[Output]
    bulk: bool
    def __init__(self, texts: _Optional[_Iterable[str]] = ..., kind: _Optional[_Union[TextKind, str]] = ..., outputs: _Optional[_Iterable[_Union[Output, str]]] = ..., bulk: _Optional[bool] = ...) -> None: ...

class Embedding(_message.Message):
    __slots__ = ("dense", "sparse", "multi_vector", "tokens", "truncated")
    DENSE_FIELD_NUMBER: _ClassVar[int]
    SPARSE_FIELD_NUMBER: _ClassVar[int]
    MULTI_VECTOR_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    dense: _common_pb2.DenseVector
    sparse: _common_pb2.SparseVector
    multi_vector: _containers.RepeatedCompositeFieldContainer[_common_pb2.DenseVector]
    tokens: int
    truncated: bool
    def __init__(self, dense: _Optional[_Union[_common_pb2.DenseVector, _Mapping]] = ..., sparse: _Optional[_Union[_common_pb2.SparseVector, _Mapping]] = ..., multi_vector: _Optional[_Iterable[_Union[_common_pb2.DenseVector, _Mapping]]] = ..., tokens: _Optional[int] = ..., truncated: _Optional[bool] = ...) -> None: ...

class EmbedResponse(_message.Message):
    __slots__ = ("embeddings", "total_tokens", "timing", "model_id")
    EMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    embeddings: _containers.RepeatedCompositeFieldContainer[Embedding]
    total_tokens: int
    timing: _common_pb2.Timing
    model_id: str
    def __init__(self, embeddings: _Optional[_Iterable[_Union[Embedding, _Mapping]]] = ..., total_tokens: _Optional[int] = ..., timing: _Optional[_Union[_common_pb2.Timing, _Mapping]] = ..., model_id: _Optional[str] = ...) -> None: ...

class InfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class InfoResponse(_message.Message):
    __slots__ = ("model_id", "profile", "dense_dims", "multi_vector_dims", "max_tokens", "outputs", "quantized", "max_batch_texts")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    DENSE_DIMS_FIELD_NUMBER: _ClassVar[int]
    MULTI_VECTOR_DIMS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    QUANTIZED_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_TEXTS_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    profile: str
    dense_dims: int
    multi_vector_dims: int
    max_tokens: int
    outputs: _containers.RepeatedScalarFieldContainer[Output]
    quantized: bool
    max_batch_texts: int
    def __init__(self, model_id: _Optional[str] = ..., profile: _Optional[str] = ..., dense_dims: _Optional[int] = ..., multi_vector_dims: _Optional[int] = ..., max_tokens: _Optional[int] = ..., outputs: _Optional[_Iterable[_Union[Output, str]]] = ..., quantized: _Optional[bool] = ..., max_batch_texts: _Optional[int] = ...) -> None: ...

class TokenizeRequest(_message.Message):
    __slots__ = ("texts",)
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, texts: _Optional[_Iterable[str]] = ...) -> None: ...

class TokenizeResponse(_message.Message):
    __slots__ = ("counts", "truncated")
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    counts: _containers.RepeatedScalarFieldContainer[int]
    truncated: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, counts: _Optional[_Iterable[int]] = ..., truncated: _Optional[_Iterable[bool]] = ...) -> None: ...
