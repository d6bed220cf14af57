"""The cross-encoder manifest, and the errors a broken model directory produces."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from groundwire_core.errors import InvalidInput, NotFound
from groundwire_reranker.models import MANIFEST_FILE, CrossEncoderManifest, OnnxCrossEncoder

BGE = CrossEncoderManifest(
    profile="bge-reranker-v2-m3",
    model_id="BAAI/bge-reranker-v2-m3",
    max_tokens=512,
    query_max_tokens=384,
    pad_token_id=1,
)


def _as_json(manifest: CrossEncoderManifest) -> dict[str, Any]:
    data = asdict(manifest)
    data["input_names"] = list(manifest.input_names)
    return data


def _write(model_dir: Path, data: Any) -> Path:
    model_dir.mkdir(parents=True, exist_ok=True)
    path = model_dir / MANIFEST_FILE
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_round_trip_and_versioned_json(tmp_path: Path) -> None:
    bert = replace(
        BGE,
        profile="cross-encoder",
        input_names=("input_ids", "attention_mask", "token_type_ids"),
        quantized=True,
        pad_token_id=0,
    )
    for manifest in (BGE, bert):
        manifest.save(tmp_path)
        assert CrossEncoderManifest.load(tmp_path) == manifest
    data = json.loads((tmp_path / MANIFEST_FILE).read_text())
    assert data["manifest_version"] == 1 and data["kind"] == "cross-encoder"
    assert data["input_names"] == ["input_ids", "attention_mask", "token_type_ids"]
    assert [p.name for p in tmp_path.iterdir()] == [MANIFEST_FILE], "no temp files left"


def test_defaults_apply_when_optional_fields_absent(tmp_path: Path) -> None:
    data = _as_json(BGE)
    for key in ("onnx_file", "tokenizer_file", "quantized", "input_names", "kind"):
        del data[key]
    _write(tmp_path, data)
    loaded = CrossEncoderManifest.load(tmp_path)
    assert loaded == BGE and loaded.input_names == ("input_ids", "attention_mask")


def test_missing_directory_and_manifest_are_not_found_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="groundwire models build cross-encoder"):
        CrossEncoderManifest.load(tmp_path / "nope")
    with pytest.raises(NotFound, match=MANIFEST_FILE):
        CrossEncoderManifest.load(tmp_path)


def test_an_embedder_model_is_refused_by_name(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "manifest_version": 1,
            "profile": "minilm",
            "model_id": "sentence-transformers/all-MiniLM-L6-v2",
            "pooling": "mean",
            "normalize": True,
            "dense_dims": 384,
            "max_tokens": 256,
            "outputs": ["dense"],
        },
    )
    with pytest.raises(InvalidInput, match="embedder \\(bi-encoder\\) model, not a cross-encoder"):
        CrossEncoderManifest.load(tmp_path)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d.pop("max_tokens"), "max_tokens"),
        (lambda d: d.update(max_tokens=8), "at least 16"),
        (lambda d: d.update(max_tokens="512"), "max_tokens"),
        (lambda d: d.update(query_max_tokens=510), "query_max_tokens"),
        (lambda d: d.update(query_max_tokens=0), "query_max_tokens"),
        (lambda d: d.update(pad_token_id=-1), "pad_token_id"),
        (lambda d: d.update(pad_token_id=True), "pad_token_id"),
        (lambda d: d.update(quantized="no"), "quantized"),
        (lambda d: d.update(kind="bi-encoder"), "kind"),
        (lambda d: d.update(input_names=["input_ids"]), "attention_mask"),
        (lambda d: d.update(input_names=["input_ids", "attention_mask", "x"]), "'x'"),
        (lambda d: d.update(input_names="input_ids"), "input_names"),
        (lambda d: d.update(onnx_file="../elsewhere.onnx"), "onnx_file"),
        (lambda d: d.update(colour="blue"), "colour"),
        (lambda d: d.update(manifest_version=2), "manifest_version"),
    ],
)
def test_malformed_manifest_is_invalid_input(tmp_path: Path, mutate: Any, expected: str) -> None:
    data = _as_json(BGE)
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(InvalidInput) as info:
        CrossEncoderManifest.load(tmp_path)
    assert expected in info.value.message and str(path) in info.value.message


def test_incomplete_or_broken_model_directories_fail_to_load(tmp_path: Path) -> None:
    BGE.save(tmp_path)
    with pytest.raises(NotFound, match=r"model\.onnx is missing"):
        OnnxCrossEncoder(tmp_path).load()
    (tmp_path / "model.onnx").write_bytes(b"not a graph")
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(InvalidInput, match="not a loadable ONNX model"):
        OnnxCrossEncoder(tmp_path).load()


def test_an_unloaded_model_says_so() -> None:
    model = OnnxCrossEncoder(Path("/nonexistent"))
    assert model.loaded is False
    with pytest.raises(RuntimeError, match="load"):
        _ = model.manifest
