"""The deterministic checks of one answer, and a case's status from them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from groundwire_cli.chat import QUOTED, SUPPORTED, ChatOutcome
from groundwire_cli.golden.model import CHECKS, GoldenCase

EXTRACTIVE_NA = "not applicable in extractive mode"

Status = Literal["pass", "fail", "n/a"]


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


def cited_ids(outcome: ChatOutcome) -> list[str]:
    return sorted({s.source_id for s in outcome.cited})


def check_cites(expected: Sequence[str], outcome: ChatOutcome) -> CheckResult:
    """Every expected source is cited."""
    cited = cited_ids(outcome)
    missing = [s for s in expected if s not in cited]
    if not missing:
        return CheckResult("cites", "pass", f"cites {', '.join(expected)}")
    shown = ", ".join(cited) or "nothing"
    return CheckResult(
        "cites", "fail", f"{', '.join(missing)} not cited; the answer cites {shown}"
    )


def check_cites_any(expected: Sequence[str], outcome: ChatOutcome) -> CheckResult:
    """At least one expected source is cited."""
    cited = cited_ids(outcome)
    hits = [s for s in expected if s in cited]
    if hits:
        return CheckResult("cites_any", "pass", f"cites {', '.join(hits)}")
    shown = ", ".join(cited) or "nothing"
    return CheckResult(
        "cites_any", "fail", f"expected one of {', '.join(expected)}; the answer cites {shown}"
    )


def declined(outcome: ChatOutcome) -> bool:
    """Whether the chain declined: mode declined, nothing cited."""
    return outcome.mode == "declined" and not outcome.citations


def check_declines(expected: bool, outcome: ChatOutcome) -> CheckResult:
    """A decline (mode declined, nothing cited), judged in every answer mode: the
    coverage stage declines without a language model too."""
    did_decline = declined(outcome)
    n = len(outcome.citations)
    if did_decline == expected:
        what = "declined with no citations" if did_decline else f"answered ({outcome.mode})"
        return CheckResult("declines", "pass", what)
    coverage = outcome.stage("coverage")
    evidence = ""
    if coverage is not None:
        evidence = f" (coverage: {coverage.details.get('evidence', '?')} vs threshold " \
                   f"{coverage.details.get('threshold', '?')})"
    if expected:
        return CheckResult(
            "declines", "fail", f"answered ({outcome.mode}) with {n} citations{evidence}"
        )
    return CheckResult("declines", "fail", f"declined{evidence}")


def check_contains(terms: Sequence[str], outcome: ChatOutcome) -> CheckResult:
    """Every term occurs in the final answer (case-insensitive)."""
    text = outcome.answer.casefold()
    missing = [t for t in terms if t.casefold() not in text]
    if missing:
        return CheckResult(
            "contains", "fail", "the answer does not state " + ", ".join(repr(t) for t in missing)
        )
    return CheckResult("contains", "pass", f"states all {len(terms)} expected terms")


_REJECTED = ("unsupported", "contradicted")


def check_no_unsupported(outcome: ChatOutcome) -> CheckResult:
    """No citation was judged unsupported or contradicted."""
    bad = [f"[{c.number}] {c.status}" for c in outcome.citations if c.status in _REJECTED]
    if bad:
        return CheckResult("no_unsupported", "fail", ", ".join(bad))
    n = len(outcome.citations)
    return CheckResult("no_unsupported", "pass", f"none of {n} citations rejected")


def _span_problem(
    span: tuple[int, int] | None, text: str, what: str
) -> str | None:
    if span is None:
        return f"no {what} span (the server sent none)"
    start, end = span
    if not 0 <= start < end <= len(text):
        return f"{what} span [{start}, {end}) is outside its text ({len(text)} characters)"
    if not text[start:end].strip():
        return f"{what} span [{start}, {end}) is blank"
    return None


def check_spans_valid(outcome: ChatOutcome) -> CheckResult:
    """Each citation's answer span points at text of the final answer, and its source
    span at text of the cited source."""
    if not outcome.citations:
        return CheckResult("spans_valid", "fail", "the answer cites nothing to locate")
    sources = {s.number: s for s in (*outcome.sources, *outcome.cited)}
    problems = []
    for c in outcome.citations:
        source = sources.get(c.number)
        found = _span_problem(c.answer_span, outcome.answer, "answer") or (
            f"source [{c.number}] was not sent"
            if source is None
            else _span_problem(c.source_span, source.text, "source")
        )
        if found:
            problems.append(f"[{c.number}] {found}")
    if problems:
        return CheckResult("spans_valid", "fail", "; ".join(problems))
    return CheckResult(
        "spans_valid", "pass", f"{len(outcome.citations)} citations point at real text"
    )


def check_refuses(expected: bool, outcome: ChatOutcome) -> CheckResult:
    n = len(outcome.citations)
    if expected:
        if declined(outcome):
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
    # a verbatim quote (similarity only, nothing judged) is grounded in its passage,
    # though not "supported": the check counts both and names them apart
    backed = (SUPPORTED, QUOTED)
    supported = sum(c.status in backed for c in outcome.citations)
    others = ", ".join(
        f"[{c.number}] {c.status}" for c in outcome.citations if c.status not in backed
    )
    reason = f"{supported} of {total} citations supported or quoted verbatim" + (
        f" ({others})" if others else ""
    )
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
    if case.cites_any is not None:
        results.append(check_cites_any(case.cites_any, outcome))
    if case.refuses is not None:
        results.append(check_refuses(case.refuses, outcome))
    if case.declines is not None:
        results.append(check_declines(case.declines, outcome))
    if case.uses_tool is not None:
        results.append(check_uses_tool(case.uses_tool, outcome))
    if case.forbids is not None:
        results.append(check_forbids(case.forbids, outcome))
    if case.contains is not None:
        results.append(check_contains(case.contains, outcome))
    if (share := case.required_share) is not None:
        results.append(check_min_supported(share, outcome))
    if case.no_unsupported:
        results.append(check_no_unsupported(outcome))
    if case.spans_valid:
        results.append(check_spans_valid(outcome))
    if case.flags_injection is not None:
        results.append(check_flags_injection(case.flags_injection, outcome))
    return results


def case_status(checks: Iterable[CheckResult]) -> Status:
    statuses = [c.status for c in checks]
    if "fail" in statuses:
        return "fail"
    return "pass" if "pass" in statuses else "n/a"

