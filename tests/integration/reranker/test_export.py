"""The cross-encoder export: what it writes, what it checks, what it refuses."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from groundwire_core.errors import AlreadyExists, InvalidInput, NotFound
from groundwire_reranker.export import PROFILES, BuildReport, build_profile
from groundwire_reranker.export.tiny import Architecture
from groundwire_reranker.models import MANIFEST_FILE, CrossEncoderManifest


def test_profiles_are_the_two_cross_encoder_families_and_nli() -> None:
    assert set(PROFILES) == {"bge-reranker-v2-m3", "cross-encoder", "nli"}


@pytest.mark.parametrize(
    ("arch", "inputs"),
    [
        ("xlm-roberta", ("input_ids", "attention_mask")),
        ("bert", ("input_ids", "attention_mask", "token_type_ids")),
    ],
)
def test_export_writes_a_checked_model_with_dynamic_axes(
    arch: Architecture,
    inputs: tuple[str, ...],
    exported: Callable[[Architecture, bool], BuildReport],
    build_logs: dict[tuple[str, bool], list[str]],
) -> None:
    report = exported(arch, False)
    assert report.max_abs_diff_vs_torch <= 1e-4
    assert any("fp32 ONNX vs PyTorch logits" in line for line in build_logs[(arch, False)])
    assert sorted(p.name for p in report.out_dir.iterdir()) == [
        MANIFEST_FILE,
        "model.onnx",
        "source-config.json",
        "tokenizer.json",
    ]
    manifest = CrossEncoderManifest.load(report.out_dir)
    assert manifest.input_names == inputs, "only the inputs the model's tokenizer produces"
    assert (manifest.max_tokens, manifest.query_max_tokens) == (128, 96)
    assert manifest.pad_token_id == (1 if arch == "xlm-roberta" else 0)
    assert manifest.quantized is False and manifest.model_id == arch  # the source folder

    graph = onnx.load(str(report.out_dir / "model.onnx")).graph
    for tensor in graph.input:
        dims = [d.dim_param for d in tensor.type.tensor_type.shape.dim]
        assert dims == ["batch", "sequence"], tensor.name
    session = ort.InferenceSession(
        str(report.out_dir / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    for shape in ((3, 7), (1, 50)):
        feed = {name: np.ones(shape, dtype=np.int64) for name in inputs}
        (logits,) = session.run(["logits"], feed)
        assert logits.shape == (shape[0], 1)


def test_a_classifier_with_two_labels_is_refused_and_the_old_model_kept(
    tmp_path: Path,
    checkpoints: dict[Architecture, Path],
    exported: Callable[[Architecture, bool], BuildReport],
) -> None:
    two_labels = tmp_path / "two-labels"
    shutil.copytree(checkpoints["bert"], two_labels)
    config = json.loads((two_labels / "config.json").read_text())
    config["id2label"] = {"0": "no", "1": "yes"}
    config["label2id"] = {"no": 0, "yes": 1}
    (two_labels / "config.json").write_text(json.dumps(config))

    out = tmp_path / "model"
    shutil.copytree(exported("bert", False).out_dir, out)
    before = (out / MANIFEST_FILE).read_bytes()
    with pytest.raises(InvalidInput, match="num_labels=2"):
        build_profile("cross-encoder", out, source=two_labels, log=lambda _: None)
    assert (out / MANIFEST_FILE).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "two-labels"], "no leftovers"


def test_rebuild_replaces_a_model_but_never_an_unrelated_folder(
    tmp_path: Path, checkpoints: dict[Architecture, Path]
) -> None:
    out = tmp_path / "model"
    first = build_profile(
        "cross-encoder", out, source=checkpoints["bert"], log=lambda _: None, model_id="one"
    )
    second = build_profile(
        "cross-encoder", out, source=checkpoints["bert"], log=lambda _: None, model_id="two"
    )
    assert first.out_dir == second.out_dir == out
    assert CrossEncoderManifest.load(out).model_id == "two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]

    unrelated = tmp_path / "photos"
    unrelated.mkdir()
    (unrelated / "cat.jpg").write_bytes(b"meow")
    with pytest.raises(AlreadyExists, match="not a Groundwire model directory"):
        build_profile("cross-encoder", unrelated, source=checkpoints["bert"], log=lambda _: None)
    assert [p.name for p in unrelated.iterdir()] == ["cat.jpg"]


def test_bad_sources_and_profiles_are_refused(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="does not exist"):
        build_profile("cross-encoder", tmp_path / "out", source=tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFound, match=r"config\.json.*weights"):
        build_profile("cross-encoder", tmp_path / "out", source=tmp_path / "empty")
    with pytest.raises(InvalidInput, match="known profiles: bge-reranker-v2-m3, cross-encoder"):
        build_profile("colbert", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_models_build_command_builds_a_cross_encoder(
    tmp_path: Path, checkpoints: dict[Architecture, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from groundwire_cli.__main__ import main

    out = tmp_path / "cli-model"
    argv = ["models", "build", "bge-reranker-v2-m3", "--source", str(checkpoints["xlm-roberta"])]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--out", str(out), "--int8"])
    assert exit_info.value.code == 0
    printed = capsys.readouterr().out
    assert "int8 vs fp32 scores" in printed and f"built bge-reranker-v2-m3 into {out}" in printed
    assert CrossEncoderManifest.load(out).quantized is True


def test_serving_never_imports_torch(exported: Callable[[Architecture, bool], BuildReport]) -> None:
    """The serving image has no torch: loading and scoring must not need it."""
    model_dir = exported("bert", False).out_dir
    script = (
        "import sys\n"
        "from groundwire_reranker.server import RerankerService\n"
        "from groundwire_reranker.models import OnnxCrossEncoder\n"
        f"m = OnnxCrossEncoder({str(model_dir)!r}, intra_op_threads=1); m.load()\n"
        "scores = m.score([('a query', 'a passage'), ('a query', 'another one')])\n"
        "assert all(0 < s < 1 for s in scores), scores\n"
        "heavy = [n for n in ('torch', 'transformers', 'FlagEmbedding') if n in sys.modules]\n"
        "print('heavy:', heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "heavy: []"
