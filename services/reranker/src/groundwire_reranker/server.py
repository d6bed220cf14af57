"""gRPC transport of the reranker: convert, call the reranker's logic, convert back.

Errors come out of reranking.Reranker as groundwire_core.errors and are mapped to gRPC
status once, by the server interceptor. Without GROUNDWIRE_RERANKER_MODEL_DIR the service
still runs: Info says ready=false and Rerank answers UNAVAILABLE, so the orchestrator's
rerank stage takes its fallback and says so.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import grpc

from groundwire.common.v1 import common_pb2
from groundwire.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from groundwire_reranker.models.cross_encoder import OnnxCrossEncoder
from groundwire_reranker.reranking import CrossEncoder, Reranker
from groundwire_reranker.settings import RerankerSettings


class RerankerService(reranker_pb2_grpc.RerankerServiceServicer):
    """The reranker as the runtime sees it (GrpcService) and as gRPC sees it."""

    name = "reranker"
    service_names: Sequence[str] = (
        reranker_pb2.DESCRIPTOR.services_by_name["RerankerService"].full_name,
    )

    def __init__(self, settings: RerankerSettings, model: CrossEncoder | None = None) -> None:
        lanes = settings.lanes
        if model is None and settings.model_dir is not None:
            model = OnnxCrossEncoder(
                settings.model_dir, intra_op_threads=settings.intra_op_threads, lanes=lanes
            )
        self._reranker = Reranker(
            model,
            max_batch_tokens=settings.max_batch_tokens,
            max_batch_passages=settings.max_batch_passages,
            max_queue=settings.max_queue,
            lanes=lanes,
        )

    def register(self, server: grpc.aio.Server) -> None:
        reranker_pb2_grpc.add_RerankerServiceServicer_to_server(self, server)

    async def start(self) -> None:
        await self._reranker.start()

    async def stop(self) -> None:
        await self._reranker.stop()

    async def check(self) -> None:
        """Nothing to re-check: the model runs in this process."""

    async def Rerank(
        self, request: reranker_pb2.RerankRequest, context: grpc.aio.ServicerContext
    ) -> reranker_pb2.RerankResponse:
        started = time.perf_counter()
        outcome = await self._reranker.rerank(
            request.query,
            list(request.passages),
            top_n=request.top_n,
            threshold=request.threshold if request.HasField("threshold") else None,
        )
        return reranker_pb2.RerankResponse(
            results=[
                reranker_pb2.RerankResult(index=r.index, score=r.score) for r in outcome.results
            ],
            total_tokens=outcome.total_tokens,
            timing=common_pb2.Timing(
                queue_ms=outcome.queue_ms,
                inference_ms=outcome.inference_ms,
                total_ms=(time.perf_counter() - started) * 1e3,
            ),
        )

    async def Info(
        self, request: reranker_pb2.InfoRequest, context: grpc.aio.ServicerContext
    ) -> reranker_pb2.InfoResponse:
        s = self._reranker.status()
        return reranker_pb2.InfoResponse(
            model_id=s.model_id,
            profile=s.profile,
            max_tokens=s.max_tokens,
            ready=s.ready,
            max_batch_passages=s.max_batch_passages,
            queue_depth=s.queue_depth,
            ms_per_passage=s.ms_per_passage,
            quantized=s.quantized,
        )
