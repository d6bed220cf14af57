"""Typed client of the embedder, shared by the retriever (documents) and the
orchestrator (queries). The only module outside the embedder that converts its
protobuf messages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import grpc

from groundwire.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from groundwire_core.grpc.client import rpc_errors


@dataclass(frozen=True)
class EmbedderInfo:
    model_id: str
    profile: str
    dense_dims: int
    max_tokens: int
    outputs: frozenset[str]
    multi_vector_dims: int = 0  # width of each ColBERT vector; 0 = none


@dataclass(frozen=True)
class TextEmbedding:
    dense: tuple[float, ...] | None
    sparse: dict[int, float] | None
    tokens: int
    truncated: bool
    multi_vector: tuple[tuple[float, ...], ...] = field(default=())
    # The model that made the vectors (EmbedResponse.model_id; "" from an embedder
    # that does not say): vectors of different models are not comparable.
    model: str = ""


_OUTPUTS = {
    "dense": embedder_pb2.OUTPUT_DENSE,
    "sparse": embedder_pb2.OUTPUT_SPARSE,
    "multi_vector": embedder_pb2.OUTPUT_MULTI_VECTOR,
}
_NAMES = {v: k for k, v in _OUTPUTS.items()}


class EmbedderClient:
    """Calls the embedder; failures come out as GroundwireError naming "embedder"."""

    def __init__(self, channel: grpc.aio.Channel, *, timeout_s: float = 10.0) -> None:
        self._stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        self._timeout_s = timeout_s

    async def info(self) -> EmbedderInfo:
        with rpc_errors("embedder"):
            reply = await self._stub.Info(embedder_pb2.InfoRequest(), timeout=self._timeout_s)
        return EmbedderInfo(
            model_id=reply.model_id,
            profile=reply.profile,
            dense_dims=reply.dense_dims,
            max_tokens=reply.max_tokens,
            outputs=frozenset(_NAMES[o] for o in reply.outputs if o in _NAMES),
            multi_vector_dims=reply.multi_vector_dims,
        )

    async def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """The model's token count per text (not cut to max_tokens; a text longer than
        the embedder's tokenize_max_chars is counted on its start only)."""
        with rpc_errors("embedder"):
            reply = await self._stub.Tokenize(
                embedder_pb2.TokenizeRequest(texts=list(texts)), timeout=self._timeout_s
            )
        return list(reply.counts)

    async def embed(
        self,
        texts: Sequence[str],
        *,
        query: bool,
        outputs: Sequence[str] = ("dense",),
        bulk: bool = False,
    ) -> list[TextEmbedding]:
        """Embeds ``texts`` (queries or documents) with the requested outputs; ``bulk``
        (ingest) runs behind every search in the embedder (EmbedRequest.bulk)."""
        request = embedder_pb2.EmbedRequest(
            texts=list(texts),
            kind=embedder_pb2.TEXT_KIND_QUERY if query else embedder_pb2.TEXT_KIND_DOCUMENT,
            outputs=[_OUTPUTS[o] for o in outputs],
            bulk=bulk,
        )
        with rpc_errors("embedder"):
            reply = await self._stub.Embed(request, timeout=self._timeout_s)
        return [
            TextEmbedding(
                dense=tuple(e.dense.values) if e.HasField("dense") else None,
                sparse=(
                    dict(zip(e.sparse.indices, e.sparse.values, strict=True))
                    if e.HasField("sparse")
                    else None
                ),
                tokens=e.tokens,
                truncated=e.truncated,
                multi_vector=tuple(tuple(v.values) for v in e.multi_vector),
                model=reply.model_id,
            )
            for e in reply.embeddings
        ]
