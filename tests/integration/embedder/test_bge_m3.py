"""BGE-M3 (tiny random weights, real architecture and heads): exported with the project's
own build, served through the real gRPC EmbedderService, compared with FlagEmbedding's
BGEM3FlagModel on the same checkpoint. Mechanics, not quality."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from groundwire.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from groundwire_core.errors import InvalidInput, NotFound
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.server import serving
from groundwire_embedder.export import PROFILES, BuildReport, build_profile
from groundwire_embedder.export.sample_text import SAMPLE_SENTENCES
from groundwire_embedder.models import MANIFEST_FILE, ModelManifest, OnnxEncoder
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings

ALL_OUTPUTS = [
    embedder_pb2.OUTPUT_DENSE,
    embedder_pb2.OUTPUT_SPARSE,
    embedder_pb2.OUTPUT_MULTI_VECTOR,
]
LONG_TEXT = " ".join(SAMPLE_SENTENCES * 4)  # well over 512 tokens: truncated
TEXTS = [
    "How do I reset my password?",
    "",
    "the the the search search",  # repeated tokens: one weight per id, the highest
    "Zebra quokka xylophone!",  # characters the tiny vocabulary lacks: <unk>, dropped
    LONG_TEXT,
    "naïve café, 42 % off",
    *SAMPLE_SENTENCES[:6],
]


@pytest.fixture
async def bge_m3_port(bge_m3_fp32: BuildReport) -> AsyncIterator[int]:
    settings = EmbedderSettings(port=0, model_dir=bge_m3_fp32.out_dir, intra_op_threads=1)
    async with serving(EmbedderService(settings), settings) as port:
        yield port


async def _embed(port: int, texts: list[str]) -> embedder_pb2.EmbedResponse:
    async with create_channel(f"127.0.0.1:{port}") as channel:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        request = embedder_pb2.EmbedRequest(
            texts=texts, kind=embedder_pb2.TEXT_KIND_DOCUMENT, outputs=ALL_OUTPUTS
        )
        reply: embedder_pb2.EmbedResponse = await stub.Embed(request, timeout=60)
        return reply


def _rows(embedding: embedder_pb2.Embedding) -> np.ndarray:
    return np.array([list(v.values) for v in embedding.multi_vector], dtype=np.float32)


# -- the build -----------------------------------------------------------------------------


def test_profile_is_registered() -> None:
    assert "bge-m3" in PROFILES and "minilm" in PROFILES


def test_build_writes_one_graph_with_three_heads(
    bge_m3_fp32: BuildReport, bge_m3_build_log: list[str]
) -> None:
    report = bge_m3_fp32
    assert report.profile == "bge-m3" and report.int8 is False
    assert 0 <= report.max_abs_diff_vs_torch < 1e-4
    assert any("max abs diff dense" in line and "colbert" in line for line in bge_m3_build_log)

    out = report.out_dir
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith("source-")) == [
        MANIFEST_FILE,
        "model.onnx",
        "tokenizer.json",
    ]
    manifest = ModelManifest.load(out)
    assert manifest.profile == "bge-m3" and manifest.model_id == "tiny-bge-m3"
    assert manifest.outputs == ("dense", "sparse", "multi_vector")
    assert manifest.pooling == "cls" and manifest.normalize is True
    assert manifest.dense_dims == 32 and manifest.multi_vector_dims == 32
    assert manifest.max_tokens == 512  # 514 positions, XLM-R's offset of 2
    assert manifest.input_names == ("input_ids", "attention_mask")
    assert manifest.sparse_ignored_ids == (0, 1, 2, 3)  # <s> <pad> </s> <unk>

    graph = onnx.load(str(out / "model.onnx")).graph
    assert [o.name for o in graph.output] == ["dense", "sparse_weights", "colbert_vectors"]
    for value in graph.input:  # batch and sequence are both dynamic
        dims = value.type.tensor_type.shape.dim
        assert [d.dim_param for d in dims] == ["batch", "sequence"]


def test_graph_runs_any_batch_and_length(bge_m3_fp32: BuildReport) -> None:
    encoder = OnnxEncoder(bge_m3_fp32.out_dir, intra_op_threads=1)
    encoder.load()
    for texts in (["one"], TEXTS[:3], list(SAMPLE_SENTENCES[:17])):
        batch = encoder.tokenize(texts)
        raw = encoder.infer(batch)
        n, length = batch.input_ids.shape
        assert raw["dense"].shape == (n, 32)
        assert raw["sparse_weights"].shape == (n, length)
        assert raw["colbert_vectors"].shape == (n, length - 1, 32)
        out = encoder.postprocess(batch, raw)
        assert out.sparse is not None and out.multi_vector is not None
        assert [len(m) for m in out.multi_vector] == [c - 1 for c in batch.token_counts]


# -- parity with FlagEmbedding through the real service ---------------------------------------


async def test_service_matches_flag_embedding(bge_m3_port: int, flag_model: Any) -> None:
    reply = await _embed(bge_m3_port, TEXTS)
    reference = flag_model.encode(
        TEXTS, return_dense=True, return_sparse=True, return_colbert_vecs=True
    )
    assert len(reply.embeddings) == len(TEXTS)
    assert reply.total_tokens == sum(e.tokens for e in reply.embeddings)

    dense = np.array([list(e.dense.values) for e in reply.embeddings], dtype=np.float32)
    assert dense.shape == reference["dense_vecs"].shape == (len(TEXTS), 32)
    assert float(np.abs(dense - reference["dense_vecs"]).max()) <= 1e-4

    for i, embedding in enumerate(reply.embeddings):
        expected = {int(k): float(v) for k, v in reference["lexical_weights"][i].items()}
        ours = dict(zip(embedding.sparse.indices, embedding.sparse.values, strict=True))
        assert set(ours) == set(expected), TEXTS[i]
        for token_id, weight in expected.items():
            assert abs(ours[token_id] - weight) <= 1e-4
        assert list(embedding.sparse.indices) == sorted(ours)

        rows = _rows(embedding)
        ref_rows = reference["colbert_vecs"][i]
        assert rows.shape == ref_rows.shape == (embedding.tokens - 1, 32)
        assert float(np.abs(rows - ref_rows).max()) <= 1e-4

    unk = reply.embeddings[3]
    assert 3 not in unk.sparse.indices  # <unk> is never a lexical weight
    long = reply.embeddings[4]
    assert long.tokens == 512 and long.truncated
    assert not reply.embeddings[0].truncated
    assert len(reply.embeddings[1].sparse.indices) == 0  # "" is <s></s> only
    assert _rows(reply.embeddings[1]).shape == (1, 32)  # FlagEmbedding keeps </s>


async def test_batching_does_not_change_vectors(bge_m3_port: int) -> None:
    together = await _embed(bge_m3_port, TEXTS)
    for i in (0, 3, 4):  # alone: no padding, no bucket neighbours
        (alone,) = (await _embed(bge_m3_port, [TEXTS[i]])).embeddings
        both = together.embeddings[i]
        assert np.allclose(alone.dense.values, both.dense.values, atol=1e-5)
        assert list(alone.sparse.indices) == list(both.sparse.indices)
        assert np.allclose(_rows(alone), _rows(both), atol=1e-5)


async def test_outputs_are_computed_only_when_asked(bge_m3_port: int) -> None:
    async with create_channel(f"127.0.0.1:{bge_m3_port}") as channel:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        dense_only = await stub.Embed(embedder_pb2.EmbedRequest(texts=["a question"]))
        (e,) = dense_only.embeddings
        assert e.HasField("dense") and not e.HasField("sparse") and len(e.multi_vector) == 0
        sparse_only = await stub.Embed(
            embedder_pb2.EmbedRequest(texts=["a question"], outputs=[embedder_pb2.OUTPUT_SPARSE])
        )
        (s,) = sparse_only.embeddings
        assert not s.HasField("dense") and len(s.sparse.indices) > 0

        info = await stub.Info(embedder_pb2.InfoRequest())
        assert (info.profile, info.dense_dims, info.multi_vector_dims) == ("bge-m3", 32, 32)
        assert list(info.outputs) == ALL_OUTPUTS
        assert info.max_tokens == 512 and not info.quantized


# -- int8, large graphs, the command, bad sources ---------------------------------------------


def test_int8_build_measures_and_prints_its_drift(
    bge_m3_int8: tuple[BuildReport, list[str]], bge_m3_fp32: BuildReport
) -> None:
    report, lines = bge_m3_int8
    assert report.int8 is True
    assert report.int8_cosine_mean is not None and report.int8_cosine_min is not None
    assert -1.0 <= report.int8_cosine_min <= report.int8_cosine_mean <= 1.0 + 1e-6
    assert any(line.startswith("int8 vs fp32 dense cosine") for line in lines)
    assert any(line.startswith("int8 vs fp32 ColBERT cosine") for line in lines)
    assert ModelManifest.load(report.out_dir).quantized is True
    ops = {n.op_type for n in onnx.load(str(report.out_dir / "model.onnx")).graph.node}
    assert "MatMulInteger" in ops

    int8 = OnnxEncoder(report.out_dir, intra_op_threads=1)
    int8.load()
    fp32 = OnnxEncoder(bge_m3_fp32.out_dir, intra_op_threads=1)
    fp32.load()
    q, f = int8.encode(TEXTS[:4]), fp32.encode(TEXTS[:4])
    assert q.dense.shape == f.dense.shape
    assert q.multi_vector is not None and f.multi_vector is not None
    assert [m.shape for m in q.multi_vector] == [m.shape for m in f.multi_vector]


def test_external_weights_file_for_large_graphs(
    tiny_bge_m3_source: Path, bge_m3_fp32: BuildReport, tmp_path: Path
) -> None:
    # bge-m3 in fp32 is over protobuf's 2 GiB limit: its weights go to model.onnx.data
    report = build_profile(
        "bge-m3",
        tmp_path / "big",
        source=tiny_bge_m3_source,
        log=lambda _: None,
        external_data=True,
    )
    names = {p.name for p in report.out_dir.iterdir()}
    assert {"model.onnx", "model.onnx.data"} <= names
    assert (report.out_dir / "model.onnx").stat().st_size < 100_000
    served, reference = OnnxEncoder(report.out_dir), OnnxEncoder(bge_m3_fp32.out_dir)
    served.load()
    reference.load()
    assert np.allclose(served.encode(TEXTS).dense, reference.encode(TEXTS).dense, atol=1e-6)

    quantized = build_profile(
        "bge-m3",
        tmp_path / "big-int8",
        source=tiny_bge_m3_source,
        log=lambda _: None,
        external_data=True,
        int8=True,
    )
    assert (quantized.out_dir / "model.onnx.data").is_file()
    int8 = OnnxEncoder(quantized.out_dir)
    int8.load()
    assert int8.encode(["one more"]).dense.shape == (1, 32)


def test_max_tokens_caps_the_served_length(tiny_bge_m3_source: Path, tmp_path: Path) -> None:
    report = build_profile(
        "bge-m3", tmp_path / "short", source=tiny_bge_m3_source, log=lambda _: None, max_tokens=64
    )
    assert ModelManifest.load(report.out_dir).max_tokens == 64
    encoder = OnnxEncoder(report.out_dir)
    encoder.load()
    assert encoder.tokenize([LONG_TEXT]).token_counts == [64]
    with pytest.raises(InvalidInput, match="max_tokens"):
        build_profile("bge-m3", tmp_path / "x", source=tiny_bge_m3_source, max_tokens=2)


def test_models_build_command(tiny_bge_m3_source: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli-bge-m3"
    command = [sys.executable, "-m", "groundwire_cli", "models", "build", "bge-m3"]
    command += ["--source", str(tiny_bge_m3_source), "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "fp32 ONNX vs PyTorch" in done.stdout and f"built bge-m3 into {out}" in done.stdout
    assert ModelManifest.load(out).outputs == ("dense", "sparse", "multi_vector")


def test_source_without_heads_is_not_found(tiny_bge_m3_source: Path, tmp_path: Path) -> None:
    partial = tmp_path / "no-heads"
    shutil.copytree(tiny_bge_m3_source, partial)
    (partial / "sparse_linear.pt").unlink()
    with pytest.raises(NotFound, match=r"sparse_linear\.pt"):
        build_profile("bge-m3", tmp_path / "out", source=partial, log=lambda _: None)
    with pytest.raises(NotFound, match="does not exist"):
        build_profile("bge-m3", tmp_path / "out", source=tmp_path / "absent", log=lambda _: None)
    assert not (tmp_path / "out").exists()
