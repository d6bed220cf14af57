"""`groundwire eval answers`: a golden question set, asked through the gateway's
``POST /v1/chat``, each answer held to deterministic checks. One idea at ~700 lines:
the golden-set format, its checks and its report change together, case by case.

A golden set is YAML: ``name``?, ``description``?, ``collection``? (default for the
cases), top-level ``x-...`` keys for YAML anchors (ignored) and ``cases``, each with an
``id``, a ``question``, optional ``collection``, ``note`` (why the case exists),
``max_agent_steps`` (0 = the server's default), ``llm_only`` and at least one check:

- ``cites: [source ids]`` — at least one of them is among the cited sources.
- ``refuses: true`` — a refusal: the done event's mode is ``declined`` and nothing is
  cited (the chain marks a decline itself: the model's "I can't answer that from the
  available documents", an answer that cites nothing, or no usable excerpt at all).
  ``refuses: false`` — an answer (generated or extractive) with at least one citation.
- ``uses_tool: NAME`` — the agent called that tool (the answer stage's ``tools``
  trace); the case should allow steps with ``max_agent_steps``.
- ``forbids: [substrings]`` — none occurs in the final answer (case-insensitive).
- ``min_supported: true | 0.0 to 1.0`` — the share of citations that verify as
  ``supported`` (true = all of them); an answer that cites nothing fails it.
- ``flags_injection: true | false`` — some retrieved source was (not) flagged by the
  injection screen.

Each check ends ``pass``, ``fail`` or ``n/a`` with its reason. Without a language
model the answer is extractive — the best sentences of the top excerpts, quoted —
and some checks cannot be judged honestly there: ``refuses: true`` (the extractive
answer quotes whatever retrieval returned; deciding the excerpts don't answer needs
the model — a decline still passes), ``uses_tool`` (no agent), and every check of a
case marked ``llm_only``. Those are reported as not applicable in extractive mode,
never as passes. A case passes when no check fails and at least one passed; the
command exits 1 when any case fails (a failed chat is a failed case).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import httpx
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from groundwire_cli.chat import (
    SUPPORTED,
    ChatOutcome,
    ChatProtocolError,
    ChatRequestError,
    ask,
)
from groundwire_cli.child_settings import user_environment
from groundwire_cli.cluster import ClusterError
from groundwire_cli.config import default_model_dir
from groundwire_cli.demo import DEFAULT_CORPUS, serving_corpus, stage_line

DEFAULT_COLLECTION = "docs"
RATE_LIMIT_RETRIES = 3
MAX_RETRY_WAIT_S = 60.0
EXTRACTIVE_NA = "not applicable in extractive mode"
CHECKS = ("cites", "refuses", "uses_tool", "forbids", "min_supported", "flags_injection")

Status = Literal["pass", "fail", "n/a"]


class GoldenError(Exception):
    """The golden file cannot be used; the message names the file and the case."""


class GoldenCase(BaseModel):
    """One question and the checks its answer must pass."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    question: str = Field(min_length=1, max_length=4000)
    collection: str | None = None
    note: str = ""
    llm_only: bool = False
    max_agent_steps: int = Field(0, ge=0, le=16)
    cites: list[str] | None = Field(None, min_length=1)
    refuses: bool | None = None
    uses_tool: str | None = Field(None, min_length=1)
    forbids: list[str] | None = Field(None, min_length=1)
    min_supported: bool | float | None = None
    flags_injection: bool | None = None

    @model_validator(mode="after")
    def _checks_make_sense(self) -> GoldenCase:
        if not self.question.strip():
            raise ValueError("the question is blank")
        if not any(getattr(self, name) is not None for name in CHECKS):
            raise ValueError(f"no check: give at least one of {', '.join(CHECKS)}")
        if self.refuses and (self.cites or self.min_supported not in (None, False)):
            raise ValueError("a refusal cites nothing: 'refuses: true' contradicts "
                             "'cites' and 'min_supported'")
        if any(not s.strip() for s in (*(self.cites or ()), *(self.forbids or ()))):
            raise ValueError("'cites' and 'forbids' take non-empty strings")
        if isinstance(self.min_supported, float) and not 0.0 <= self.min_supported <= 1.0:
            raise ValueError("'min_supported' is true or a share between 0 and 1")
        return self

    @property
    def required_share(self) -> float | None:
        """The share of citations that must verify (None: not checked)."""
        if self.min_supported is None or self.min_supported is False:
            return None
        return 1.0 if self.min_supported is True else float(self.min_supported)

    def expected(self) -> dict[str, Any]:
        """The case's checks, as written."""
        return {
            name: value
            for name in CHECKS
            if (value := getattr(self, name)) is not None
        }


class GoldenSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str = Field("", pattern=r"^[A-Za-z0-9._-]*$")
    description: str = ""
    collection: str | None = None
    cases: list[GoldenCase] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> GoldenSet:
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                raise ValueError(f"two cases have the id {case.id!r}")
            seen.add(case.id)
        return self


def _where(loc: Sequence[int | str], raw: Any) -> str:
    """A pydantic error location, with the case's id where there is one."""
    parts: list[str] = []
    for i, key in enumerate(loc):
        if isinstance(key, int) and i and loc[i - 1] == "cases":
            label = f"case {key + 1}"
            try:
                label += f" ({raw['cases'][key]['id']!r})"
            except (KeyError, IndexError, TypeError):
                pass
            parts.append(label)
        elif not (key == "cases" and i + 1 < len(loc) and isinstance(loc[i + 1], int)):
            parts.append(str(key))
    return ": ".join(parts) or "top level"


def parse_golden(text: str, *, source: str = "<golden>", default_name: str = "golden") -> GoldenSet:
    """The golden set in YAML ``text``. Raises GoldenError naming what is wrong."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise GoldenError(f"{source}: not YAML: {error}") from error
    if not isinstance(raw, dict):
        raise GoldenError(f"{source}: expected a mapping with 'cases'")
    # top-level "x-" keys hold YAML anchors shared by cases (as in docker-compose)
    raw = {k: v for k, v in raw.items() if not (isinstance(k, str) and k.startswith("x-"))}
    try:
        golden = GoldenSet.model_validate(raw)
    except ValidationError as error:
        problems = "; ".join(
            f"{_where(e['loc'], raw)}: {e['msg']}" for e in error.errors(include_url=False)
        )
        raise GoldenError(f"{source}: {problems}") from None
    if not golden.name:
        golden = golden.model_copy(update={"name": default_name})
    return golden


def load_golden(path: Path) -> GoldenSet:
    """The golden set in the YAML file ``path`` (its name defaults to the file's stem).
    Raises GoldenError."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise GoldenError(f"{path}: {error.strerror or error}") from error
    return parse_golden(text, source=str(path), default_name=path.stem)


# --- checks ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckResult:
    check: str
    status: Status
    reason: str


def is_extractive(outcome: ChatOutcome) -> bool:
    """Whether the chain answered without a language model (an extractive answer, or
    a decline of the extractive stage: its stage report says so)."""
    if outcome.mode == "extractive":
        return True
    answer = outcome.stage("answer")
    return answer is not None and answer.details.get("mode") == "extractive"


def _cited_ids(outcome: ChatOutcome) -> list[str]:
    return sorted({s.source_id for s in outcome.cited})


def check_cites(expected: Sequence[str], outcome: ChatOutcome) -> CheckResult:
    cited = _cited_ids(outcome)
    hits = [s for s in expected if s in cited]
    if hits:
        return CheckResult("cites", "pass", f"cites {', '.join(hits)}")
    shown = ", ".join(cited) or "nothing"
    return CheckResult(
        "cites", "fail", f"expected one of {', '.join(expected)}; the answer cites {shown}"
    )


def check_refuses(expected: bool, outcome: ChatOutcome) -> CheckResult:
    declined = outcome.mode == "declined" and not outcome.citations
    n = len(outcome.citations)
    if expected:
        if declined:
            return CheckResult("refuses", "pass", "declined with no citations")
        if outcome.mode == "extractive":
            return CheckResult(
                "refuses",
                "n/a",
                f"{EXTRACTIVE_NA}: the extractive answer quotes the best passages "
                "retrieval returned; judging that they do not answer needs the LLM",
            )
        return CheckResult("refuses", "fail", f"answered ({outcome.mode}) with {n} citations")
    if outcome.mode in ("generated", "extractive") and n:
        return CheckResult("refuses", "pass", f"answered ({outcome.mode}) with {n} citations")
    return CheckResult(
        "refuses", "fail", f"expected an answer; got {outcome.mode} with {n} citations"
    )


def check_uses_tool(expected: str, outcome: ChatOutcome) -> CheckResult:
    if is_extractive(outcome):
        return CheckResult("uses_tool", "n/a", f"{EXTRACTIVE_NA}: there is no agent")
    used = outcome.tools_used()
    if expected in used:
        return CheckResult("uses_tool", "pass", f"called {expected} ({len(used)} tool calls)")
    return CheckResult(
        "uses_tool", "fail", f"{expected} was not called (called: {', '.join(used) or 'none'})"
    )


def check_forbids(forbidden: Sequence[str], outcome: ChatOutcome) -> CheckResult:
    text = outcome.answer.casefold()
    found = [s for s in forbidden if s.casefold() in text]
    if found:
        return CheckResult(
            "forbids", "fail", "the answer contains " + ", ".join(repr(s) for s in found)
        )
    return CheckResult("forbids", "pass", f"none of {len(forbidden)} forbidden strings appears")


def check_min_supported(share: float, outcome: ChatOutcome) -> CheckResult:
    total = len(outcome.citations)
    if not total:
        return CheckResult("min_supported", "fail", "the answer cites nothing to verify")
    supported = sum(c.status == SUPPORTED for c in outcome.citations)
    others = ", ".join(
        f"[{c.number}] {c.status}" for c in outcome.citations if c.status != SUPPORTED
    )
    reason = f"{supported} of {total} citations supported" + (f" ({others})" if others else "")
    return CheckResult("min_supported", "pass" if supported >= share * total else "fail", reason)


def check_flags_injection(expected: bool, outcome: ChatOutcome) -> CheckResult:
    flagged = sorted({s.source_id for s in outcome.sources if s.injection_flagged})
    what = f"flagged: {', '.join(flagged)}" if flagged else "no source flagged"
    return CheckResult("flags_injection", "pass" if bool(flagged) == expected else "fail", what)


def _checks_of(case: GoldenCase) -> list[str]:
    return [name for name in CHECKS if getattr(case, name) is not None]


def evaluate_case(case: GoldenCase, outcome: ChatOutcome) -> list[CheckResult]:
    """Every check of ``case`` against one chat's outcome."""
    if outcome.error is not None or not outcome.finished:
        error = outcome.error
        reason = f"the chat failed: {error.code}: {error.message}" if error else "no done event"
        return [CheckResult(name, "fail", reason) for name in _checks_of(case)]
    if case.llm_only and is_extractive(outcome):
        return [
            CheckResult(name, "n/a", f"{EXTRACTIVE_NA}: the case is marked llm_only")
            for name in _checks_of(case)
        ]
    results: list[CheckResult] = []
    if case.cites is not None:
        results.append(check_cites(case.cites, outcome))
    if case.refuses is not None:
        results.append(check_refuses(case.refuses, outcome))
    if case.uses_tool is not None:
        results.append(check_uses_tool(case.uses_tool, outcome))
    if case.forbids is not None:
        results.append(check_forbids(case.forbids, outcome))
    if (share := case.required_share) is not None:
        results.append(check_min_supported(share, outcome))
    if case.flags_injection is not None:
        results.append(check_flags_injection(case.flags_injection, outcome))
    return results


def case_status(checks: Iterable[CheckResult]) -> Status:
    statuses = [c.status for c in checks]
    if "fail" in statuses:
        return "fail"
    return "pass" if "pass" in statuses else "n/a"


@dataclass(frozen=True)
class CaseResult:
    case: GoldenCase
    checks: list[CheckResult]
    outcome: ChatOutcome
    ms: float

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
            "cited_sources": _cited_ids(o),
            "citations": [
                {"number": c.number, "status": c.status, "support": c.support}
                for c in o.citations
            ],
            "flagged_sources": sorted({s.source_id for s in o.sources if s.injection_flagged}),
            "tools": o.tools_used(),
            "stages": [
                {"name": s.name, "ms": round(s.ms, 1), "fallback": s.fallback, "reason": s.reason}
                for s in o.stages
            ],
            "error": None if o.error is None else {"code": o.error.code,
                                                    "message": o.error.message},
            "ms": round(self.ms, 1),
            "expected": self.case.expected(),
            "checks": [
                {"check": c.check, "status": c.status, "reason": c.reason} for c in self.checks
            ],
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


# --- running ---------------------------------------------------------------------------


def _ask_with_retries(
    client: httpx.Client, case: GoldenCase, collection: str, sleep: Callable[[float], None]
) -> ChatOutcome:
    """One chat; a 429 (the gateway's rate limit) waits its Retry-After and retries."""
    for attempt in range(RATE_LIMIT_RETRIES + 1):
        try:
            return ask(
                client,
                case.question,
                collection=collection,
                max_agent_steps=case.max_agent_steps,
            )
        except ChatRequestError as error:
            if error.status != 429 or attempt == RATE_LIMIT_RETRIES:
                raise
            sleep(min(error.retry_after_s or 1.0, MAX_RETRY_WAIT_S))
    raise AssertionError("unreachable")


def run_case(
    client: httpx.Client,
    case: GoldenCase,
    collection: str,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> CaseResult:
    """Asks one case's question and checks the answer; a refused or broken chat is a
    failed case, never an exception."""
    started = time.perf_counter()
    try:
        outcome = _ask_with_retries(client, case, collection, sleep)
    except ChatRequestError as error:
        outcome = ChatOutcome()
        outcome.take_error(error.code, f"HTTP {error.status}: {error.message}")
    except (ChatProtocolError, httpx.HTTPError) as error:
        outcome = ChatOutcome()
        outcome.take_error(type(error).__name__, str(error) or repr(error))
    ms = (time.perf_counter() - started) * 1e3
    return CaseResult(case, evaluate_case(case, outcome), outcome, ms)


def run_golden(
    golden: GoldenSet,
    gateway_url: str,
    *,
    collection: str,
    golden_path: str = "",
    timeout_s: float = 120.0,
    transport: httpx.BaseTransport | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> AnswersReport:
    """Every case of ``golden`` against the gateway at ``gateway_url``, in order."""
    report = AnswersReport(golden, golden_path, gateway_url, collection)
    started = time.perf_counter()
    with httpx.Client(base_url=gateway_url, timeout=timeout_s, transport=transport) as client:
        for case in golden.cases:
            result = run_case(client, case, case.collection or collection, sleep=sleep)
            report.results.append(result)
            if on_result is not None:
                on_result(result)
    report.seconds = time.perf_counter() - started
    return report


# --- reports ---------------------------------------------------------------------------

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
            f"cited: {', '.join(_cited_ids(o)) or 'nothing'}",
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
    return "\n".join(out) + "\n"


def write_reports(report: AnswersReport, out: Path) -> Path:
    """Writes the JSON report to ``out`` and the markdown beside it; returns the
    markdown's path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n", "utf-8")
    markdown = out.with_suffix(".md")
    markdown.write_text(to_markdown(report), encoding="utf-8")
    return markdown


# --- the command -----------------------------------------------------------------------


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "golden"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `groundwire eval answers`."""
    parser.add_argument("--golden", type=Path, required=True, help="the golden set (YAML)")
    parser.add_argument(
        "--gateway",
        default=None,
        metavar="URL",
        help="a running gateway, e.g. http://127.0.0.1:8080 (default: start a local "
        "cluster on free ports with a fresh store and ingest --corpus first)",
    )
    parser.add_argument(
        "--collection",
        default=None,
        help="collection the cases ask (default: the golden set's, else docs)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON report (default: evals/answers-NAME.json); the markdown report is "
        "written beside it as .md",
    )
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=default_model_dir(user_environment()),
        help="embedder model of the local cluster (default: %(default)s)",
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        default=DEFAULT_CORPUS,
        help="ingested into the local cluster first (default: %(default)s)",
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds per chat (default: %(default)s)"
    )


def _unreachable(url: str) -> str | None:
    """Why nothing answers HTTP at ``url`` (any status is an answer), or None."""
    try:
        httpx.get(f"{url}/v1/health", timeout=5.0)
    except httpx.HTTPError as error:
        return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return None


def _print_result(result: CaseResult) -> None:
    print(format_row(result), flush=True)


def run_command(args: argparse.Namespace) -> int:
    """`groundwire eval answers`: 0 when every case passes (or is not applicable), 1
    when one fails or the cluster cannot start, 2 for a bad golden file."""
    try:
        golden = load_golden(args.golden)
    except GoldenError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    collection: str = args.collection or golden.collection or DEFAULT_COLLECTION
    out: Path = args.out or Path("evals") / f"answers-{_slug(golden.name)}.json"

    def run(url: str) -> AnswersReport:
        print(f"{golden.name}: {len(golden.cases)} cases against {url}", flush=True)
        print(TABLE_HEADER, flush=True)
        return run_golden(
            golden,
            url,
            collection=collection,
            golden_path=str(args.golden),
            timeout_s=args.timeout,
            on_result=_print_result,
        )

    if args.gateway:
        url = args.gateway.rstrip("/")
        problem = _unreachable(url)
        if problem:
            # checked first: fourteen "connection refused" failures would overwrite the
            # report a real run wrote
            print(
                f"error: no gateway answers at {url} ({problem}); start one with "
                "`groundwire up`, or leave out --gateway to let the command start its own",
                file=sys.stderr,
            )
            return 1
        report = run(url)
    else:
        try:
            with tempfile.TemporaryDirectory(prefix="groundwire-eval-") as tmp, serving_corpus(
                model_dir=args.model_dir,
                run_dir=Path(tmp) / "run",
                data_path=Path(tmp) / "qdrant",
                corpus=args.corpus,
                collection=collection,
                # the cases are asked back to back: the per-client chat limit is not under test
                extra_env={"GROUNDWIRE_GATEWAY_RATE_LIMIT_PER_MIN": "0"},
            ) as cluster:
                report = run(cluster.gateway_url)
                report.target = "a local cluster started by the command (offline)"
        except (ClusterError, FileNotFoundError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    print(format_totals(report))
    markdown = write_reports(report, out)
    print(f"wrote {out} and {markdown}")
    return 0 if report.passed else 1
