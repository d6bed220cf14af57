"""The session options both model services open their graphs with."""

from __future__ import annotations

from pathlib import Path

import onnxruntime as ort
import pytest

from groundwire_core.errors import InvalidInput
from groundwire_core.onnx_models import open_session, session_options


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
