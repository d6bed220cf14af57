"""`groundwire eval grounding`: how well each citation verifier tells a claim its passage
supports from one it contradicts or does not address.

Data in the SciFact layout (``../shared/datasets/scifact``): ``queries.jsonl`` holds
claims whose ``metadata`` maps a cited abstract's id to evidence sets labelled SUPPORT
or CONTRADICT; a claim with no evidence (NEI, "not enough information") is paired with
the abstracts ``qrels/<split>.tsv`` cites for it. ``corpus.jsonl`` holds the abstracts.
Each (claim, abstract) pair is one case, labelled SUPPORT, CONTRADICT or NEI; the
abstract's text is the passage, the claim the claim, as the citation check sees them.

Every verifier method available is run on every case through the real services, as the
product runs them (grounding_run): ``similarity`` (the embedder, always), ``nli`` (the
reranker's entailment model: ``--nli-model DIR``, or GROUNDWIRE_HOME/models/nli when
built) and ``llm`` (the fast LLM as judge, when the orchestrator's settings configure
one). Thresholds are the orchestrator's settings. Reported per method: the share of
each label's cases judged SUPPORTED, CONTRADICTED, UNSUPPORTED, UNCHECKED, and the ROC
AUC of the support score ranking SUPPORT above CONTRADICT and above NEI (0.5 is chance).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from groundwire_cli.child_settings import user_environment
from groundwire_cli.config import default_model_dir
from groundwire_cli.evaluation.beir import EvaluationError
from groundwire_cli.evaluation.report import dumps

Label = Literal["SUPPORT", "CONTRADICT", "NEI"]
LABELS: tuple[Label, ...] = ("SUPPORT", "CONTRADICT", "NEI")
STATUSES = (
    "supported", "contradicted", "unsupported", "unchecked", "quoted", "similar", "unrelated"
)
"""Statuses a verifier gives: the last three are the similarity score's (it reads no
meaning, so never says supported)."""


@dataclass(frozen=True)
class Case:
    case_id: str  # "<claim id>/<abstract id>"
    claim: str
    passage: str
    label: Label


@dataclass(frozen=True)
class MethodResult:
    """One method's judgements of every case (or why it did not run)."""

    method: str
    statuses: list[str]
    supports: list[float]
    settings: dict[str, Any]
    seconds: float
    skipped: str = ""


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise EvaluationError(f"{path} is missing: not a SciFact-layout folder")
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise EvaluationError(f"{path}:{n} is not JSON ({error.msg})") from None
    return rows


def _cited(folder: Path, split: str) -> dict[str, list[str]]:
    """claim id -> the abstracts qrels cites for it, in file order."""
    path = folder / "qrels" / f"{split}.tsv"
    if not path.is_file():
        raise EvaluationError(f"{path} is missing: NEI claims are paired through it")
    cited: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0] != "query-id":
            cited.setdefault(parts[0], []).append(parts[1])
    return cited


def load_cases(folder: Path, *, split: str = "train", limit: int | None = None) -> list[Case]:
    """The (claim, abstract) cases of a SciFact-layout folder, in file order; with
    ``limit``, that many taken in turn from each label (so a slice stays balanced).

    Raises EvaluationError for a missing file, a malformed line or no case at all.
    """
    docs = {str(d["_id"]): str(d.get("text", "")) for d in _jsonl(folder / "corpus.jsonl")}
    cited = _cited(folder, split)
    by_label: dict[Label, list[Case]] = {label: [] for label in LABELS}
    for claim in _jsonl(folder / "queries.jsonl"):
        claim_id, text = str(claim["_id"]), str(claim.get("text", ""))
        evidence: Mapping[str, Any] = claim.get("metadata") or {}
        pairs: list[tuple[str, Label]] = []
        for doc_id, sets in evidence.items():
            labels = {s.get("label") for s in sets}
            if len(labels) == 1 and (label := labels.pop()) in ("SUPPORT", "CONTRADICT"):
                pairs.append((str(doc_id), label))
        if not evidence:
            pairs = [(doc_id, "NEI") for doc_id in cited.get(claim_id, [])]
        for doc_id, label in pairs:
            if doc_id in docs and text.strip():
                by_label[label].append(Case(f"{claim_id}/{doc_id}", text, docs[doc_id], label))
    cases = [c for label in LABELS for c in by_label[label]]
    if limit is not None:
        turns = max(len(v) for v in by_label.values())
        rotation = [by_label[label][i] for i in range(turns) for label in LABELS
                    if i < len(by_label[label])]  # fmt: skip
        picked = {c.case_id for c in rotation[:limit]}
        cases = [c for c in cases if c.case_id in picked]
    if not cases:
        raise EvaluationError(f"{folder} holds no (claim, abstract) case")
    return cases


def roc_auc(positive: Sequence[float], negative: Sequence[float]) -> float | None:
    """P(a positive scores above a negative), ties counting half (Mann-Whitney U);
    None when either side is empty."""
    if not positive or not negative:
        return None
    ranked = sorted([(s, 1) for s in positive] + [(s, 0) for s in negative])
    rank_sum, i = 0.0, 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        mid = (i + j + 1) / 2  # average 1-based rank of the tied run
        rank_sum += mid * sum(flag for _, flag in ranked[i:j])
        i = j
    n_pos, n_neg = len(positive), len(negative)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def summarise(cases: Sequence[Case], result: MethodResult) -> dict[str, Any]:
    """Per label: cases and the share of each status; the AUCs of the support score."""
    per_label: dict[str, Any] = {}
    support_of: dict[Label, list[float]] = {label: [] for label in LABELS}
    for label in LABELS:
        rows = [i for i, c in enumerate(cases) if c.label == label]
        support_of[label] = [result.supports[i] for i in rows]
        per_label[label] = {
            "cases": len(rows),
            **{
                s: round(sum(result.statuses[i] == s for i in rows) / len(rows), 4) if rows else 0.0
                for s in STATUSES
            },
        }
    auc = {
        "support_vs_contradict": roc_auc(support_of["SUPPORT"], support_of["CONTRADICT"]),
        "support_vs_nei": roc_auc(support_of["SUPPORT"], support_of["NEI"]),
    }
    return {
        "per_label": per_label,
        "roc_auc": {k: None if v is None else round(v, 4) for k, v in auc.items()},
        "settings": result.settings,
        "seconds": round(result.seconds, 2),
        "per_case": {"status": result.statuses, "support": [round(s, 4) for s in result.supports]},
    }


def build_report(
    folder: Path, cases: Sequence[Case], results: Sequence[MethodResult]
) -> dict[str, Any]:
    methods: dict[str, Any] = {}
    for r in results:
        methods[r.method] = {"skipped": r.skipped} if r.skipped else summarise(cases, r)
    return {
        "dataset": str(folder),
        "cases": {label: sum(c.label == label for c in cases) for label in LABELS},
        "case_ids": [c.case_id for c in cases],
        "labels": [c.label for c in cases],
        "methods": methods,
    }


def _pct(value: float) -> str:
    return f"{100 * value:.1f} %"


def format_table(report: Mapping[str, Any], *, markdown: bool = False) -> str:
    """Per method and label: the shares judged SUPPORTED / CONTRADICTED / UNSUPPORTED /
    UNCHECKED, then the AUCs; skipped methods with their reason."""
    head = ["method", "label", "cases", *STATUSES]
    rows: list[list[str]] = []
    notes: list[str] = []
    for method, m in report["methods"].items():
        if "skipped" in m:
            notes.append(f"{method}: skipped ({m['skipped']})")
            continue
        for label in LABELS:
            cell = m["per_label"][label]
            rows.append([method, label, str(cell["cases"]), *(_pct(cell[s]) for s in STATUSES)])
        auc = m["roc_auc"]
        notes.append(
            f"{method}: ROC AUC of the support score, SUPPORT vs CONTRADICT "
            f"{_auc(auc['support_vs_contradict'])}, SUPPORT vs NEI {_auc(auc['support_vs_nei'])}"
            f" ({m['seconds']:.0f} s)"
        )
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join([*lines, "", *(f"- {n}" for n in notes)])
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=False)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*head), *(fmt.format(*r) for r in rows), "", *notes])


def _auc(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_parser(evals_sub: Any) -> None:
    """Registers `groundwire eval grounding` under `groundwire eval`."""
    parser = evals_sub.add_parser(
        "grounding",
        help="citation verifiers on SciFact-layout claims: shares per label and ROC AUC",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dataset", type=Path, required=True, help="a SciFact-layout folder")
    parser.add_argument("--split", default="train", help="qrels/SPLIT.tsv (default: %(default)s)")
    parser.add_argument("--limit", type=_positive, default=None, help="at most N cases, balanced")
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=default_model_dir(user_environment()),
        help="embedder model folder (default: %(default)s)",
    )
    parser.add_argument(
        "--nli-model",
        type=Path,
        default=None,
        help="NLI model folder (`groundwire models build nli`); default: "
        "GROUNDWIRE_HOME/models/nli when built",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="JSON report (default: evals/grounding-NAME.json)"
    )
    parser.add_argument("--markdown", action="store_true", help="also write the table as .md")
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    """`groundwire eval grounding`: the exit code (2 for a bad dataset or model folder)."""
    from groundwire_cli.evaluation.grounding_run import judge_all

    try:
        cases = load_cases(args.dataset, split=args.split, limit=args.limit)
    except EvaluationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    counts = ", ".join(f"{sum(c.label == label for c in cases)} {label}" for label in LABELS)
    print(f"{args.dataset}: {len(cases)} cases ({counts})", file=sys.stderr, flush=True)
    results = judge_all(cases, model_dir=args.model_dir, nli_model=args.nli_model)
    report = build_report(args.dataset, cases, results)
    name = args.dataset.resolve().name or "dataset"
    out: Path = args.out or Path("evals") / f"grounding-{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(report) + "\n", encoding="utf-8")
    print(format_table(report))
    written = [str(out)]
    if args.markdown:
        out.with_suffix(".md").write_text(format_table(report, markdown=True) + "\n")
        written.append(str(out.with_suffix(".md")))
    print(f"wrote {' and '.join(written)}")
    return 0
