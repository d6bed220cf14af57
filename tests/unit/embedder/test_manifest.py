"""The model manifest: round trip and the errors a broken model directory produces."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from groundwire_core.errors import InvalidInput, NotFound
from groundwire_embedder.models.manifest import MANIFEST_FILE, ModelManifest

MINILM = ModelManifest(
    profile="minilm",
    model_id="sentence-transformers/all-MiniLM-L6-v2",
    pooling="mean",
    normalize=True,
    dense_dims=384,
    max_tokens=256,
    outputs=("dense",),
)


def _write(model_dir: Path, data: Any) -> Path:
    model_dir.mkdir(parents=True, exist_ok=True)
    path = model_dir / MANIFEST_FILE
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _as_json(manifest: ModelManifest) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(manifest.__dict__, default=list))
    return data


def test_round_trip(tmp_path: Path) -> None:
    MINILM.save(tmp_path)
    loaded = ModelManifest.load(tmp_path)
    assert loaded == MINILM
    assert isinstance(loaded.outputs, tuple) and isinstance(loaded.input_names, tuple)


def test_round_trip_non_defaults(tmp_path: Path) -> None:
    manifest = replace(
        MINILM,
        pooling="cls",
        normalize=False,
        outputs=("dense", "sparse", "multi_vector"),
        quantized=True,
        onnx_file="model_int8.onnx",
        input_names=("input_ids", "attention_mask"),
        multi_vector_dims=1024,
        sparse_ignored_ids=(0, 1, 2, 3),
    )
    manifest.save(tmp_path)
    assert ModelManifest.load(tmp_path) == manifest


def test_save_writes_versioned_json_and_replaces(tmp_path: Path) -> None:
    MINILM.save(tmp_path)
    replace(MINILM, quantized=True).save(tmp_path)
    data = json.loads((tmp_path / MANIFEST_FILE).read_text())
    assert data["manifest_version"] == 1
    assert data["quantized"] is True
    assert data["outputs"] == ["dense"]
    # no temp files left behind
    assert [p.name for p in tmp_path.iterdir()] == [MANIFEST_FILE]


def test_defaults_apply_when_optional_fields_absent(tmp_path: Path) -> None:
    data = _as_json(MINILM)
    for key in ("onnx_file", "tokenizer_file", "quantized", "input_names"):
        del data[key]
    _write(tmp_path, data)
    loaded = ModelManifest.load(tmp_path)
    assert loaded == MINILM
    assert loaded.input_names == ("input_ids", "attention_mask", "token_type_ids")


def test_missing_directory_is_not_found_with_build_hint(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "minilm"
    with pytest.raises(NotFound) as info:
        ModelManifest.load(missing)
    assert str(missing) in info.value.message
    assert "groundwire models build minilm" in info.value.message


def test_directory_without_manifest_is_not_found(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"")
    with pytest.raises(NotFound) as info:
        ModelManifest.load(tmp_path)
    assert MANIFEST_FILE in info.value.message
    assert "groundwire models build minilm" in info.value.message


def test_unparseable_json_is_invalid_input(tmp_path: Path) -> None:
    (tmp_path / MANIFEST_FILE).write_text("{not json", encoding="utf-8")
    with pytest.raises(InvalidInput) as info:
        ModelManifest.load(tmp_path)
    assert str(tmp_path / MANIFEST_FILE) in info.value.message
    assert "groundwire models build" in info.value.message


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d.pop("dense_dims"), "dense_dims"),
        (lambda d: d.update(pooling="max"), "pooling"),
        (lambda d: d.update(dense_dims=0), "dense_dims"),
        (lambda d: d.update(dense_dims="384"), "dense_dims"),
        (lambda d: d.update(max_tokens=True), "max_tokens"),
        (lambda d: d.update(normalize="yes"), "normalize"),
        (lambda d: d.update(outputs=["dense", "colbert"]), "outputs"),
        (lambda d: d.update(outputs=[]), "outputs"),
        (lambda d: d.update(outputs="dense"), "outputs"),
        (lambda d: d.update(input_names=["attention_mask"]), "input_ids"),
        (lambda d: d.update(input_names=["input_ids", "pixel_values"]), "input_names"),
        (lambda d: d.update(onnx_file="../other/model.onnx"), "onnx_file"),
        (lambda d: d.update(profile=""), "profile"),
        (lambda d: d.update(colour="blue"), "colour"),
        (lambda d: d.update(manifest_version=99), "manifest_version"),
        (lambda d: d.update(multi_vector_dims=-1), "multi_vector_dims"),
        (lambda d: d.update(multi_vector_dims=64), "multi_vector_dims"),
        (lambda d: d.update(outputs=["dense", "multi_vector"]), "multi_vector_dims"),
        (lambda d: d.update(sparse_ignored_ids=[0, "1"]), "sparse_ignored_ids"),
        (lambda d: d.update(sparse_ignored_ids=[-1]), "sparse_ignored_ids"),
        (lambda d: d.update(sparse_ignored_ids=3), "sparse_ignored_ids"),
    ],
)
def test_malformed_manifest_is_invalid_input(tmp_path: Path, mutate: Any, expected: str) -> None:
    data = _as_json(MINILM)
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(InvalidInput) as info:
        ModelManifest.load(tmp_path)
    assert expected in info.value.message
    assert str(path) in info.value.message


def test_top_level_must_be_an_object(tmp_path: Path) -> None:
    _write(tmp_path, [_as_json(MINILM)])
    with pytest.raises(InvalidInput, match="JSON object"):
        ModelManifest.load(tmp_path)


def test_constructor_validates() -> None:
    with pytest.raises(InvalidInput, match="pooling"):
        replace(MINILM, pooling="max")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="outputs"):
        replace(MINILM, outputs=["dense"])  # type: ignore[arg-type]
