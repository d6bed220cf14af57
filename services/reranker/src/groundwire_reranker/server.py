"""gRPC transport of the reranker.

The cross-encoder backend arrives with the model-serving work; until a model is
configured the service runs, answers Info with ready=false, and Rerank with
UNAVAILABLE, so the orchestrator's rerank stage takes its fallback and says so.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from groundwire.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from groundwire_core.errors import Unavailable
from groundwire_reranker.settings import RerankerSettings


class RerankerService(reranker_pb2_grpc.RerankerServiceServicer):
    name = "reranker"
    service_names: Sequence[str] = (
        reranker_pb2.DESCRIPTOR.services_by_name["RerankerService"].full_name,
    )

    def __init__(self, settings: RerankerSettings) -> None:
        self._settings = settings

    def register(self, server: grpc.aio.Server) -> None:
        reranker_pb2_grpc.add_RerankerServiceServicer_to_server(self, server)

    async def start(self) -> None:
        if self._settings.model_dir is not None:
            raise Unavailable(
                "cross-encoder models are not served by this version yet; "
                "unset GROUNDWIRE_RERANKER_MODEL_DIR"
            )

    async def stop(self) -> None:
        return None

    async def Rerank(
        self, request: reranker_pb2.RerankRequest, context: grpc.aio.ServicerContext
    ) -> reranker_pb2.RerankResponse:
        raise Unavailable("no reranker model is configured", dependency="reranker")

    async def Info(
        self, request: reranker_pb2.InfoRequest, context: grpc.aio.ServicerContext
    ) -> reranker_pb2.InfoResponse:
        return reranker_pb2.InfoResponse(
            ready=False, max_batch_passages=self._settings.max_batch_passages
        )
