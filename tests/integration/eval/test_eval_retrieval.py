"""`groundwire eval retrieval` end to end: a tiny BEIR folder of our own, the real
embedder and retriever as processes, the real MiniLM model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

DOCS = {
    "photo": (
        "Photosynthesis",
        "Plants convert sunlight into chemical energy in their chloroplasts, using "
        "chlorophyll to capture light and fix carbon dioxide into sugar.",
    ),
    "volcano": (
        "Volcanic eruptions",
        "Magma rises through the crust and erupts as lava, ash and gas when pressure in "
        "the magma chamber builds up.",
    ),
    "insulin": (
        "Insulin and blood sugar",
        "The pancreas releases insulin after a meal so that muscle and liver cells take "
        "up glucose from the blood.",
    ),
    "tides": (
        "Ocean tides",
        "The gravitational pull of the moon and the sun raises two bulges of sea water, "
        "giving most coasts two high tides a day.",
    ),
    "vaccine": (
        "Vaccination",
        "A vaccine trains the immune system with a harmless antigen so that memory B and T "
        "cells respond quickly to the real pathogen.",
    ),
    "bread": (
        "Baking bread",
        "Yeast ferments the sugars in dough and releases carbon dioxide, which makes the "
        "loaf rise before it is baked.",
    ),
    "chess": (
        "Chess openings",
        "The Sicilian Defence answers the king's pawn opening with the c-pawn and leads to "
        "sharp, asymmetrical positions.",
    ),
    "glacier": (
        "Glaciers",
        "Glaciers form where snow accumulates faster than it melts and compacts into ice "
        "that flows downhill under its own weight.",
    ),
    "bees": (
        "Honey bees",
        "Forager bees tell their hive mates where flowers are with a waggle dance whose "
        "angle points towards the food.",
    ),
    "rust": (
        "Corrosion of iron",
        "Iron rusts when it reacts with oxygen and water, forming hydrated iron oxide that "
        "flakes away from the metal.",
    ),
}
QUERIES = {
    # ids chosen so that the hash split gives dev {q4, q5} and tune {q1, q2, q3} at 0.2
    "q1": ("how do plants turn sunlight into chemical energy", ["photo"]),
    "q2": ("what makes a volcano erupt lava and ash", ["volcano"]),
    "q3": ("which hormone lowers blood glucose after eating", ["insulin"]),
    "q4": ("why does the sea have high tides twice a day", ["tides"]),
    "q5": ("how does yeast make bread dough rise", ["bread"]),
}
ANSWERABLE = "q1"
CONFIGS = (
    "bm25",
    "dense",
    "sparse",
    "hybrid-rrf",
    "hybrid-weighted",
    "product-default",
    "hybrid-rrf+rerank",
)


def _write_beir(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": doc_id, "title": title, "text": text, "metadata": {}}) + "\n"
            for doc_id, (title, text) in DOCS.items()
        )
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": text}) + "\n" for q, (text, _) in QUERIES.items())
    )
    (root / "qrels").mkdir()
    rows = [f"{q}\t{d}\t1" for q, (_, docs) in QUERIES.items() for d in docs]
    (root / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows))
    return root


def _groundwire(*args: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "groundwire_cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def evaluation(
    minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], Path]:
    work = tmp_path_factory.mktemp("eval")
    dataset = _write_beir(work / "tiny-beir")
    out = work / "reports" / "tiny.json"
    done = _groundwire(
        "eval",
        "retrieval",
        "--dataset",
        str(dataset),
        "--out",
        str(out),
        "--model-dir",
        str(minilm_dir),
        cwd=work,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done, json.loads(out.read_text()), out


def test_every_configuration_is_reported_with_metrics_in_range(
    evaluation: tuple[subprocess.CompletedProcess[str], dict[str, Any], Path],
) -> None:
    _, report, _ = evaluation
    configs = {c["name"]: c for c in report["configurations"]}
    assert tuple(configs) == CONFIGS
    ran = [c for c in configs.values() if c["status"] == "ok"]
    assert {c["name"] for c in ran} == {
        "bm25",
        "dense",
        "hybrid-rrf",
        "hybrid-weighted",
        "product-default",
    }
    for config in ran:
        for query_set in ("dev", "tune", "all"):
            metrics = config["metrics"][query_set]
            assert set(metrics) == {"nDCG@10", "Recall@100", "MRR@10"}
            assert all(0.0 <= v <= 1.0 for v in metrics.values()), (config["name"], metrics)
        assert config["latency_ms"]["p50"] > 0
        assert len(config["per_query"]["nDCG@10"]) == len(QUERIES)


def test_models_without_sparse_or_reranker_are_reported_as_skipped(
    evaluation: tuple[subprocess.CompletedProcess[str], dict[str, Any], Path],
) -> None:
    done, report, _ = evaluation
    configs = {c["name"]: c for c in report["configurations"]}
    assert configs["sparse"]["status"] == "skipped"
    assert "no learned sparse output" in configs["sparse"]["reason"]
    assert configs["hybrid-rrf+rerank"]["status"] == "skipped"
    assert "no reranker model" in configs["hybrid-rrf+rerank"]["reason"]
    assert "skipped: " in done.stdout, "the printed table names the skips"


def test_an_obviously_answerable_query_is_ranked_first_by_every_path(
    evaluation: tuple[subprocess.CompletedProcess[str], dict[str, Any], Path],
) -> None:
    _, report, _ = evaluation
    for config in report["configurations"]:
        if config["status"] != "ok":
            continue
        per_query = config["per_query"]
        mrr = dict(zip(per_query["query_ids"], per_query["MRR@10"], strict=True))
        assert mrr[ANSWERABLE] == 1.0, config["name"]
    dense = next(c for c in report["configurations"] if c["name"] == "dense")
    assert dense["metrics"]["all"]["nDCG@10"] >= 0.8, "MiniLM finds these by meaning"


def test_the_report_describes_the_run_and_a_chart_sits_beside_it(
    evaluation: tuple[subprocess.CompletedProcess[str], dict[str, Any], Path],
) -> None:
    done, report, out = evaluation
    assert report["dataset"]["name"] == "tiny-beir"
    assert report["dataset"]["documents"] == len(DOCS)
    assert report["dataset"]["queries"] == len(QUERIES)
    assert report["query_sets"]["dev"] == 2 and report["query_sets"]["tune"] == 3
    assert report["ingest"]["ingested"] == len(DOCS) and report["ingest"]["skipped"] == 0
    assert report["model"]["embedder"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert report["settings"]["path_limit"] >= 100 and report["settings"]["dense_floor"] == 0.0
    assert report["tuning"]["source"] == "best nDCG@10 on the tune part"
    assert len(report["tuning"]["grid"]) >= 3
    weighted = next(c for c in report["configurations"] if c["name"] == "hybrid-weighted")
    assert weighted["weights"] == report["tuning"]["weights"]
    assert report["timings_s"]["ingest"] > 0
    png = out.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "hybrid-rrf" in done.stdout and "nDCG@10" in done.stdout
    assert "ingest" in done.stderr, "progress is shown"


@pytest.fixture(scope="module")
def reranked(minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same run with a tiny random cross-encoder served by the reranker: proves the
    + rerank mechanics (never quality)."""
    from groundwire_reranker.export import build_profile
    from groundwire_reranker.export.tiny import tiny_checkpoint

    work = tmp_path_factory.mktemp("eval-rerank")
    sentences = [text for _, text in DOCS.values()] + [text for text, _ in QUERIES.values()]
    checkpoint = tiny_checkpoint("bert", work / "checkpoint", sentences)
    model = build_profile("cross-encoder", work / "reranker", source=checkpoint, log=lambda _: None)
    out = work / "reranked.json"
    done = _groundwire(
        "eval",
        "retrieval",
        "--dataset",
        str(_write_beir(work / "tiny-beir")),
        "--out",
        str(out),
        "--model-dir",
        str(minilm_dir),
        "--reranker-model-dir",
        str(model.out_dir),
        "--weights",
        "dense=0.5,bm25=0.5",
        cwd=work,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def test_with_a_reranker_model_the_rerank_row_runs_and_only_reorders(
    reranked: dict[str, Any],
) -> None:
    configs = {c["name"]: c for c in reranked["configurations"]}
    rerank = configs["hybrid-rrf+rerank"]
    assert rerank["status"] == "ok" and rerank["rerank"] is True
    assert reranked["model"]["reranker"] is not None
    for query_set in ("dev", "tune", "all"):
        assert all(0.0 <= v <= 1.0 for v in rerank["metrics"][query_set].values())
    # the reranker reorders hybrid-rrf's candidates (all of them, here): same recall
    assert (
        rerank["metrics"]["all"]["Recall@100"]
        == configs["hybrid-rrf"]["metrics"]["all"]["Recall@100"]
    )
    assert reranked["tuning"] == {"weights": {"dense": 0.5, "bm25": 0.5}, "source": "--weights"}
    assert configs["hybrid-weighted"]["weights"] == {"dense": 0.5, "bm25": 0.5}


def test_a_folder_that_is_not_beir_fails_with_a_clear_message(
    tmp_path: Path, minilm_dir: Path
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "readme.md").write_text("# not a benchmark\n")
    done = _groundwire(
        "eval",
        "retrieval",
        "--dataset",
        str(folder),
        "--model-dir",
        str(minilm_dir),
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2
    assert "is not a BEIR-format folder" in done.stderr
    assert "corpus.jsonl" in done.stderr and "qrels/train.tsv" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "evals").exists(), "nothing is written for a refused folder"


def test_a_terminated_evaluation_stops_the_services_it_started(
    minilm_dir: Path, tmp_path: Path
) -> None:
    import contextlib
    import signal
    import time

    import psutil

    dataset = _write_beir(tmp_path / "tiny-beir")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "groundwire_cli",
            "eval",
            "retrieval",
            "--dataset",
            str(dataset),
            "--model-dir",
            str(minilm_dir),
            "--out",
            str(tmp_path / "out.json"),
        ],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    children: list[psutil.Process] = []
    try:
        parent = psutil.Process(process.pid)
        deadline = time.monotonic() + 120
        while len(children) < 2:  # the embedder and the retriever are up
            assert process.poll() is None, "the evaluation ended before its services started"
            assert time.monotonic() < deadline, "the services did not start"
            children = parent.children(recursive=True)
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) != 0
        _, alive = psutil.wait_procs(children, timeout=30)
        assert not alive, f"left running: {[p.cmdline() for p in alive]}"
    finally:
        if process.poll() is None:
            process.kill()
        for child in children:  # whatever the outcome, leave nothing running
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
