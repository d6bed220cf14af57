"""The results of a golden run: per case, the totals, the terminal table and the
JSON and markdown reports."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from groundwire_cli.chat import ChatOutcome
from groundwire_cli.demo import stage_line
from groundwire_cli.golden.checks import CheckResult, Status, case_status, cited_ids, is_extractive
from groundwire_cli.golden.model import GoldenCase, GoldenSet


@dataclass(frozen=True)
class CaseResult:
    case: GoldenCase
    checks: list[CheckResult]
    outcome: ChatOutcome
    ms: float
    judge: CheckResult | None = None
    """The LLM judge's verdict on the case's ``judge`` criterion: never counted."""

    @property
    def status(self) -> Status:
        return case_status(self.checks)

    def to_json(self) -> dict[str, Any]:
        o = self.outcome
        return {
            "id": self.case.id,
            "question": self.case.question,
            "note": self.case.note,
            "status": self.status,
            "mode": o.mode,
            "extractive": is_extractive(o),
            "answer": o.answer,
            "cited_sources": cited_ids(o),
            "citations": [
                {"number": c.number, "status": c.status, "support": c.support,
                 "answer_span": c.answer_span, "source_span": c.source_span}
                for c in o.citations
            ],
            "flagged_sources": sorted({s.source_id for s in o.sources if s.injection_flagged}),
            "tools": o.tools_used(),
            "stages": [
                {"name": s.name, "ms": round(s.ms, 1), "fallback": s.fallback,
                 "reason": s.reason, "details": dict(s.details)}
                for s in o.stages
            ],
            "error": None if o.error is None else {"code": o.error.code,
                                                    "message": o.error.message},
            "ms": round(self.ms, 1),
            "expected": self.case.expected(),
            "checks": [
                {"check": c.check, "status": c.status, "reason": c.reason} for c in self.checks
            ],
            "judge": None if self.judge is None else {
                "criterion": self.case.judge, "status": self.judge.status,
                "reason": self.judge.reason, "counted": False,
            },
        }


@dataclass
class AnswersReport:
    golden: GoldenSet
    golden_path: str
    target: str
    collection: str
    results: list[CaseResult] = field(default_factory=list)
    started: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    seconds: float = 0.0

    def totals(self) -> dict[str, int]:
        counts = {"cases": len(self.results), "pass": 0, "fail": 0, "n/a": 0}
        for r in self.results:
            counts[r.status] += 1
        return counts

    def modes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.results:
            counts[r.outcome.mode or "none"] = counts.get(r.outcome.mode or "none", 0) + 1
        return counts

    @property
    def passed(self) -> bool:
        return self.totals()["fail"] == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "golden": self.golden_path,
            "name": self.golden.name,
            "target": self.target,
            "collection": self.collection,
            "started": self.started,
            "seconds": round(self.seconds, 1),
            "modes": self.modes(),
            "totals": self.totals(),
            "passed": self.passed,
            "cases": [r.to_json() for r in self.results],
        }


_MARK = {"pass": "pass", "fail": "FAIL", "n/a": "n/a"}


def _check_summary(checks: Sequence[CheckResult]) -> str:
    return " ".join(f"{c.check}:{_MARK[c.status]}" for c in checks)


TABLE_HEADER = f"{'':<5} {'case':<28} {'mode':<11} {'time':>6}  checks"


def format_row(result: CaseResult) -> str:
    """One case in the terminal table, with a line per failed check saying why."""
    mode = result.outcome.mode or "-"
    row = (
        f"{_MARK[result.status]:<5} {result.case.id:<28} {mode:<11} "
        f"{result.ms / 1e3:5.1f}s  {_check_summary(result.checks)}"
    )
    if result.judge is not None:
        row += f"  (judge:{_MARK[result.judge.status]}, not counted)"
    reasons = [f"      {c.check}: {c.reason}" for c in result.checks if c.status == "fail"]
    return "\n".join([row, *reasons])


def format_table(report: AnswersReport) -> str:
    """The terminal table: a header, one row per case (failures with their reasons),
    the totals."""
    lines = [TABLE_HEADER]
    lines += [format_row(r) for r in report.results]
    lines.append(format_totals(report))
    return "\n".join(lines)


def format_totals(report: AnswersReport) -> str:
    t = report.totals()
    modes = ", ".join(f"{k} {v}" for k, v in sorted(report.modes().items()))
    return (
        f"{t['cases']} cases: {t['pass']} passed, {t['fail']} failed, {t['n/a']} not applicable "
        f"(answer modes: {modes}) in {report.seconds:.1f}s"
    )


def _text(text: str) -> str:
    """Text that markdown shows as written (an answer may quote "<excerpt>")."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _md(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return _text(text).replace("|", "\\|").replace("\n", " ")


def _quote(text: str) -> str:
    lines = _text(text).splitlines() or [""]
    return "\n".join(f"> {line}" if line else ">" for line in lines)


def to_markdown(report: AnswersReport) -> str:
    """The report as markdown: totals, one summary row per case, then every case with
    its answer and each check's result and reason."""
    t = report.totals()
    out = [
        f"# Answer evaluation: {report.golden.name}",
        "",
        f"Golden set `{report.golden_path}`, {t['cases']} cases, asked through "
        f"`POST /v1/chat` on {report.target}, collection `{report.collection}`, "
        f"{report.started}.",
        "",
    ]
    if report.golden.description:
        out += [_text(report.golden.description.strip()), ""]
    out += [
        f"**{'PASSED' if report.passed else 'FAILED'}** — {format_totals(report)}.",
        "",
        "A check is `pass`, `fail` or `n/a`. `n/a` means the check cannot be judged "
        "honestly in this answer mode (e.g. a refusal or a tool call without a language "
        "model); it never counts as a pass.",
        "",
        "| case | result | mode | checks |",
        "|---|---|---|---|",
    ]
    for r in report.results:
        out.append(
            f"| [{r.case.id}](#{r.case.id.lower()}) | {_MARK[r.status]} | "
            f"{r.outcome.mode or '-'} | {_md(_check_summary(r.checks))} |"
        )
    for r in report.results:
        o = r.outcome
        out += ["", f"## {r.case.id}", "", f"**Question:** {_text(r.case.question)}", ""]
        if r.case.note:
            out += [f"*Why:* {_text(r.case.note)}", ""]
        out += [
            f"**Result:** {_MARK[r.status]} · mode `{o.mode or '-'}` · {r.ms / 1e3:.1f} s · "
            f"cited: {', '.join(cited_ids(o)) or 'nothing'}",
            "",
        ]
        if o.answer:
            out += [_quote(o.answer), ""]
        if o.stages:
            out += [f"*Stages:* {_md(stage_line(o.stages))}", ""]
        out += ["| check | expected | result | reason |", "|---|---|---|---|"]
        expected = r.case.expected()
        for c in r.checks:
            want = json.dumps(expected.get(c.check, ""), ensure_ascii=False)
            out.append(f"| {c.check} | {_md(want)} | {_MARK[c.status]} | {_md(c.reason)} |")
        if r.judge is not None:
            out += ["", f"*LLM judge (not counted):* {_MARK[r.judge.status]} — "
                        f"{_text(r.case.judge or '')}: {_text(r.judge.reason)}"]
    return "\n".join(out) + "\n"


def write_reports(report: AnswersReport, out: Path) -> Path:
    """Writes the JSON report to ``out`` and the markdown beside it; returns the
    markdown's path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n", "utf-8")
    markdown = out.with_suffix(".md")
    markdown.write_text(to_markdown(report), encoding="utf-8")
    return markdown

