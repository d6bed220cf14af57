"""A citation's ``chunk_span`` reaches the gateway's SSE ``citations`` JSON: the
cited chunk's range in its document, null when the orchestrator sent none."""

from __future__ import annotations

from groundwire.orchestrator.v1 import orchestrator_pb2 as pb
from groundwire_gateway import models
from groundwire_gateway.upstream import _event


def test_the_gateway_sends_the_chunk_span_and_null_when_absent() -> None:
    event = pb.AskEvent(
        citations=pb.CitationsEvent(
            citations=[
                pb.Citation(number=1, sentence="A [1].", chunk_span=pb.Span(start=7, end=40)),
                pb.Citation(number=2, sentence="B [2]."),
            ]
        )
    )
    got = _event(event)
    assert isinstance(got, models.CitationsEvent)
    first, second = got.model_dump(mode="json")["citations"]
    assert (first["chunk_span"], second["chunk_span"]) == ([7, 40], None)
