"""gRPC transport of the embedder: convert, call the engine, convert back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import grpc

from groundwire.common.v1 import common_pb2
from groundwire.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from groundwire_core.errors import InvalidInput, Unavailable
from groundwire_embedder.engine import Encoder, TextVectors, build_engine
from groundwire_embedder.models.onnx_backend import OnnxEncoder
from groundwire_embedder.settings import EmbedderSettings

OUTPUT_NAMES = {
    embedder_pb2.OUTPUT_DENSE: "dense",
    embedder_pb2.OUTPUT_SPARSE: "sparse",
    embedder_pb2.OUTPUT_MULTI_VECTOR: "multi_vector",
}
OUTPUT_ENUMS = {name: value for value, name in OUTPUT_NAMES.items()}


class EmbedderService(embedder_pb2_grpc.EmbedderServiceServicer):
    """The embedder as the runtime sees it (GrpcService) and as gRPC sees it."""

    name = "embedder"
    service_names: Sequence[str] = (
        embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"].full_name,
    )

    def __init__(self, settings: EmbedderSettings, encoder: Encoder | None = None) -> None:
        lanes = settings.lanes
        self._encoder = encoder or OnnxEncoder(
            settings.model_dir,
            intra_op_threads=settings.intra_op_threads,
            inter_op_threads=settings.inter_op_threads,
            allow_spinning=settings.ort_allow_spinning,
            lanes=lanes,
            serve_cost_model=settings.serve_cost_model,
        )
        self._engine = build_engine(
            self._encoder,
            max_batch_tokens=settings.max_batch_tokens,
            max_batch_texts=settings.max_batch_texts,
            max_queue=settings.max_queue,
            lanes=lanes,
        )
        self._tokenize_max_chars = settings.tokenize_max_chars

    def register(self, server: grpc.aio.Server) -> None:
        embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(self, server)

    async def start(self) -> None:
        await self._engine.start()

    async def stop(self) -> None:
        await self._engine.stop()

    async def check(self) -> None:
        """Nothing to re-check: the model runs in this process."""

    async def Embed(
        self, request: embedder_pb2.EmbedRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.EmbedResponse:
        started = time.perf_counter()
        wanted = self._outputs(request)
        result = await self._engine.submit(list(request.texts), bulk=request.bulk)
        embeddings = [
            _embedding(vectors, tokens, wanted, self._encoder.manifest.max_tokens)
            for vectors, tokens in zip(result.results, result.tokens, strict=True)
        ]
        return embedder_pb2.EmbedResponse(
            embeddings=embeddings,
            total_tokens=sum(result.tokens),
            model_id=self._encoder.manifest.model_id,
            timing=common_pb2.Timing(
                queue_ms=result.queue_ms,
                inference_ms=result.inference_ms,
                total_ms=(time.perf_counter() - started) * 1e3,
            ),
        )

    def _outputs(self, request: embedder_pb2.EmbedRequest) -> set[str]:
        wanted = {OUTPUT_NAMES.get(o, "") for o in request.outputs} or {"dense"}
        if "" in wanted:
            raise InvalidInput("outputs contains an unknown value")
        missing = wanted - set(self._encoder.manifest.outputs)
        if missing:
            raise InvalidInput(
                f"the model {self._encoder.manifest.model_id} does not produce "
                f"{', '.join(sorted(missing))} (it produces "
                f"{', '.join(self._encoder.manifest.outputs)})"
            )
        return wanted

    async def Tokenize(
        self, request: embedder_pb2.TokenizeRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.TokenizeResponse:
        texts = list(request.texts)
        if not texts or len(texts) > self._engine.max_batch_items:
            raise InvalidInput(f"send 1 to {self._engine.max_batch_items} texts")
        if not self._engine.ready:
            raise Unavailable("the embedder is not ready")
        cap = self._tokenize_max_chars
        counts = await asyncio.to_thread(self._encoder.count_tokens, [t[:cap] for t in texts])
        return embedder_pb2.TokenizeResponse(
            counts=counts, truncated=[len(t) > cap for t in texts]
        )

    async def Info(
        self, request: embedder_pb2.InfoRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.InfoResponse:
        if not self._engine.ready:
            raise Unavailable("the embedder model is not loaded yet")
        m = self._encoder.manifest
        return embedder_pb2.InfoResponse(
            model_id=m.model_id,
            profile=m.profile,
            dense_dims=m.dense_dims,
            multi_vector_dims=m.multi_vector_dims,
            max_tokens=m.max_tokens,
            outputs=[OUTPUT_ENUMS[o] for o in m.outputs if o in OUTPUT_ENUMS],
            quantized=m.quantized,
            max_batch_texts=self._engine.max_batch_items,
        )


def _embedding(
    vectors: TextVectors, tokens: int, wanted: set[str], max_tokens: int
) -> embedder_pb2.Embedding:
    """One text's vectors as a message; floats go in as lists (no per-float Python work)."""
    dense = sparse = multi_vector = None
    if "dense" in wanted:
        dense = common_pb2.DenseVector(values=vectors.dense.tolist())
    if "sparse" in wanted and vectors.sparse is not None:
        sparse = common_pb2.SparseVector(
            indices=vectors.sparse.indices.tolist(), values=vectors.sparse.values.tolist()
        )
    if "multi_vector" in wanted and vectors.multi_vector is not None:
        multi_vector = [common_pb2.DenseVector(values=row) for row in vectors.multi_vector.tolist()]
    return embedder_pb2.Embedding(
        dense=dense,
        sparse=sparse,
        multi_vector=multi_vector,
        tokens=tokens,
        truncated=tokens >= max_tokens,
    )
