"""The retriever's wire conversions refuse enum values they do not know instead of
quietly reading them as another (a newer client's fusion method used to become RRF)."""

from __future__ import annotations

import pytest

from groundwire.retriever.v1 import retriever_pb2
from groundwire_core.errors import InvalidInput
from groundwire_retriever.convert import document_from_proto, query_from_proto
from groundwire_retriever.domain import Fusion


def test_every_wire_fusion_has_a_domain_method() -> None:
    for name, value in retriever_pb2.Fusion.items():
        query = query_from_proto(retriever_pb2.SearchRequest(text="x", fusion=value))
        if value == retriever_pb2.FUSION_UNSPECIFIED:
            assert query.fusion is Fusion.RRF  # the documented default
        else:
            assert query.fusion.name == name.removeprefix("FUSION_")


def test_an_unknown_fusion_value_is_invalid() -> None:
    request = retriever_pb2.SearchRequest(text="x")
    request.fusion = 99  # proto3 enums are open: a newer client's value arrives as is
    with pytest.raises(InvalidInput, match="unknown fusion value 99"):
        query_from_proto(request)


def test_an_unknown_path_or_format_is_invalid() -> None:
    request = retriever_pb2.SearchRequest(text="x", paths=[retriever_pb2.SEARCH_PATH_BM25, 42])
    with pytest.raises(InvalidInput, match="unknown search path value 42"):
        query_from_proto(request)
    doc = retriever_pb2.Document(source_id="a", content=b"x", format=17)
    with pytest.raises(InvalidInput, match="unknown document format value 17"):
        document_from_proto(doc)
    markdown = retriever_pb2.Document(format=retriever_pb2.DOCUMENT_FORMAT_MARKDOWN)
    assert document_from_proto(markdown).format == "markdown"
