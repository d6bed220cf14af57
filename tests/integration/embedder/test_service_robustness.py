"""The embedder as a real gRPC server on port 0 (real MiniLM): overload, malformed input,
oversized input, response metadata, and parity with sentence-transformers over the wire."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from groundwire.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from groundwire_core.clients.embedder import EmbedderClient
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.errors import CODE_KEY, RETRY_AFTER_KEY
from groundwire_core.grpc.server import serving
from groundwire_embedder.export.sample_text import SAMPLE_SENTENCES, generate_texts
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings

EMBED = "/groundwire.embedder.v1.EmbedderService/Embed"
TOKENIZE = "/groundwire.embedder.v1.EmbedderService/Tokenize"


@pytest.fixture
async def minilm_port(minilm_dir: Path) -> AsyncIterator[int]:
    settings = EmbedderSettings(port=0, model_dir=minilm_dir, max_queue=2)
    async with serving(EmbedderService(settings), settings) as port:
        yield port


@pytest.fixture
async def channel(minilm_port: int) -> AsyncIterator[grpc.aio.Channel]:
    async with create_channel(f"127.0.0.1:{minilm_port}") as ch:
        yield ch


def _metadata(error: grpc.aio.AioRpcError) -> dict[str, str]:
    return {k: v for k, v in (error.trailing_metadata() or ()) if isinstance(v, str)}


async def _still_serving(channel: grpc.aio.Channel) -> None:
    stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
    reply = await stub.Embed(embedder_pb2.EmbedRequest(texts=["still there?"]), timeout=60)
    assert len(reply.embeddings[0].dense.values) == 384


# -- overload ---------------------------------------------------------------------------------


async def test_flood_beyond_the_queue_is_rejected_at_once(minilm_dir: Path) -> None:
    # 64 texts of ~60 tokens fill one model batch (4096 tokens): one request per batch
    settings = EmbedderSettings(
        port=0, model_dir=minilm_dir, max_queue=2, max_batch_tokens=4096, intra_op_threads=1
    )
    heavy = embedder_pb2.EmbedRequest(texts=generate_texts(64, words=45, seed=1))
    async with (
        serving(EmbedderService(settings), settings) as port,
        create_channel(f"127.0.0.1:{port}") as channel,
    ):
        await _flood(channel, heavy)
        await _still_serving(channel)


async def _flood(channel: grpc.aio.Channel, heavy: embedder_pb2.EmbedRequest) -> None:
    stub = embedder_pb2_grpc.EmbedderServiceStub(channel)

    finished: list[str] = []  # outcomes in the order the calls ended (no clock)

    async def call() -> tuple[str, grpc.aio.AioRpcError | None]:
        try:
            await stub.Embed(heavy, timeout=300)
        except grpc.aio.AioRpcError as error:
            finished.append("rejected")
            return "rejected", error
        finished.append("ok")
        return "ok", None

    outcomes = await asyncio.gather(*(call() for _ in range(24)))
    served = [kind for kind, _ in outcomes if kind == "ok"]
    rejected = [error for kind, error in outcomes if error is not None]
    # one running, one tokenized ahead, two queued: everything else is turned away
    assert 1 <= len(served) <= 6
    assert len(rejected) >= 18
    for error in rejected:
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        metadata = _metadata(error)
        assert metadata[CODE_KEY] == "overloaded"
        assert float(metadata[RETRY_AFTER_KEY]) >= 0.1
        assert "queue is full" in (error.details() or "")
    # at once: every rejection ended before any accepted request finished
    assert finished.index("ok") >= len(rejected), finished


# -- malformed and oversized input ------------------------------------------------------------


async def test_empty_list_is_invalid(channel: grpc.aio.Channel) -> None:
    stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Embed(embedder_pb2.EmbedRequest(texts=[]), timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert _metadata(info.value)[CODE_KEY] == "invalid_input"
    with pytest.raises(grpc.aio.AioRpcError) as tok:
        await stub.Tokenize(embedder_pb2.TokenizeRequest(texts=[]), timeout=30)
    assert tok.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_ten_thousand_texts_are_invalid(channel: grpc.aio.Channel) -> None:
    stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
    texts = [f"text number {i}" for i in range(10_000)]
    for rpc, request in (
        (stub.Embed, embedder_pb2.EmbedRequest(texts=texts)),
        (stub.Tokenize, embedder_pb2.TokenizeRequest(texts=texts)),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await rpc(request, timeout=30)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "256" in (info.value.details() or "")
    await _still_serving(channel)


async def test_one_megabyte_text_is_truncated(channel: grpc.aio.Channel) -> None:
    stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
    huge = ("Retrieval systems read long documents. " * 26_000)[:1_000_000]
    assert len(huge.encode()) == 1_000_000
    started = time.perf_counter()
    reply = await stub.Embed(embedder_pb2.EmbedRequest(texts=[huge, "short"]), timeout=60)
    assert time.perf_counter() - started < 30
    big, small = reply.embeddings
    assert big.tokens == 256 and big.truncated  # MiniLM's max_tokens, as documented
    assert not small.truncated and small.tokens < 10
    assert np.isclose(np.linalg.norm(big.dense.values), 1.0, atol=1e-5)
    # Tokenize counts beyond max_tokens, but only the first tokenize_max_chars (65,536)
    # characters, and says which texts it cut
    started = time.perf_counter()
    counts = await stub.Tokenize(embedder_pb2.TokenizeRequest(texts=[huge, "short"]), timeout=60)
    assert time.perf_counter() - started < 5
    assert list(counts.truncated) == [True, False]
    assert 256 < counts.counts[0] < 65_536
    whole = await stub.Tokenize(embedder_pb2.TokenizeRequest(texts=[huge[:65_536]]), timeout=60)
    assert whole.counts == counts.counts[:1] and list(whole.truncated) == [False]


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b"\x0a\x03\xed\xa0\x80", "a UTF-8-encoded lone surrogate (U+D800)"),
        (b"\x0a\x02\xc3\x28", "an invalid two-byte sequence"),
        (b"\x0a\x05ok\xff\xfe\xfd", "bytes that are never UTF-8"),
        (b"\x0a\x20truncated", "a length prefix longer than the message"),
        (b"\xff\xff\xff", "a corrupt wire format"),
    ],
)
async def test_undecodable_requests_are_invalid_argument(
    channel: grpc.aio.Channel, payload: bytes, why: str
) -> None:
    for method in (EMBED, TOKENIZE):
        call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call(payload, timeout=30)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, why
        assert _metadata(info.value)[CODE_KEY] == "invalid_input"
        details = info.value.details() or ""
        assert "not a valid protobuf message" in details
        assert "Traceback" not in details and "DecodeError" not in details
    # a valid hand-made payload through the same path works: the mapping is not a blanket
    call = channel.unary_unary(EMBED, request_serializer=None, response_deserializer=None)
    raw = await call(b"\x0a\x05hello", timeout=30)
    assert len(embedder_pb2.EmbedResponse.FromString(raw).embeddings) == 1
    await _still_serving(channel)


async def test_unknown_or_unsupported_outputs_are_invalid(channel: grpc.aio.Channel) -> None:
    stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
    for outputs in ([embedder_pb2.OUTPUT_SPARSE], [7]):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Embed(embedder_pb2.EmbedRequest(texts=["x"], outputs=outputs), timeout=30)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# -- metadata and parity over the wire ---------------------------------------------------------


async def test_response_carries_tokens_timings_and_the_model(channel: grpc.aio.Channel) -> None:
    stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
    texts = ["one two three", "", "A longer sentence about vector search and ranking."]
    reply = await stub.Embed(embedder_pb2.EmbedRequest(texts=texts), timeout=30)
    info = await stub.Info(embedder_pb2.InfoRequest(), timeout=30)
    assert reply.model_id == info.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    client = await EmbedderClient(channel).embed(texts[:1], query=True)
    assert client[0].model == info.model_id, "the typed client tags each vector with it"
    tokens = [e.tokens for e in reply.embeddings]
    assert tokens[0] == 5 and tokens[1] == 2 and tokens[2] > 5
    assert reply.total_tokens == sum(tokens)
    timing = reply.timing
    assert timing.inference_ms > 0 and timing.queue_ms >= 0
    assert timing.total_ms >= timing.inference_ms


async def test_service_matches_sentence_transformers(
    channel: grpc.aio.Channel, sentence_transformer: Any
) -> None:
    texts = ["How do I reset my password?", "", *SAMPLE_SENTENCES[:10], " ".join(SAMPLE_SENTENCES)]
    stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
    reply = await stub.Embed(embedder_pb2.EmbedRequest(texts=texts), timeout=60)
    ours = np.array([list(e.dense.values) for e in reply.embeddings], dtype=np.float32)
    ref = sentence_transformer.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    assert ours.shape == ref.shape == (len(texts), 384)
    assert float(np.abs(ours - ref).max()) <= 1e-4
