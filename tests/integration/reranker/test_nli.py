"""The entailment (NLI) profile: exported and served, it agrees with transformers.

Tiny random three-label classifiers of the real architectures — DeBERTa-v2 (the v3 NLI
cross-encoders use its classes), BERT and XLM-RoBERTa — each with its labels named in a
different case and order, are built by the export command (`models build nli`) and
served through the real gRPC server's Entail RPC. The probabilities must match
transformers' softmax on the same weights, label for label. A random model proves
mechanics, never quality.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from groundwire.reranker.v1 import reranker_pb2
from groundwire_core.errors import InvalidInput
from groundwire_core.grpc.errors import RETRY_AFTER_KEY
from groundwire_reranker.export import BuildReport, build_profile
from groundwire_reranker.export.tiny import Architecture, tiny_checkpoint
from groundwire_reranker.models import OnnxCrossEncoder
from groundwire_reranker.models.nli import OnnxNliModel

TOLERANCE = 1e-4
# Each architecture's head names the labels its own way, as hub checkpoints do.
ID2LABEL: dict[Architecture, tuple[str, ...]] = {
    "deberta-v2": ("contradiction", "entailment", "neutral"),
    "bert": ("ENTAILMENT", "NEUTRAL", "CONTRADICTION"),
    "xlm-roberta": ("Neutral", "Contradiction", "Entailment"),
}
Served = Callable[..., Any]  # conftest's `served` fixture


@pytest.fixture(scope="module")
def nli_checkpoints(
    tmp_path_factory: pytest.TempPathFactory, corpus_sentences: list[str]
) -> dict[Architecture, Path]:
    root = tmp_path_factory.mktemp("nli-checkpoints")
    return {
        arch: tiny_checkpoint(arch, root / arch, corpus_sentences, id2label=labels)
        for arch, labels in ID2LABEL.items()
    }


@pytest.fixture(scope="module")
def nli_models(
    tmp_path_factory: pytest.TempPathFactory, nli_checkpoints: dict[Architecture, Path]
) -> dict[Architecture, BuildReport]:
    root = tmp_path_factory.mktemp("nli-models")
    return {
        arch: build_profile("nli", root / arch, source=src, log=lambda _: None)
        for arch, src in nli_checkpoints.items()
    }


def _pairs(sentences: list[str]) -> list[tuple[str, str]]:
    """Premises of one to three sentences, hypotheses of one; all within the budget."""
    out = []
    for i in range(12):
        premise = " ".join(sentences[i * 5 : i * 5 + 1 + i % 3])
        out.append((premise, sentences[300 + i]))
    return out


def _transformers_probs(checkpoint: Path, pairs: list[tuple[str, str]]) -> np.ndarray:
    """softmax(logits) of AutoModelForSequenceClassification, columns in (entailment,
    neutral, contradiction) order, mapped through the checkpoint's own id2label."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(str(checkpoint))
    model: Any = AutoModelForSequenceClassification.from_pretrained(str(checkpoint))
    model.eval()
    inputs = tokenizer(
        [p for p, _ in pairs], [h for _, h in pairs], padding=True, return_tensors="pt"
    )
    with torch.no_grad():
        probs = torch.softmax(model(**inputs).logits.double(), dim=-1).numpy()
    column = {label.lower(): i for i, label in model.config.id2label.items()}
    return probs[:, [column["entailment"], column["neutral"], column["contradiction"]]]


@pytest.mark.parametrize("arch", tuple(ID2LABEL))
async def test_served_probabilities_match_transformers(
    arch: Architecture,
    nli_models: dict[Architecture, BuildReport],
    nli_checkpoints: dict[Architecture, Path],
    corpus_sentences: list[str],
    served: Served,
) -> None:
    report = nli_models[arch]
    manifest = json.loads((report.out_dir / "groundwire-model.json").read_text())
    assert manifest["labels"] == [label.lower() for label in ID2LABEL[arch]]
    assert report.max_abs_diff_vs_torch <= 1e-4
    pairs = _pairs(corpus_sentences)
    expected = _transformers_probs(nli_checkpoints[arch], pairs)
    async with served(nli_model_dir=report.out_dir) as stub:
        info = await stub.Info(reranker_pb2.InfoRequest())
        assert info.entailment_ready and not info.ready, "NLI only: no relevance model"
        assert info.entailment_model_id == arch and info.entailment_max_tokens == 128
        reply = await stub.Entail(
            reranker_pb2.EntailRequest(
                pairs=[reranker_pb2.EntailPair(premise=p, hypothesis=h) for p, h in pairs]
            )
        )
    got = np.array([[r.entailment, r.neutral, r.contradiction] for r in reply.results])
    assert got.shape == (len(pairs), 3)
    assert np.abs(got - expected).max() <= TOLERANCE
    assert np.allclose(got.sum(axis=1), 1.0, atol=1e-5)
    assert np.ptp(got[:, 0]) > 0.01, "degenerate model: the comparison would prove nothing"
    assert reply.total_tokens > 0 and reply.timing.total_ms > 0


def test_a_long_premise_is_cut_and_the_hypothesis_kept_whole(
    nli_models: dict[Architecture, BuildReport],
    nli_checkpoints: dict[Architecture, Path],
    corpus_sentences: list[str],
) -> None:
    from transformers import AutoTokenizer

    model = OnnxNliModel(nli_models["bert"].out_dir, intra_op_threads=1)
    model.load()
    hf: Any = AutoTokenizer.from_pretrained(str(nli_checkpoints["bert"]))
    premise = " ".join(corpus_sentences[:60])
    hypothesis = corpus_sentences[70]
    (encoding,) = model.encode_pairs([(premise, hypothesis)])
    h_ids = hf(hypothesis, add_special_tokens=False)["input_ids"]
    p_ids = hf(premise, add_special_tokens=False)["input_ids"]
    assert len(encoding.ids) == model.manifest.max_tokens
    # [CLS] premise-prefix [SEP] hypothesis [SEP]
    assert encoding.ids[-1 - len(h_ids) : -1] == h_ids
    kept = len(encoding.ids) - len(h_ids) - 3
    assert encoding.ids[1 : 1 + kept] == p_ids[:kept]


def test_each_kind_of_model_refuses_the_other_kind_of_folder(
    nli_models: dict[Architecture, BuildReport], tmp_path: Path
) -> None:
    with pytest.raises(InvalidInput, match="NLI_MODEL_DIR"):
        OnnxCrossEncoder(nli_models["bert"].out_dir).load()
    # a relevance export is the same folder with no labels
    folder = tmp_path / "no-labels"
    shutil.copytree(nli_models["bert"].out_dir, folder)
    manifest = json.loads((folder / "groundwire-model.json").read_text())
    manifest["labels"] = []
    (folder / "groundwire-model.json").write_text(json.dumps(manifest))
    with pytest.raises(InvalidInput, match="relevance cross-encoder"):
        OnnxNliModel(folder).load()


def test_an_int8_build_checks_what_quantization_costs_the_probabilities(
    nli_checkpoints: dict[Architecture, Path], tmp_path: Path
) -> None:
    lines: list[str] = []
    report = build_profile(
        "nli", tmp_path / "int8", source=nli_checkpoints["deberta-v2"], int8=True,
        log=lines.append,
    )  # fmt: skip
    assert report.int8 and report.int8_score_mean_abs_diff is not None
    assert report.int8_score_mean_abs_diff <= 0.05
    assert any(line.startswith("int8 vs fp32 scores") for line in lines)
    model = OnnxNliModel(report.out_dir, intra_op_threads=1)
    model.load()
    assert model.manifest.quantized
    ((e, n, c),) = model.probabilities([("A premise sentence.", "a hypothesis")])
    assert e + n + c == pytest.approx(1.0, abs=1e-5)


def test_a_three_label_head_without_nli_names_is_refused(
    nli_checkpoints: dict[Architecture, Path], tmp_path: Path
) -> None:
    src = tmp_path / "generic"
    shutil.copytree(nli_checkpoints["bert"], src)
    config = json.loads((src / "config.json").read_text())
    config["id2label"] = {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}
    config["label2id"] = {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2}
    (src / "config.json").write_text(json.dumps(config))
    with pytest.raises(InvalidInput, match="entailment, neutral, contradiction"):
        build_profile("nli", tmp_path / "out", source=src, log=lambda _: None)
    assert not (tmp_path / "out").exists()


class GatedNli:
    """The real NLI model whose inference waits for the test to open a gate."""

    def __init__(self, inner: OnnxNliModel) -> None:
        self.inner = inner
        self.gate = threading.Event()
        self.entered = threading.Event()

    @property
    def manifest(self) -> Any:
        return self.inner.manifest

    def load(self) -> None:
        self.inner.load()

    def estimate_tokens(self, item: tuple[str, str]) -> int:
        return self.inner.estimate_tokens(item)

    def tokenize(self, items: Sequence[tuple[str, str]]) -> Any:
        return self.inner.tokenize(items)

    def token_counts(self, batch: Any) -> list[int]:
        return self.inner.token_counts(batch)

    def infer(self, batch: Any, shared: bool = False) -> Any:
        self.entered.set()
        if not self.gate.wait(timeout=30):
            raise TimeoutError("the test never opened the gate")
        return self.inner.infer(batch, shared)

    def postprocess(self, batch: Any, raw: Any) -> Any:
        return self.inner.postprocess(batch, raw)


async def test_entail_shares_the_queue_rules_overload_and_errors(
    nli_models: dict[Architecture, BuildReport], corpus_sentences: list[str], served: Served
) -> None:
    model = GatedNli(OnnxNliModel(nli_models["bert"].out_dir, intra_op_threads=1))
    model.gate.set()  # open for the warm-up
    pairs = [reranker_pb2.EntailPair(premise=p, hypothesis=h) for p, h in _pairs(corpus_sentences)]
    async with served(nli_model=model, max_queue=2, max_batch_tokens=256) as stub:
        with pytest.raises(grpc.aio.AioRpcError) as empty:
            await stub.Entail(reranker_pb2.EntailRequest())
        assert empty.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.aio.AioRpcError) as blank:
            await stub.Entail(
                reranker_pb2.EntailRequest(pairs=[reranker_pb2.EntailPair(premise="p")])
            )
        assert blank.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.aio.AioRpcError) as unavailable:
            await stub.Rerank(reranker_pb2.RerankRequest(query="q", passages=["p"]))
        assert unavailable.value.code() == grpc.StatusCode.UNAVAILABLE

        model.gate.clear()
        model.entered.clear()
        request = reranker_pb2.EntailRequest(pairs=pairs)

        async def call() -> reranker_pb2.EntailResponse:
            reply: reranker_pb2.EntailResponse = await stub.Entail(request, timeout=60)
            return reply

        first = asyncio.create_task(call())
        assert await asyncio.to_thread(model.entered.wait, 10)
        flood = [asyncio.create_task(call()) for _ in range(12)]
        done, _ = await asyncio.wait(flood, timeout=5, return_when=asyncio.FIRST_EXCEPTION)
        refused = [t.exception() for t in done if t.exception() is not None]
        assert refused, "beyond the queue, Entail is refused while the model is busy"
        for error in refused:
            assert isinstance(error, grpc.aio.AioRpcError)
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert float(dict(error.trailing_metadata() or ())[RETRY_AFTER_KEY]) > 0
        model.gate.set()
        assert len((await first).results) == len(pairs)
        await asyncio.gather(*flood, return_exceptions=True)


async def test_without_an_nli_model_entail_is_unavailable(served: Served) -> None:
    async with served() as stub:
        info = await stub.Info(reranker_pb2.InfoRequest())
        assert info.entailment_ready is False and info.entailment_model_id == ""
        with pytest.raises(grpc.aio.AioRpcError) as error:
            pair = reranker_pb2.EntailPair(premise="p", hypothesis="h")
            await stub.Entail(reranker_pb2.EntailRequest(pairs=[pair]))
        assert error.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "no entailment (NLI) model" in (error.value.details() or "")


async def test_the_orchestrator_verifier_reads_the_served_model(
    nli_models: dict[Architecture, BuildReport], corpus_sentences: list[str]
) -> None:
    """Client and verifier over a real channel: the support is the best window's
    entailment as the model computes it, and the evidence span is that window."""
    from groundwire_core.grpc.client import create_channel
    from groundwire_core.grpc.server import serving
    from groundwire_orchestrator.clients.reranker import RerankerClient
    from groundwire_orchestrator.domain import Verification
    from groundwire_orchestrator.verification.base import Claim
    from groundwire_orchestrator.verification.nli import NliVerifier, windows
    from groundwire_reranker.server import RerankerService
    from groundwire_reranker.settings import RerankerSettings

    report = nli_models["deberta-v2"]
    reference = OnnxNliModel(report.out_dir, intra_op_threads=1)
    reference.load()
    passage = " ".join(corpus_sentences[10:16])
    claims = [Claim(corpus_sentences[12], passage), Claim(corpus_sentences[400], passage)]
    settings = RerankerSettings(port=0, intra_op_threads=1, nli_model_dir=report.out_dir)
    async with (
        serving(RerankerService(settings), settings) as port,
        create_channel(f"127.0.0.1:{port}") as channel,
    ):
        client = RerankerClient(channel)
        load = await client.load(timeout_s=5)
        assert load.entailment_ready and load.entailment_max_tokens == 128
        verifier = NliVerifier(client, max_tokens=load.entailment_max_tokens)
        got = await verifier.judge(claims)
    for claim, judgement in zip(claims, got, strict=True):
        assert judgement.method == "nli" and judgement.status is not Verification.UNCHECKED
        spans = windows(
            claim.text, passage, max_chars=128 * 3 - len(claim.text), window_sentences=2,
            max_windows=16,
        )  # fmt: skip
        probs = reference.probabilities([(passage[s:e], claim.text) for s, e in spans])
        best = max(range(len(spans)), key=lambda k: probs[k][0])
        assert judgement.support == pytest.approx(probs[best][0], abs=1e-4)
        assert judgement.contradiction == pytest.approx(max(p[2] for p in probs), abs=1e-4)
        if judgement.status is not Verification.CONTRADICTED:
            assert judgement.evidence == spans[best]


async def test_the_verifier_is_unchecked_when_the_reranker_has_no_nli_model() -> None:
    from groundwire_core.grpc.client import create_channel
    from groundwire_core.grpc.server import serving
    from groundwire_orchestrator.clients.reranker import RerankerClient
    from groundwire_orchestrator.domain import Verification
    from groundwire_orchestrator.verification.base import Claim
    from groundwire_orchestrator.verification.nli import NliVerifier
    from groundwire_reranker.server import RerankerService
    from groundwire_reranker.settings import RerankerSettings

    settings = RerankerSettings(port=0, intra_op_threads=1)
    async with (
        serving(RerankerService(settings), settings) as port,
        create_channel(f"127.0.0.1:{port}") as channel,
    ):
        client = RerankerClient(channel)
        assert (await client.load(timeout_s=5)).entailment_ready is False
        (judgement,) = await NliVerifier(client).judge([Claim("a claim.", "A passage.")])
    assert judgement.status is Verification.UNCHECKED
    assert "no entailment (NLI) model is configured" in judgement.reason
