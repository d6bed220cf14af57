"""The fusion the retrieval stage asks for: settings FUSION and FUSION_WEIGHTS (the
product's default: weighted dense 0.4 / bm25 0.6), a search's own choice over them, and
wire values that are checked rather than read as another method."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pydantic import ValidationError

from groundwire.orchestrator.v1 import orchestrator_pb2
from groundwire.retriever.v1 import retriever_pb2
from groundwire_core.errors import InvalidInput
from groundwire_orchestrator.convert import fusion_from_proto
from groundwire_orchestrator.fusion import DEFAULT, METHODS, FusionChoice, parse_weights
from groundwire_orchestrator.settings import OrchestratorSettings
from groundwire_orchestrator.stages.retrieval import RetrievalInput, RetrievalParams, RetrievalStage
from tests.unit.orchestrator.doubles import FakeEmbedder, FakeRetriever, chunk

QUERY = RetrievalInput("docs", "rate limits per key", "rate limits per key")


def test_the_orchestrator_enum_mirrors_the_retrievers() -> None:
    assert orchestrator_pb2.Fusion.items() == retriever_pb2.Fusion.items()
    assert {"rrf", "weighted"} <= set(METHODS)


def test_settings_default_to_the_measured_best_and_parse_overrides() -> None:
    fields = OrchestratorSettings.model_fields
    assert (fields["fusion"].default, fields["fusion_weights"].default) == (
        "weighted",
        "dense=0.4,sparse=0.3,bm25=0.6",
    )
    assert OrchestratorSettings.model_construct().fusion_choice == DEFAULT
    custom = OrchestratorSettings(fusion="rrf", fusion_weights=" dense = 1, bm25=0.5 ")
    assert custom.fusion_choice == FusionChoice("rrf", {"dense": 1.0, "bm25": 0.5})


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("fusion", "nonesuch", "unknown fusion method 'nonesuch'; use one of rrf, weighted"),
        ("fusion_weights", "dense", "is not path=weight"),
        ("fusion_weights", "dense=x", "is not a number"),
        ("fusion_weights", "colbert=1", "unknown path 'colbert'"),
        ("fusion_weights", "dense=1,dense=2", "two fusion weights"),
        ("fusion_weights", "bm25=-1", "must be a number >= 0"),
        ("fusion_weights", "bm25=nan", "must be a number >= 0"),
    ],
)
def test_bad_settings_are_refused_at_start(name: str, value: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        OrchestratorSettings(**{name: value})


def test_parse_weights_accepts_none() -> None:
    assert parse_weights("") == {}


def test_a_search_request_converts_and_unknown_values_are_invalid() -> None:
    pb = orchestrator_pb2
    assert fusion_from_proto(pb.SearchRequest()) == FusionChoice()
    request = pb.SearchRequest(fusion=pb.FUSION_RRF, fusion_weights={"dense": 2.0})
    assert fusion_from_proto(request) == FusionChoice("rrf", {"dense": 2.0})
    newer = pb.SearchRequest()
    newer.fusion = 9  # proto3 enums are open: a newer client's value arrives as is
    with pytest.raises(InvalidInput, match="unknown fusion value 9"):
        fusion_from_proto(newer)
    with pytest.raises(InvalidInput, match="unknown path 'colbert'"):
        fusion_from_proto(pb.SearchRequest(fusion_weights={"colbert": 1.0}))
    with pytest.raises(InvalidInput, match="must be a number >= 0"):
        fusion_from_proto(pb.SearchRequest(fusion_weights={"bm25": -0.5}))


async def test_the_stage_sends_the_configured_fusion_or_the_requests_own() -> None:
    retriever = FakeRetriever(chunks=[chunk(1, "Rate limits apply per API key.")])
    stage = RetrievalStage(FakeEmbedder(), retriever, RetrievalParams())
    _, report = await stage.run(QUERY)
    sent = retriever.queries[-1]
    assert (sent.fusion, dict(sent.weights)) == (
        "weighted",
        {"dense": 0.4, "bm25": 0.6, "sparse": 0.3},
    )
    assert report.details["fusion"] == "weighted"
    assert report.details["fusion_weights"] == "dense=0.4,sparse=0.3,bm25=0.6"

    await stage.run(replace(QUERY, fusion=FusionChoice(weights={"dense": 1.0})))
    sent = retriever.queries[-1]
    assert (sent.fusion, dict(sent.weights)) == ("weighted", {"dense": 1.0}), "own weights"
    await stage.run(replace(QUERY, fusion=FusionChoice("rrf")))
    assert retriever.queries[-1].fusion == "rrf"
