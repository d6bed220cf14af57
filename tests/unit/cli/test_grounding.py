"""`groundwire eval grounding`'s data and figures: SciFact-layout cases (NEI claims paired
through qrels, balanced slices) and the ROC AUC with ties."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from groundwire_cli.evaluation.beir import EvaluationError
from groundwire_cli.evaluation.grounding import (
    Case,
    MethodResult,
    build_report,
    format_table,
    load_cases,
    roc_auc,
)


def _folder(root: Path, claims: list[dict[str, object]], qrels: list[str]) -> Path:
    root.mkdir()
    docs = [{"_id": f"d{i}", "title": "", "text": f"Abstract {i}."} for i in range(1, 5)]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "queries.jsonl").write_text("".join(json.dumps(c) + "\n" for c in claims))
    (root / "qrels").mkdir()
    (root / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels))
    return root


def _claim(claim_id: str, evidence: dict[str, list[str]]) -> dict[str, object]:
    metadata = {d: [{"sentences": [0], "label": x} for x in xs] for d, xs in evidence.items()}
    return {"_id": claim_id, "text": f"Claim {claim_id}.", "metadata": metadata}


def test_cases_per_cited_abstract_nei_through_qrels(tmp_path: Path) -> None:
    claims = [
        _claim("1", {"d1": ["SUPPORT", "SUPPORT"], "d2": ["CONTRADICT"]}),
        _claim("2", {"d3": ["SUPPORT", "CONTRADICT"]}),  # mixed: no single label
        _claim("3", {}),
        _claim("4", {"d9": ["SUPPORT"]}),  # an abstract the corpus lacks
    ]
    folder = _folder(tmp_path / "f", claims, ["1\td1\t1", "3\td4\t1", "3\td2\t1"])
    cases = load_cases(folder)
    assert [(c.case_id, c.label) for c in cases] == [
        ("1/d1", "SUPPORT"),
        ("1/d2", "CONTRADICT"),
        ("3/d4", "NEI"),
        ("3/d2", "NEI"),
    ]
    assert cases[0].passage == "Abstract 1." and cases[0].claim == "Claim 1."


def test_a_limit_takes_each_label_in_turn(tmp_path: Path) -> None:
    claims = [_claim(str(i), {"d1": ["SUPPORT"]}) for i in range(5)]
    claims += [_claim("c", {"d2": ["CONTRADICT"]}), _claim("n", {})]
    folder = _folder(tmp_path / "f", claims, ["n\td3\t1"])
    assert [c.label for c in load_cases(folder, limit=4)] == [
        "SUPPORT", "SUPPORT", "CONTRADICT", "NEI"
    ]  # fmt: skip


def test_a_broken_folder_is_an_evaluation_error(tmp_path: Path) -> None:
    with pytest.raises(EvaluationError, match=r"corpus\.jsonl is missing"):
        load_cases(tmp_path)
    folder = _folder(tmp_path / "f", [], [])
    (folder / "queries.jsonl").write_text("{not json\n")
    with pytest.raises(EvaluationError, match=r"queries\.jsonl:1 is not JSON"):
        load_cases(folder)


def test_roc_auc_counts_ties_as_half() -> None:
    assert roc_auc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert roc_auc([0.1], [0.9]) == 0.0
    assert roc_auc([0.5, 0.5], [0.5]) == 0.5
    assert roc_auc([0.9, 0.4], [0.4, 0.1]) == pytest.approx((1 + 1 + 0.5 + 1) / 4)
    assert roc_auc([], [0.3]) is None


def test_report_and_table(tmp_path: Path) -> None:
    cases = [
        Case("1/a", "c", "p", "SUPPORT"),
        Case("2/a", "c", "p", "CONTRADICT"),
        Case("3/a", "c", "p", "NEI"),
        Case("4/a", "c", "p", "NEI"),
    ]
    result = MethodResult(
        "nli", ["supported", "contradicted", "unsupported", "supported"], [0.9, 0.1, 0.2, 0.95],
        {"support_threshold": 0.5}, 1.0,
    )  # fmt: skip
    skipped = MethodResult("llm", [], [], {}, 0.0, skipped="no LLM is configured")
    report = build_report(tmp_path, cases, [result, skipped])
    nli = report["methods"]["nli"]
    assert nli["per_label"]["NEI"] == {
        "cases": 2, "supported": 0.5, "contradicted": 0.0, "unsupported": 0.5, "unchecked": 0.0,
        "quoted": 0.0, "similar": 0.0, "unrelated": 0.0,
    }  # fmt: skip
    assert nli["roc_auc"] == {"support_vs_contradict": 1.0, "support_vs_nei": 0.5}
    table = format_table(report)
    assert re.search(r"^nli\s+NEI\s+2\s+50\.0 %\s+0\.0 %\s+50\.0 %\s+0\.0 %", table, re.M)
    assert "SUPPORT vs CONTRADICT 1.000, SUPPORT vs NEI 0.500" in table
    assert "llm: skipped (no LLM is configured)" in table
