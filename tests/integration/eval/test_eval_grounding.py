"""`groundwire eval grounding` end to end: a tiny SciFact-layout folder of our own, the
real embedder (real MiniLM) for the similarity method and the real reranker serving a
tiny random NLI model for the nli method, both as processes. The random model proves
the mechanics (every case judged and counted); the similarity figures are real."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from groundwire_cli.evaluation.grounding import STATUSES

DOCS = {
    "d1": "Plants convert sunlight into chemical energy in their chloroplasts. Chlorophyll "
    "captures light and fixes carbon dioxide into sugar.",
    "d2": "Magma rises through the crust and erupts as lava, ash and gas. Eruptions follow "
    "a build-up of pressure in the magma chamber.",
    "d3": "The pancreas releases insulin after a meal. Muscle and liver cells then take up "
    "glucose from the blood.",
}
# claim id -> (claim, {doc: label}); no evidence = NEI, paired through qrels
CLAIMS: dict[str, tuple[str, dict[str, str]]] = {
    "1": ("Chlorophyll captures light and fixes carbon dioxide into sugar.", {"d1": "SUPPORT"}),
    "2": ("The pancreas releases insulin after a meal.", {"d3": "SUPPORT"}),
    "3": ("Magma rises through the crust and erupts as lava.", {"d2": "SUPPORT"}),
    "4": ("Plants never convert sunlight into chemical energy.", {"d1": "CONTRADICT"}),
    "5": ("The pancreas stops releasing insulin after a meal.", {"d3": "CONTRADICT"}),
    "6": ("Medieval guilds regulated the wool trade in Flanders.", {}),
    "7": ("Jazz drummers favour brushes in slow ballads.", {}),
}
QRELS = {"6": "d2", "7": "d1"}


def _write_scifact(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": d, "title": d, "text": t, "metadata": {}}) + "\n"
            for d, t in DOCS.items()
        )
    )
    rows = []
    for claim_id, (text, evidence) in CLAIMS.items():
        metadata = {d: [{"sentences": [0], "label": label}] for d, label in evidence.items()}
        rows.append(json.dumps({"_id": claim_id, "text": text, "metadata": metadata}) + "\n")
    (root / "queries.jsonl").write_text("".join(rows))
    (root / "qrels").mkdir()
    pairs = [f"{c}\t{d}\t1" for c, (_, ev) in CLAIMS.items() for d in ev]
    pairs += [f"{c}\t{d}\t1" for c, d in QRELS.items()]
    (root / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(pairs))
    return root


def _tiny_nli(root: Path, repo_root: Path) -> Path:
    from groundwire_reranker.export import build_profile
    from groundwire_reranker.export.tiny import tiny_checkpoint

    text = "\n".join(p.read_text() for p in sorted((repo_root / "samples" / "corpus").glob("*.md")))
    sentences = [s for s in re.split(r"(?<=[.!?])\s+|\n+", text) if len(s) > 20]
    src = tiny_checkpoint(
        "bert", root / "nli-src", sentences, id2label=("entailment", "neutral", "contradiction")
    )
    return build_profile("nli", root / "nli", source=src, log=lambda _: None).out_dir


@pytest.fixture(scope="module")
def evaluation(
    minilm_dir: Path, repo_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], Path]:
    root = tmp_path_factory.mktemp("grounding")
    dataset = _write_scifact(root / "claims")
    out = root / "report.json"
    command = [
        sys.executable, "-m", "groundwire_cli", "eval", "grounding",
        "--dataset", str(dataset), "--model-dir", str(minilm_dir),
        "--nli-model", str(_tiny_nli(root, repo_root)), "--out", str(out), "--markdown",
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=root, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done, json.loads(out.read_text()), out


def _auc(pos: list[float], neg: list[float]) -> float:
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def test_every_case_is_judged_by_each_method_and_counted_per_label(
    evaluation: tuple[subprocess.CompletedProcess[str], dict[str, Any], Path],
) -> None:
    done, report, _ = evaluation
    assert report["cases"] == {"SUPPORT": 3, "CONTRADICT": 2, "NEI": 2}
    assert report["case_ids"][-2:] == ["6/d2", "7/d1"], "NEI claims paired through qrels"
    assert set(report["methods"]) == {"similarity", "nli", "llm"}
    assert "no LLM is configured" in report["methods"]["llm"]["skipped"]
    for method in ("similarity", "nli"):
        m = report["methods"][method]
        assert len(m["per_case"]["status"]) == 7
        assert "unchecked" not in m["per_case"]["status"], f"{method}: a case went unjudged"
        for label, count in report["cases"].items():
            cell = m["per_label"][label]
            shares = [cell[s] for s in STATUSES]
            assert cell["cases"] == count and sum(shares) == pytest.approx(1.0)
        support = m["per_case"]["support"]
        by = {lab: [s for s, x in zip(support, report["labels"], strict=True) if x == lab]
              for lab in report["cases"]}  # fmt: skip
        assert m["roc_auc"]["support_vs_contradict"] == pytest.approx(
            _auc(by["SUPPORT"], by["CONTRADICT"]), abs=1e-4
        )
        assert m["roc_auc"]["support_vs_nei"] == pytest.approx(
            _auc(by["SUPPORT"], by["NEI"]), abs=1e-4
        )
        assert re.search(rf"^{method}\s+SUPPORT\s+3\s", done.stdout, re.M), done.stdout
    assert report["methods"]["nli"]["settings"]["max_tokens"] == 128


def test_similarity_ranks_quoted_claims_above_unrelated_ones(
    evaluation: tuple[subprocess.CompletedProcess[str], dict[str, Any], Path],
) -> None:
    done, report, out = evaluation
    similarity = report["methods"]["similarity"]
    assert similarity["roc_auc"]["support_vs_nei"] == 1.0
    # the score reads no meaning: "similar" (a relevance score), never "supported"
    assert similarity["per_label"]["SUPPORT"]["similar"] == 1.0
    assert similarity["per_label"]["NEI"]["similar"] == 0.0
    assert similarity["per_label"]["SUPPORT"]["supported"] == 0.0
    assert "SUPPORT vs NEI 1.000" in done.stdout
    markdown = out.with_suffix(".md").read_text()
    assert markdown.startswith("| method | label | cases |")
    assert "| similarity | NEI | 2 |" in markdown
