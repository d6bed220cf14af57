"""A search's fusion option through the real OrchestratorService and the real
retriever (test_chain's stack: MiniLM embedder, retriever on a fresh store): the
configured weighted fusion by default, a request's own method or weights over it,
and INVALID_ARGUMENT for a value the orchestrator does not know."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from groundwire.orchestrator.v1 import orchestrator_pb2, orchestrator_pb2_grpc
from groundwire_core.grpc.client import create_channel
from tests.integration.orchestrator import test_chain

pytestmark = pytest.mark.asyncio(loop_scope="module")
pb = orchestrator_pb2
chain = test_chain.chain  # the module-scoped stack, built once for this module
Stack = test_chain.Stack


async def search(stack: Stack, **kw: Any) -> orchestrator_pb2.SearchResponse:
    request = orchestrator_pb2.SearchRequest(
        collection=test_chain.COLLECTION, query="rate limits per key", limit=6, rerank=False, **kw
    )
    async with create_channel(f"127.0.0.1:{stack.ports['plain']}") as channel:
        stub = orchestrator_pb2_grpc.OrchestratorServiceStub(channel)
        reply: orchestrator_pb2.SearchResponse = await stub.Search(request)
    return reply


def retrieval(reply: orchestrator_pb2.SearchResponse) -> dict[str, str]:
    return dict({s.name: s for s in reply.stages}["retrieval"].details)


async def test_the_configured_fusion_and_a_requests_own(chain: Stack) -> None:
    default = await search(chain)
    assert retrieval(default)["fusion"] == "weighted"
    assert retrieval(default)["fusion_weights"] == "dense=0.4,sparse=0.3,bm25=0.6"
    # weighted scores are min-max normalised per path: the top one is far above RRF's
    assert 0.4 < default.results[0].score <= 1.0

    rrf = await search(chain, fusion=pb.FUSION_RRF)
    assert retrieval(rrf)["fusion"] == "rrf"
    # RRF over the two paths MiniLM has (dense, bm25): at most 1/61 from each
    assert all(0 < r.score <= 2 / 61 + 1e-9 for r in rrf.results)

    dense_only = await search(chain, fusion_weights={"dense": 1.0, "bm25": 0.0})
    assert retrieval(dense_only)["fusion_weights"] == "dense=1,bm25=0"
    scores = [r.score for r in dense_only.results]
    assert scores[0] == pytest.approx(1.0) and scores == sorted(scores, reverse=True)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"fusion": 9}, "unknown fusion value 9"),
        ({"fusion_weights": {"colbert": 1.0}}, "unknown path 'colbert'"),
    ],
)
async def test_unknown_values_are_invalid_argument(
    chain: Stack, extra: dict[str, Any], message: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await search(chain, **extra)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in (caught.value.details() or "")
