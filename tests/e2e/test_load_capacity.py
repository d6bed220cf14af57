"""`groundwire load report` across processes: two gateways and two orchestrators beside
one embedder, reranker and retriever, searches and chats swept apart (``--per-type``).

One short run (2 users, 4 s per request type) through the CLI. It must answer without a
failure, and every gateway and every orchestrator process must have spent CPU in each
step: the load really went through all of them, not through the first of each. The
capacity figures (requests/s per core, per stack CPU-second, the saturation point) must
be in the JSON and the chart must be written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPLICAS = ("gateway", "gateway-1", "orchestrator", "orchestrator-1")


def test_capacity_across_processes_spreads_the_load_and_reports_per_core_figures(
    minilm_dir: Path, repo_root: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    command = [
        sys.executable,
        "-m",
        "groundwire_cli",
        "load",
        "report",
        "--gateways",
        "2",
        "--orchestrators",
        "2",
        "--per-type",
        "--users",
        "2",
        "--duration-s",
        "4",
        "--cooldown-s",
        "0.5",
        "--reranker",
        "none",
        "--model-dir",
        str(minilm_dir),
        "--max-documents",
        "4",
        "--ttft-s",
        "0.02",
        "--token-delay-s",
        "0.002",
        "--answer-words",
        "30",
        "--out",
        str(out),
        "--name",
        "capacity",
        "--run-dir",
        str(tmp_path / "run"),
        "--set",
        "GROUNDWIRE_EMBEDDER_MODEL_LANES=1",
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=280, check=False, cwd=repo_root
    )
    output = f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
    assert done.returncode == 0, output

    report = json.loads((out / "capacity.json").read_text(encoding="utf-8"))
    assert report["topology"]["processes"] == {
        "gateway": 2,
        "orchestrator": 2,
        "embedder": 1,
        "reranker": 1,
        "retriever": 1,
    }
    assert report["topology"]["orchestrator_target"].startswith("ipv4:127.0.0.1:")
    cores = report["machine"]["cores"]
    assert cores >= 1 and report["machine"]["cpu_model"] and report["machine"]["memory_gib"] > 0

    search, chat = report["steps"]
    assert (search["kind"], chat["kind"]) == ("search", "chat")
    assert set(search["end_to_end"]) == {"search"} and set(chat["end_to_end"]) == {"chat"}
    for step in (search, chat):
        assert step["failures"] == 0 and step["http_5xx"] == 0, step["failure_kinds"]
        assert step["crashed_services"] == []
        assert step["requests"] > 0
        assert step["requests_per_s_per_core"] == pytest.approx(
            step["requests_per_s"] / cores, abs=1e-3
        )
        spent = step["cpu"]["service_cpu_s"]
        for name in REPLICAS:
            assert spent[name] > 0, (name, spent)
        assert step["cpu"]["stack_cpu_s"] >= sum(spent[n] for n in REPLICAS)
        assert step["cpu"]["requests_per_cpu_s"] > 0
        assert step["stages"]["retrieval"]["count"] == step["requests"]
    assert "answer" in chat["stages"] and "answer" not in search["stages"]

    for kind, step in (("search", search), ("chat", chat)):
        point = report["capacity"][kind]["fastest"]
        assert point["users"] == 2 and point["requests_per_s"] == step["requests_per_s"]
        assert point["requests_per_s_per_core"] == step["requests_per_s_per_core"]
        # one step is its own lightest: nothing counts as shed, so it is the quoted point
        assert step["shed_under_load"] == {}
        assert report["capacity"][kind]["full_quality"] == point
    assert (out / "capacity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "saturation search (full quality):" in done.stdout
    assert "saturation chat (full quality):" in done.stdout
