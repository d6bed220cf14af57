"""A bounded load run through the real cluster, as CI's smoke test of the load tooling.

``benchmarks/load_report.py`` runs as its own process (it starts the five services, the
fake LLM and locust as processes: locust's gevent never enters pytest's process): 4 users
for 10 s of searches and streamed chats against the gateway, with the fake LLM's
analysis JSON and cited answers. No 5xx and no failed request is allowed, and every
stage of the chain must have reported its time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

CHAIN = ("analysis", "retrieval", "rerank", "screening", "answer", "citations")


def test_a_bounded_load_run_has_no_failures_and_records_every_stage(
    minilm_dir: Path, repo_root: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    command = [
        sys.executable,
        str(repo_root / "benchmarks" / "load_report.py"),
        "--users",
        "4",
        "--duration-s",
        "10",
        "--search-weight",
        "2",
        "--chat-weight",
        "1",
        "--reranker",
        "none",
        "--model-dir",
        str(minilm_dir),
        "--max-documents",
        "6",
        "--ttft-s",
        "0.05",
        "--token-delay-s",
        "0.005",
        "--answer-words",
        "40",
        "--stop-timeout-s",
        "30",
        "--out",
        str(out),
        "--name",
        "smoke",
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

    report = json.loads((out / "smoke.json").read_text(encoding="utf-8"))
    [step] = report["steps"]
    assert step["users"] == 4 and step["crashed_services"] == []
    assert step["http_5xx"] == 0 and step["failures"] == 0, step["failure_kinds"]
    assert step["error_events"] == {} and step["cut_at_stop"] == 0
    assert set(step["status_codes"]) <= {"search 200", "chat 200"}
    search, chat = step["end_to_end"]["search"], step["end_to_end"]["chat"]
    assert search["count"] > 0 and chat["count"] > 0
    assert step["requests"] == search["count"] + chat["count"] > 0
    assert 0 < search["p50_ms"] <= search["p95_ms"]
    # a chat's time is its whole stream: it outlasts the first delta it carried
    assert chat["p50_ms"] >= step["client"]["chat first delta"]["p50_ms"] > 0

    for name in CHAIN:
        stage = step["stages"][name]
        assert stage["count"] > 0, name
        assert 0 <= stage["p50_ms"] <= stage["p95_ms"], name
    # every request reported its searching stages, only chats the answering ones
    assert step["stages"]["retrieval"]["count"] == step["requests"]
    assert step["stages"]["answer"]["count"] == chat["count"]
    # the fake LLM served the analysis (valid JSON) and wrote the answers
    assert step["stages"]["analysis"]["fallbacks"] == 0
    assert step["stages"]["answer"]["fallbacks"] == 0
    assert step["answer_modes"] == {"generated": chat["count"]}
    # no reranker in this run: every rerank fell back, and the reason was kept
    assert step["stages"]["rerank"]["fallbacks"] == step["stages"]["rerank"]["count"]
    assert any(k.startswith("rerank: ") for k in step["fallback_reasons"])

    assert report["machine"]["cores"] >= 1 and report["machine"]["cpu_model"]
    assert report["config"]["corpus"]["documents"] == 6
    assert report["config"]["corpus"]["chunks"] > 0
    assert report["config"]["environment_overrides"]["GROUNDWIRE_EMBEDDER_MODEL_LANES"] == "1"
    assert (out / "smoke.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "per stage p50 / p95 ms" in done.stdout and "answer" in done.stdout


def test_a_setting_that_is_not_one_of_ours_is_refused_before_anything_starts(
    repo_root: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, str(repo_root / "benchmarks" / "load_report.py"), "--set", "LANES=1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=repo_root,
    )
    assert done.returncode == 2
    assert "expected GROUNDWIRE_<SERVICE>_<NAME>=VALUE" in done.stderr
