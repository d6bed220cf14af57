"""gRPC transport of the reranker: convert, call the reranker's logic, convert back.

Errors come out of reranking.Reranker as groundwire_core.errors and are mapped to gRPC
status once, by the server interceptor. Without GROUNDWIRE_RERANKER_MODEL_DIR the service
still runs: Info says ready=false and Rerank answers UNAVAILABLE, so the orchestrator's
rerank stage takes its fallback and says so. Likewise without
GROUNDWIRE_RERANKER_NLI_MODEL_DIR: Info says entailment_ready=false and Entail answers
UNAVAILABLE.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import grpc

from groundwire.common.v1 import common_pb2
from groundwire.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from groundwire_reranker.entailment import Entailer, NliModel
from groundwire_reranker.models.cross_encoder import OnnxCrossEncoder
from groundwire_reranker.models.nli import OnnxNliModel
from groundwire_reranker.reranking import CrossEncoder, Reranker
from groundwire_reranker.settings import RerankerSettings


class RerankerService(reranker_pb2_grpc.RerankerServiceServicer):
    """The reranker as the runtime sees it (GrpcService) and as gRPC sees it."""

    name = "reranker"
    service_names: Sequence[str] = (
        reranker_pb2.DESCRIPTOR.services_by_name["RerankerService"].full_name,
    )

    def __init__(
        self,
        settings: RerankerSettings,
        model: CrossEncoder | None = None,
        nli_model: NliModel | None = None,
    ) -> None:
        lanes = settings.lanes
        if model is None and settings.model_dir is not None:
            model = OnnxCrossEncoder(
                settings.model_dir,
                intra_op_threads=settings.intra_op_threads,
                lanes=lanes,
                serve_cost_model=settings.serve_cost_model,
                max_pair_tokens=settings.max_pair_tokens,
            )
        if nli_model is None and settings.nli_model_dir is not None:
            nli_model = OnnxNliModel(
                settings.nli_model_dir,
                intra_op_threads=settings.intra_op_threads,
                lanes=lanes,
                serve_cost_model=settings.serve_cost_model,
            )
        self._entailer = Entailer(
            nli_model,
            max_batch_tokens=settings.max_batch_tokens,
            max_batch_pairs=settings.max_batch_passages,
            max_queue=settings.max_queue,
            lanes=lanes,
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
        await self._entailer.start()

    async def stop(self) -> None:
        await self._entailer.stop()
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

    async def Entail(
        self, request: reranker_pb2.EntailRequest, context: grpc.aio.ServicerContext
    ) -> reranker_pb2.EntailResponse:
        started = time.perf_counter()
        outcome = await self._entailer.entail([(p.premise, p.hypothesis) for p in request.pairs])
        return reranker_pb2.EntailResponse(
            results=[
                reranker_pb2.EntailProbabilities(
                    entailment=e, neutral=n, contradiction=c
                )
                for e, n, c in outcome.probabilities
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
        nli = self._entailer.status()
        return reranker_pb2.InfoResponse(
            model_id=s.model_id,
            profile=s.profile,
            max_tokens=s.max_tokens,
            ready=s.ready,
            max_batch_passages=s.max_batch_passages,
            queue_depth=s.queue_depth,
            ms_per_passage=s.ms_per_passage,
            quantized=s.quantized,
            entailment_ready=nli.ready,
            entailment_model_id=nli.model_id,
            entailment_max_tokens=nli.max_tokens,
        )
