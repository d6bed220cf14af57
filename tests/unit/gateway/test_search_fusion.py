"""/v1/search's fusion option: a method and per-path weights checked at the edge and
passed on as the orchestrator's wire values; unknown methods and paths are 422, never
quietly replaced by the server's setting."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from groundwire.orchestrator.v1 import orchestrator_pb2
from groundwire_gateway import models
from groundwire_gateway.upstream import fusion_to_proto


@pytest.fixture
def client(make_client: Any) -> httpx.AsyncClient:
    client: httpx.AsyncClient = make_client(default_collection="docs")
    return client


async def test_fusion_and_weights_reach_the_upstream(
    client: httpx.AsyncClient, upstream: Any
) -> None:
    response = await client.post(
        "/v1/search",
        json={"query": "q", "fusion": "weighted", "fusion_weights": {"dense": 1, "bm25": 0.25}},
    )
    assert response.status_code == 200, response.text
    sent, _, _ = upstream.calls[-1]
    assert (sent.fusion, sent.fusion_weights) == ("weighted", {"dense": 1.0, "bm25": 0.25})
    await client.post("/v1/search", json={"query": "q"})
    sent, _, _ = upstream.calls[-1]
    assert (sent.fusion, sent.fusion_weights) == (None, None), "absent: the server's setting"


@pytest.mark.parametrize(
    "extra",
    [
        {"fusion": "nonesuch"},
        {"fusion": "RRF"},
        {"fusion": 1},
        {"fusion_weights": {"colbert": 0.5}},
        {"fusion_weights": {"dense": -0.1}},
        {"fusion_weights": {"dense": "high"}},
    ],
)
async def test_unknown_methods_paths_and_bad_weights_are_422(
    client: httpx.AsyncClient, upstream: Any, extra: dict[str, Any]
) -> None:
    response = await client.post("/v1/search", json={"query": "q", **extra})
    assert response.status_code == 422, response.text
    assert not upstream.calls


def test_every_method_has_a_wire_value_and_the_schema_lists_them() -> None:
    assert {"rrf", "weighted"} <= set(models.FUSION_METHODS)
    for method in models.FUSION_METHODS:
        value = fusion_to_proto(method)
        assert orchestrator_pb2.Fusion.Name(value) == f"FUSION_{method.upper()}"
    assert fusion_to_proto(None) == orchestrator_pb2.FUSION_UNSPECIFIED
    schema = models.SearchBody.model_json_schema()["properties"]["fusion"]
    assert {"type": "string", "enum": list(models.FUSION_METHODS)} in schema["anyOf"]
