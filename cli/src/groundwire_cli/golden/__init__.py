"""`groundwire eval answers`: a golden question set, asked through the gateway's
``POST /v1/chat``, each answer held to deterministic checks (``model`` the format,
``checks`` the checks, ``run`` the runner and command, ``report`` the reports,
``judge`` the optional LLM judge).

A golden set is YAML: ``name``?, ``description``?, ``collection``? (default for the
cases), top-level ``x-...`` keys for YAML anchors (ignored) and ``cases``, each with an
``id``, a ``question``, optional ``collection``, ``note`` (why the case exists),
``max_agent_steps`` (0 = the server's default), ``llm_only`` and at least one check:

- ``cites: [source ids]`` — every one of them is among the cited sources.
- ``cites_any: [source ids]`` — at least one of them is.
- ``contains: [terms]`` — each occurs in the final answer (case-insensitive): the
  answer states what was asked, not merely something from the right page.
- ``declines: true | false`` — the chain declined (mode ``declined``, nothing cited),
  or answered; judged in every mode (the coverage stage declines without an LLM).
- ``refuses: true | false`` — as ``declines``, but ``refuses: true`` is not
  applicable to an extractive answer (kept for sets written before ``declines``);
  ``refuses: false`` also needs at least one citation.
- ``uses_tool: NAME`` — the agent called that tool (the answer stage's ``tools``
  trace); the case should allow steps with ``max_agent_steps``.
- ``forbids: [substrings]`` — none occurs in the final answer (case-insensitive).
- ``min_supported: true | 0.0 to 1.0`` — the share of citations that verify as
  ``supported`` (true = all of them); an answer that cites nothing fails it.
- ``no_unsupported: true`` — no citation is ``unsupported`` or ``contradicted``.
- ``spans_valid: true`` — each citation's ``answer_span`` is non-blank text of the
  final answer and its ``source_span`` non-blank text of the cited source; a citation
  without spans fails, saying the server sent none.
- ``flags_injection: true | false`` — some retrieved source was (not) flagged by the
  injection screen.

``judge: criterion`` asks an LLM (``--judge-url``) whether the answer meets the
criterion; the verdict is reported beside the checks and never counted (``n/a``
without a judge).

Each check ends ``pass``, ``fail`` or ``n/a`` with its reason. Without a language
model the answer is extractive, and some checks cannot be judged honestly there:
``refuses: true``, ``uses_tool`` (no agent), and every check of a case marked
``llm_only``. Those are reported as not applicable in extractive mode, never as
passes. A case passes when no check fails and at least one passed; the command exits
1 when any case fails (a failed chat is a failed case).
"""

from __future__ import annotations

from groundwire_cli.golden.checks import (
    EXTRACTIVE_NA,
    CheckResult,
    Status,
    case_status,
    evaluate_case,
    is_extractive,
)
from groundwire_cli.golden.model import (
    CHECKS,
    GoldenCase,
    GoldenError,
    GoldenSet,
    load_golden,
    parse_golden,
)
from groundwire_cli.golden.report import (
    TABLE_HEADER,
    AnswersReport,
    CaseResult,
    format_row,
    format_table,
    format_totals,
    to_markdown,
    write_reports,
)
from groundwire_cli.golden.run import add_arguments, run_case, run_command, run_golden

__all__ = [
    "CHECKS",
    "EXTRACTIVE_NA",
    "TABLE_HEADER",
    "AnswersReport",
    "CaseResult",
    "CheckResult",
    "GoldenCase",
    "GoldenError",
    "GoldenSet",
    "Status",
    "add_arguments",
    "case_status",
    "evaluate_case",
    "format_row",
    "format_table",
    "format_totals",
    "is_extractive",
    "load_golden",
    "parse_golden",
    "run_case",
    "run_command",
    "run_golden",
    "to_markdown",
    "write_reports",
]
