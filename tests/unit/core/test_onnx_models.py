"""What both model services open their folders, graphs and tokenizers with."""

from __future__ import annotations

from pathlib import Path

import onnxruntime as ort
import pytest

from groundwire_core.errors import InvalidInput, NotFound
from groundwire_core.onnx_models import (
    load_tokenizer,
    model_files,
    open_session,
    session_options,
)


def test_session_options_carry_the_settings() -> None:
    options = session_options(intra_op_threads=3, inter_op_threads=2, allow_spinning=False)
    assert options.intra_op_num_threads == 3
    assert options.inter_op_num_threads == 2
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert options.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL
    for entry in ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning"):
        assert options.get_session_config_entry(entry) == "0"


def test_defaults_spin_and_let_onnx_runtime_pick_the_thread_count() -> None:
    options = session_options(intra_op_threads=-4)
    assert options.intra_op_num_threads == 0
    assert options.inter_op_num_threads == 1
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "1"


def test_a_graph_that_does_not_load_names_the_rebuild_command(tmp_path: Path) -> None:
    graph = tmp_path / "model.onnx"
    graph.write_bytes(b"not a graph")
    with pytest.raises(InvalidInput) as info:
        open_session(graph, session_options(), profile="minilm")
    assert str(graph) in info.value.message
    assert "groundwire models build minilm" in info.value.message


def test_a_missing_file_names_itself_and_the_rebuild_command(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"x")
    with pytest.raises(NotFound) as info:
        model_files(tmp_path, "model.onnx", "tokenizer.json", profile="bge-m3")
    assert "tokenizer.json is missing" in info.value.message
    assert "groundwire models build bge-m3" in info.value.message
    (tmp_path / "tokenizer.json").write_text("{}")
    assert model_files(tmp_path, "model.onnx", "tokenizer.json", profile="bge-m3") == [
        tmp_path / "model.onnx",
        tmp_path / "tokenizer.json",
    ]


def test_a_tokenizer_that_does_not_load_is_invalid_input(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text("{not json")
    with pytest.raises(InvalidInput, match="is not a loadable tokenizer"):
        load_tokenizer(path)
