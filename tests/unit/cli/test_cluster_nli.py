"""`groundwire up` serves a built entailment model: GROUNDWIRE_HOME/models/nli goes to the
reranker as its NLI model folder, unless the user names another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from groundwire_cli.cluster import LocalCluster

VARIABLE = "GROUNDWIRE_RERANKER_NLI_MODEL_DIR"


def _cluster(tmp_path: Path) -> LocalCluster:
    return LocalCluster.with_free_ports(tmp_path / "run", tmp_path / "minilm", tmp_path / "q")


def test_a_built_nli_model_is_given_to_the_reranker_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("GROUNDWIRE_HOME", str(home))
    monkeypatch.delenv(VARIABLE, raising=False)
    cluster = _cluster(tmp_path)
    assert VARIABLE not in cluster.env_for("reranker"), "no model built: nothing assigned"

    model = home / "models" / "nli"
    model.mkdir(parents=True)
    (model / "groundwire-model.json").write_text(json.dumps({"profile": "nli"}))
    assert cluster.env_for("reranker")[VARIABLE] == str(model.resolve())
    assert not any(k.endswith("NLI_MODEL_DIR") for k in cluster.env_for("orchestrator"))
    assert cluster.overridden() == []


def test_the_users_own_nli_model_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / "models" / "nli").mkdir(parents=True)
    (home / "models" / "nli" / "groundwire-model.json").write_text("{}")
    monkeypatch.setenv("GROUNDWIRE_HOME", str(home))
    monkeypatch.setenv(VARIABLE, str(tmp_path / "mine"))
    cluster = _cluster(tmp_path)
    assert cluster.env_for("reranker")[VARIABLE] == str(tmp_path / "mine")
    assert cluster.overridden() == []
