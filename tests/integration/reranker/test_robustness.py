"""Overload, oversize and malformed requests against the real gRPC reranker.

Overload is an immediate, typed answer (RESOURCE_EXHAUSTED with a retry-after), never a
slow timeout, and the service keeps serving; oversized input is refused or truncated as
documented; without a model the service runs and says so.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from groundwire.reranker.v1 import reranker_pb2
from groundwire_core.errors import NotFound
from groundwire_core.grpc.errors import RETRY_AFTER_KEY
from groundwire_reranker.export import BuildReport
from groundwire_reranker.export.tiny import Architecture
from groundwire_reranker.models import CrossEncoderManifest, OnnxCrossEncoder, Pair
from groundwire_reranker.settings import RerankerSettings

Served = Callable[..., Any]  # conftest's `served` fixture
PASSAGES = [f"passage number {i} says something about rate limits" for i in range(20)]


class GatedCrossEncoder:
    """The real ONNX model whose inference waits for ``gate``: holds the batcher busy."""

    def __init__(self, inner: OnnxCrossEncoder) -> None:
        self.inner = inner
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    @property
    def manifest(self) -> CrossEncoderManifest:
        return self.inner.manifest

    def load(self) -> None:
        self.inner.load()

    def estimate_tokens(self, item: Pair) -> int:
        return self.inner.estimate_tokens(item)

    def tokenize(self, items: Sequence[Pair]) -> Any:
        return self.inner.tokenize(items)

    def token_counts(self, batch: Any) -> list[int]:
        return self.inner.token_counts(batch)

    def infer(self, batch: Any, shared: bool = False) -> Any:
        self.entered.set()
        if not self.gate.wait(timeout=30):
            raise TimeoutError("the test never opened the gate")
        return self.inner.infer(batch, shared)

    def postprocess(self, batch: Any, raw: Any) -> Sequence[float]:
        return self.inner.postprocess(batch, raw)


def _code(error: BaseException) -> grpc.StatusCode:
    assert isinstance(error, grpc.aio.AioRpcError), repr(error)
    code: grpc.StatusCode = error.code()
    return code


async def test_flood_beyond_the_queue_is_refused_at_once_and_service_recovers(
    exported: Callable[[Architecture, bool], BuildReport], served: Served
) -> None:
    model = GatedCrossEncoder(OnnxCrossEncoder(exported("bert", False).out_dir, intra_op_threads=1))
    max_queue, flood = 4, 40
    # A token budget below one request's: queued requests are never packed together.
    async with served(model=model, max_queue=max_queue, max_batch_tokens=256) as stub:
        request = reranker_pb2.RerankRequest(query="how do limits work", passages=PASSAGES)

        async def call() -> reranker_pb2.RerankResponse:
            reply: reranker_pb2.RerankResponse = await stub.Rerank(request, timeout=60)
            return reply

        model.gate.clear()
        model.entered.clear()
        first = asyncio.create_task(call())
        assert await asyncio.to_thread(model.entered.wait, 10), "the batcher took a batch"

        started = time.perf_counter()
        calls = [asyncio.create_task(call()) for _ in range(flood)]
        finished: dict[int, float] = {}
        enough = asyncio.Event()
        # The engine holds the running batch, one batch formed ahead and the queue:
        # everything beyond comes back while the model is still blocked.
        beyond = flood - max_queue - 2

        def note(task: asyncio.Task[Any]) -> None:
            finished[id(task)] = time.perf_counter()
            if len(finished) >= beyond:
                enough.set()

        for task in calls:
            task.add_done_callback(note)
        await asyncio.wait_for(enough.wait(), timeout=5)
        assert time.perf_counter() - started < 5 and not first.done()
        info = await stub.Info(reranker_pb2.InfoRequest())
        assert info.queue_depth >= max_queue - 1

        opened = time.perf_counter()
        model.gate.set()
        assert len((await first).results) == len(PASSAGES)
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        refused = [
            (task, error)
            for task, error in zip(calls, outcomes, strict=True)
            if isinstance(error, BaseException)
        ]
        served_ = [r for r in outcomes if isinstance(r, reranker_pb2.RerankResponse)]
        assert len(refused) + len(served_) == flood
        assert len(refused) >= beyond and len(served_) >= max_queue
        for task, error in refused:
            assert finished[id(task)] < opened, "refused at once, not after the backlog"
            assert _code(error) == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert isinstance(error, grpc.aio.AioRpcError)
            trailers = dict(error.trailing_metadata() or ())
            assert float(trailers[RETRY_AFTER_KEY]) > 0
            assert "queue is full" in (error.details() or "")
        for reply in served_:
            assert len(reply.results) == len(PASSAGES), "queued requests were all served"
        again = await stub.Rerank(request, timeout=10)
        assert len(again.results) == len(PASSAGES), "still serving after the flood"


async def test_too_many_passages_is_invalid_argument(
    exported: Callable[[Architecture, bool], BuildReport], served: Served
) -> None:
    async with served(model_dir=exported("bert", False).out_dir) as stub:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Rerank(
                reranker_pb2.RerankRequest(query="q", passages=["a passage"] * 10_000)
            )
        assert _code(info.value) == grpc.StatusCode.INVALID_ARGUMENT
        assert "at most 256 passages" in (info.value.details() or "")
        ok = await stub.Rerank(reranker_pb2.RerankRequest(query="q", passages=["a passage"] * 256))
        assert len(ok.results) == 256


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (reranker_pb2.RerankRequest(query="", passages=["p"]), "query is empty"),
        (reranker_pb2.RerankRequest(query="  \n", passages=["p"]), "query is empty"),
        (reranker_pb2.RerankRequest(query="q"), "passages is empty"),
        (
            reranker_pb2.RerankRequest(query="q", passages=["p"], threshold=float("nan")),
            "threshold",
        ),
    ],
)
async def test_malformed_requests_are_invalid_argument(
    exported: Callable[[Architecture, bool], BuildReport],
    served: Served,
    request_: reranker_pb2.RerankRequest,
    message: str,
) -> None:
    async with served(model_dir=exported("xlm-roberta", False).out_dir) as stub:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Rerank(request_)
        assert _code(info.value) == grpc.StatusCode.INVALID_ARGUMENT
        assert message in (info.value.details() or "")


@pytest.mark.parametrize("arch", ["xlm-roberta", "bert"])
async def test_a_one_megabyte_passage_is_truncated_not_a_crash(
    arch: Architecture,
    exported: Callable[[Architecture, bool], BuildReport],
    served: Served,
    corpus_sentences: list[str],
) -> None:
    report = exported(arch, False)
    text = " ".join(corpus_sentences)
    huge = (text * (1_000_000 // len(text) + 1))[:1_000_000]
    query = "how are documents chunked"
    async with served(model_dir=report.out_dir) as stub:
        reply = await stub.Rerank(
            reranker_pb2.RerankRequest(query=query, passages=[huge, "a short passage"]),
            timeout=30,
        )
        head = await stub.Rerank(reranker_pb2.RerankRequest(query=query, passages=[huge[:5000]]))
    scores = {r.index: r.score for r in reply.results}
    assert 0 < scores[0] < 1 and 0 < scores[1] < 1
    # cut to the pair cap (the model's own length when the cap is above it)
    cap = min(report.max_tokens, int(RerankerSettings.model_fields["max_pair_tokens"].default))
    assert head.total_tokens == cap
    assert reply.total_tokens > cap and reply.total_tokens < 2 * cap
    assert abs(scores[0] - head.results[0].score) < 1e-6, "the model saw the passage's head only"
    # bounded by tokens above (the head only, under twice the cap), not by seconds; the
    # call's 30 s timeout fails a hang


async def test_without_a_model_it_serves_and_reports_unavailable(served: Served) -> None:
    async with served() as stub:
        info = await stub.Info(reranker_pb2.InfoRequest())
        assert info.ready is False and info.model_id == "" and info.max_batch_passages == 256
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await stub.Rerank(reranker_pb2.RerankRequest(query="q", passages=["p"]))
        assert _code(error.value) == grpc.StatusCode.UNAVAILABLE
        assert error.value.details() == "no reranker model is configured"


async def test_health_is_serving_only_with_the_model_warmed_up(
    exported: Callable[[Architecture, bool], BuildReport],
) -> None:
    from groundwire_core.grpc.client import create_channel
    from groundwire_core.grpc.server import serving
    from groundwire_reranker.server import RerankerService

    report = exported("bert", False)
    settings = RerankerSettings(port=0, model_dir=report.out_dir, intra_op_threads=1)
    service = RerankerService(settings)
    info_before = await service.Info(reranker_pb2.InfoRequest(), None)  # type: ignore[arg-type]
    assert info_before.ready is False, "constructing the service loads nothing"
    async with serving(service, settings) as port, create_channel(f"127.0.0.1:{port}") as ch:
        reply = await health_pb2_grpc.HealthStub(ch).Check(
            health_pb2.HealthCheckRequest(service="groundwire.reranker.v1.RerankerService")
        )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        assert (await service.Info(reranker_pb2.InfoRequest(), None)).ready is True  # type: ignore[arg-type]


async def test_a_model_dir_that_is_not_a_cross_encoder_fails_start(tmp_path: Any) -> None:
    from groundwire_core.grpc.server import serving
    from groundwire_reranker.server import RerankerService
    from groundwire_reranker.settings import RerankerSettings

    settings = RerankerSettings(port=0, model_dir=tmp_path / "missing")
    with pytest.raises(NotFound, match="groundwire models build"):
        async with serving(RerankerService(settings), settings):
            pass


async def test_invalid_utf8_on_the_wire_is_invalid_argument(
    exported: Callable[[Architecture, bool], BuildReport],
) -> None:
    """A lone surrogate encoded as bytes (not valid UTF-8) never reaches the model."""
    from groundwire_core.grpc.client import create_channel
    from groundwire_core.grpc.server import serving
    from groundwire_reranker.server import RerankerService
    from groundwire_reranker.settings import RerankerSettings

    surrogate = "\ud800".encode("utf-8", "surrogatepass")
    good = reranker_pb2.RerankRequest(query="q", passages=["ok"]).SerializeToString()
    bad_query = b"\x0a" + bytes([len(surrogate)]) + surrogate + b"\x12\x02ok"
    bad_passage = b"\x0a\x01q\x12" + bytes([len(surrogate)]) + surrogate
    settings = RerankerSettings(
        port=0, model_dir=exported("bert", False).out_dir, intra_op_threads=1
    )
    async with (
        serving(RerankerService(settings), settings) as port,
        create_channel(f"127.0.0.1:{port}") as channel,
    ):
        call = channel.unary_unary(  # raw bytes: the generated stub would refuse them
            "/groundwire.reranker.v1.RerankerService/Rerank",
            request_serializer=None,
            response_deserializer=reranker_pb2.RerankResponse.FromString,
        )
        for payload in (bad_query, bad_passage):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await call(payload, timeout=10)
            assert _code(info.value) == grpc.StatusCode.INVALID_ARGUMENT
        reply = await call(good, timeout=10)
        assert len(reply.results) == 1, "still serving"


def test_lone_surrogates_in_process_are_replaced_not_fatal(
    exported: Callable[[Architecture, bool], BuildReport],
) -> None:
    model = OnnxCrossEncoder(exported("bert", False).out_dir, intra_op_threads=1)
    model.load()
    dirty, clean = model.score([("q", "a\ud800b"), ("q", "a\ufffdb")])
    assert dirty == clean


def test_shared_lanes_score_what_the_alone_session_scores(
    exported: Callable[[Architecture, bool], BuildReport],
) -> None:
    """With two lanes the model runs on a second, one-thread session side by side; the
    logits match the all-threads session's."""
    model = OnnxCrossEncoder(exported("xlm-roberta", False).out_dir, intra_op_threads=2, lanes=2)
    model.load()
    pairs = [("what is hybrid search", f"passage {i} " + "dense and sparse " * i) for i in range(9)]
    batch = model.tokenize(pairs)
    alone = model.infer(batch)
    with ThreadPoolExecutor(max_workers=2) as pool:
        shared = list(pool.map(lambda _: model.infer(batch, True), range(2)))
    assert model._shared is not None and model._shared is not model._session
    assert model._shared.get_session_options().intra_op_num_threads == 1
    for logits in shared:
        np.testing.assert_allclose(logits, alone, atol=1e-5)


def test_length_estimates_count_other_scripts_per_character(
    exported: Callable[[Architecture, bool], BuildReport],
) -> None:
    model = OnnxCrossEncoder(exported("xlm-roberta", False).out_dir, intra_op_threads=1)
    model.load()
    ascii_guess = model.estimate_tokens(("q", "abcd" * 10))  # 40 characters
    cjk_guess = model.estimate_tokens(("q", "检索增强生成" * 6 + "检索增强"))  # 40 too
    assert ascii_guess == 10 + 0 + 4
    assert cjk_guess == 40 + 0 + 4
    assert model.estimate_tokens(("q", "x" * 1_000_000)) == model.manifest.max_tokens
