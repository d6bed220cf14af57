"""MiniLM exported to ONNX and served by OnnxEncoder, against sentence-transformers."""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from groundwire_core.errors import AlreadyExists, InvalidInput, NotFound
from groundwire_embedder.export import BuildReport, build_profile, staging_dir
from groundwire_embedder.export.minilm import SAMPLE_SENTENCES
from groundwire_embedder.models import MANIFEST_FILE, ModelManifest, OnnxEncoder
from groundwire_embedder.models.onnx_backend import EncodedBatch

LONG_TEXT = " ".join(SAMPLE_SENTENCES * 3)  # well over 256 word pieces

TEXTS = [
    "How do I reset my password?",
    "",
    "Groundwire answers questions from your own documents, citing its sources.",
    LONG_TEXT,
    "ok",
    *SAMPLE_SENTENCES[:8],
]


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# -- the build ---------------------------------------------------------------------------


def test_build_report_and_directory(minilm_fp32: BuildReport, minilm_build_log: list[str]) -> None:
    report = minilm_fp32
    assert report.profile == "minilm"
    assert report.int8 is False
    assert report.int8_cosine_mean is None and report.int8_cosine_min is None
    assert 0 <= report.max_abs_diff_vs_torch < 1e-4
    assert report.seconds > 0
    assert any("max abs diff" in line for line in minilm_build_log)

    out = report.out_dir
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith("source-")) == [
        MANIFEST_FILE,
        "model.onnx",
        "tokenizer.json",
    ]
    # nothing left beside it: no staging or scratch directories
    assert [p.name for p in out.parent.iterdir()] == [out.name]

    manifest = ModelManifest.load(out)
    assert manifest.profile == "minilm"
    assert manifest.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    assert manifest.pooling == "mean" and manifest.normalize is True
    assert manifest.dense_dims == 384 and manifest.max_tokens == 256
    assert manifest.outputs == ("dense",) and manifest.quantized is False
    assert manifest.input_names == ("input_ids", "attention_mask", "token_type_ids")

    # the shipped tokenizer is the checkpoint's, without its fixed 128 padding/truncation
    tok = json.loads((out / "tokenizer.json").read_text())
    assert tok["padding"] is None
    assert tok["truncation"]["max_length"] == 256


# -- parity with sentence-transformers ---------------------------------------------------


def test_dense_matches_sentence_transformers(
    fp32_encoder: OnnxEncoder, sentence_transformer: Any
) -> None:
    ours = fp32_encoder.encode(TEXTS).dense
    ref = sentence_transformer.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    assert ours.dtype == np.float32
    assert ours.shape == (len(TEXTS), 384)
    assert float(np.abs(ours - ref).max()) <= 1e-4


def test_vectors_are_unit_norm_and_finite(fp32_encoder: OnnxEncoder) -> None:
    dense = fp32_encoder.encode(TEXTS).dense
    assert np.isfinite(dense).all()
    np.testing.assert_allclose(np.linalg.norm(dense, axis=1), 1.0, atol=1e-5)


def test_long_text_is_truncated_to_max_tokens(fp32_encoder: OnnxEncoder) -> None:
    batch = fp32_encoder.tokenize([LONG_TEXT, "short"])
    assert batch.token_counts[0] == 256
    assert batch.input_ids.shape == (2, 256)
    assert batch.attention_mask[0].sum() == 256
    assert batch.token_counts[1] == int(batch.attention_mask[1].sum()) < 10
    out = fp32_encoder.postprocess(batch, fp32_encoder.infer(batch))
    assert np.isfinite(out.dense).all()
    # truncation keeps the head: the long text embeds like its first 256 tokens
    alone = fp32_encoder.encode([LONG_TEXT]).dense[0]
    np.testing.assert_allclose(out.dense[0], alone, atol=1e-5)


def test_batch_padding_gives_same_vectors_as_one_by_one(fp32_encoder: OnnxEncoder) -> None:
    texts = ["hi", "A medium length sentence about vector search.", LONG_TEXT, "", "Why?"]
    batched = fp32_encoder.encode(texts).dense
    singles = np.stack([fp32_encoder.encode([t]).dense[0] for t in texts])
    assert float(np.abs(batched - singles).max()) <= 1e-5


def test_tokenize_pads_to_longest_in_batch(fp32_encoder: OnnxEncoder) -> None:
    batch = fp32_encoder.tokenize(["one two three", "one"])
    assert batch.token_counts == [5, 3]  # [CLS] ... [SEP]
    assert batch.input_ids.shape == batch.attention_mask.shape == batch.token_type_ids.shape
    assert batch.input_ids.shape == (2, 5)
    assert batch.input_ids.dtype == np.int64
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert not batch.token_type_ids.any()
    raw = fp32_encoder.infer(batch)
    assert list(raw) == ["last_hidden_state"]
    hidden = raw["last_hidden_state"]
    assert hidden.dtype == np.float32 and hidden.shape == (2, 5, 384)


def test_empty_string_and_empty_batch(fp32_encoder: OnnxEncoder) -> None:
    batch = fp32_encoder.tokenize([""])
    assert batch.token_counts == [2]
    dense = fp32_encoder.postprocess(batch, fp32_encoder.infer(batch)).dense
    assert dense.shape == (1, 384) and np.isfinite(dense).all()
    assert abs(float(np.linalg.norm(dense[0])) - 1.0) < 1e-5

    empty = fp32_encoder.encode([])
    assert empty.dense.shape == (0, 384) and empty.dense.dtype == np.float32


def test_related_texts_score_higher_than_unrelated(fp32_encoder: OnnxEncoder) -> None:
    query, related, unrelated = fp32_encoder.encode(
        [
            "How do I reset my password?",
            "I forgot my login password and need to change it.",
            "The volcano erupted and covered the village in ash.",
        ]
    ).dense
    assert _cos(query, related) > _cos(query, unrelated) + 0.3


def test_rejects_non_string_input(fp32_encoder: OnnxEncoder) -> None:
    with pytest.raises(InvalidInput, match="texts\\[1\\]"):
        fp32_encoder.tokenize(["fine", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidInput):
        fp32_encoder.tokenize("a single string")


def test_steps_run_concurrently_on_threads(fp32_encoder: OnnxEncoder) -> None:
    texts = [f"{s} ({i})" for i, s in enumerate(SAMPLE_SENTENCES)]
    chunks = [texts[i : i + 5] for i in range(0, len(texts), 5)]
    expected = [fp32_encoder.encode(c).dense for c in chunks]
    with ThreadPoolExecutor(max_workers=4) as pool:
        # tokenize on some threads while others run inference
        batches = list(pool.map(fp32_encoder.tokenize, chunks))
        hidden = list(pool.map(fp32_encoder.infer, batches))
        got = [fp32_encoder.postprocess(b, h).dense for b, h in zip(batches, hidden, strict=True)]
        again = list(pool.map(lambda c: fp32_encoder.encode(c).dense, chunks))
    for e, g, a in zip(expected, got, again, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-6)
        np.testing.assert_allclose(a, e, atol=1e-6)


def test_shared_lanes_give_the_vectors_of_the_alone_session(minilm_fp32: BuildReport) -> None:
    """With two lanes the encoder runs on a second, one-thread session; concurrent runs
    on it give what the all-threads session gives."""
    encoder = OnnxEncoder(minilm_fp32.out_dir, intra_op_threads=2, lanes=2)
    encoder.load()
    texts = [f"{s} ({i})" for i, s in enumerate(SAMPLE_SENTENCES)]
    chunks = [texts[i : i + 5] for i in range(0, len(texts), 5)]
    batches = [encoder.tokenize(c) for c in chunks]
    alone = [encoder.postprocess(b, encoder.infer(b)).dense for b in batches]

    def on_a_lane(batch: EncodedBatch) -> np.ndarray:
        return encoder.postprocess(batch, encoder.infer(batch, True)).dense

    with ThreadPoolExecutor(max_workers=2) as pool:
        shared = list(pool.map(on_a_lane, batches))
    assert encoder._shared is not None and encoder._shared is not encoder._session
    assert encoder._shared.get_session_options().intra_op_num_threads == 1
    for a, b in zip(alone, shared, strict=True):
        np.testing.assert_allclose(b, a, atol=1e-5)


# -- encoder lifecycle -------------------------------------------------------------------


def test_encoder_does_not_load_in_constructor(tmp_path: Path) -> None:
    encoder = OnnxEncoder(tmp_path / "absent")  # must not touch the disk
    assert not encoder.loaded
    with pytest.raises(RuntimeError):
        _ = encoder.manifest
    with pytest.raises(RuntimeError):
        encoder.tokenize(["x"])
    with pytest.raises(NotFound, match="groundwire models build minilm"):
        encoder.load()


def test_load_reports_missing_onnx_file(minilm_fp32: BuildReport, tmp_path: Path) -> None:
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy2(minilm_fp32.out_dir / MANIFEST_FILE, partial / MANIFEST_FILE)
    shutil.copy2(minilm_fp32.out_dir / "tokenizer.json", partial / "tokenizer.json")
    with pytest.raises(NotFound, match=r"model\.onnx"):
        OnnxEncoder(partial).load()


# -- int8 ----------------------------------------------------------------------------------


def test_int8_build(minilm_int8: tuple[BuildReport, list[str]], fp32_encoder: OnnxEncoder) -> None:
    report, lines = minilm_int8
    assert report.int8 is True
    assert report.max_abs_diff_vs_torch < 1e-4
    assert report.int8_cosine_mean is not None and report.int8_cosine_min is not None
    assert report.int8_cosine_mean >= 0.99
    assert report.int8_cosine_min >= 0.95
    assert any("cosine" in line for line in lines)

    manifest = ModelManifest.load(report.out_dir)
    assert manifest.quantized is True and manifest.onnx_file == "model.onnx"
    assert not any(p.suffix == ".onnx" and p.name != "model.onnx" for p in report.out_dir.iterdir())

    import onnx

    ops = {n.op_type for n in onnx.load(str(report.out_dir / "model.onnx")).graph.node}
    assert "DynamicQuantizeLinear" in ops or "MatMulInteger" in ops

    int8 = OnnxEncoder(report.out_dir, intra_op_threads=2)
    int8.load()
    texts = ["How do I reset my password?", "Solar panels produce less in winter.", ""]
    q = int8.encode(texts).dense
    f = fp32_encoder.encode(texts).dense
    assert q.shape == (3, 384)
    for a, b in zip(q, f, strict=True):
        assert _cos(a, b) > 0.97


# -- atomic builds -------------------------------------------------------------------------


def test_unknown_profile_lists_known_ones(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="minilm"):
        build_profile("bge-m3-large-xl", tmp_path / "x")


def test_failed_build_leaves_nothing(minilm_source: Path, tmp_path: Path) -> None:
    # a checkpoint whose tokenizer is broken: the build fails mid-way
    broken = tmp_path / "broken-src"
    broken.mkdir()
    for item in minilm_source.iterdir():
        if item.name != "tokenizer.json":
            os.symlink(item, broken / item.name)
    (broken / "tokenizer.json").write_text("{}", encoding="utf-8")
    parent = tmp_path / "models"
    with pytest.raises(InvalidInput, match="tokenizer"):
        build_profile("minilm", parent / "minilm", source=broken, log=lambda _: None)
    assert not (parent / "minilm").exists()
    assert list(parent.iterdir()) == []


def test_missing_source_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="does not exist"):
        build_profile("minilm", tmp_path / "out", source=tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFound, match=r"tokenizer\.json"):
        build_profile("minilm", tmp_path / "out", source=tmp_path / "empty")
    assert not (tmp_path / "out").exists()


def test_staging_replaces_a_model_only_on_success(tmp_path: Path) -> None:
    out = tmp_path / "minilm"
    out.mkdir()
    (out / MANIFEST_FILE).write_text("old", encoding="utf-8")

    with pytest.raises(RuntimeError), staging_dir(out) as stage:
        (stage / MANIFEST_FILE).write_text("half", encoding="utf-8")
        raise RuntimeError("build failed")
    assert (out / MANIFEST_FILE).read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["minilm"]

    with staging_dir(out) as stage:
        (stage / MANIFEST_FILE).write_text("new", encoding="utf-8")
    assert (out / MANIFEST_FILE).read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["minilm"]


def test_staging_refuses_an_unrelated_directory(tmp_path: Path) -> None:
    out = tmp_path / "photos"
    out.mkdir()
    (out / "holiday.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(AlreadyExists), staging_dir(out):
        pass
    assert [p.name for p in out.iterdir()] == ["holiday.jpg"]


def test_serving_modules_do_not_import_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, groundwire_embedder.models, groundwire_embedder.export\n"
        "heavy = {'torch', 'transformers', 'onnx'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
