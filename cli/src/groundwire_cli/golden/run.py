"""Running a golden set through the gateway, and the `groundwire eval answers`
command (a local cluster of its own unless ``--gateway`` names one)."""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from groundwire_cli import gateway_access
from groundwire_cli.chat import ChatOutcome, ChatProtocolError, ChatRequestError, ask
from groundwire_cli.child_settings import user_environment
from groundwire_cli.cluster import ClusterError
from groundwire_cli.config import default_model_dir
from groundwire_cli.demo import DEFAULT_CORPUS, serving_corpus
from groundwire_cli.golden.checks import CheckResult, evaluate_case
from groundwire_cli.golden.judge import NO_JUDGE, JudgeConfig, LlmJudge
from groundwire_cli.golden.model import GoldenCase, GoldenError, GoldenSet, load_golden
from groundwire_cli.golden.report import (
    TABLE_HEADER,
    AnswersReport,
    CaseResult,
    format_row,
    format_totals,
    write_reports,
)

DEFAULT_COLLECTION = "docs"
RATE_LIMIT_RETRIES = 3
MAX_RETRY_WAIT_S = 60.0


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
    judge: LlmJudge | None = None,
) -> CaseResult:
    """Asks one case's question and checks the answer; a refused or broken chat is a
    failed case, never an exception. A case with a ``judge`` criterion is also put to
    ``judge`` (reported, not counted; ``n/a`` without one)."""
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
    verdict: CheckResult | None = None
    if case.judge is not None:
        verdict = (
            CheckResult("judge", "n/a", NO_JUDGE)
            if judge is None
            else judge.judge(case.question, outcome.answer, case.judge)
        )
    return CaseResult(case, evaluate_case(case, outcome), outcome, ms, verdict)


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
    judge: LlmJudge | None = None,
    headers: dict[str, str] | None = None,
) -> AnswersReport:
    """Every case of ``golden`` against the gateway at ``gateway_url``, in order
    (``headers``: the caller's key, when the gateway wants one)."""
    report = AnswersReport(golden, golden_path, gateway_url, collection)
    started = time.perf_counter()
    with httpx.Client(
        base_url=gateway_url, timeout=timeout_s, transport=transport, headers=headers
    ) as client:
        for case in golden.cases:
            result = run_case(
                client, case, case.collection or collection, sleep=sleep, judge=judge
            )
            report.results.append(result)
            if on_result is not None:
                on_result(result)
    report.seconds = time.perf_counter() - started
    return report



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
    parser.add_argument(
        "--judge-url",
        default=None,
        metavar="URL",
        help="an OpenAI-compatible API (up to /v1) for the optional LLM judge of cases with "
        "a 'judge' criterion; its verdicts are reported and never counted (API key: "
        "GROUNDWIRE_JUDGE_API_KEY)",
    )
    parser.add_argument("--judge-model", default="", help="the judge's model name")
    gateway_access.add_key_argument(parser)


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
    judge_url: str | None = getattr(args, "judge_url", None)
    judge = (
        LlmJudge(
            JudgeConfig(
                judge_url,
                getattr(args, "judge_model", ""),
                user_environment().get("GROUNDWIRE_JUDGE_API_KEY", ""),
            )
        )
        if judge_url
        else None
    )

    def run(url: str) -> AnswersReport:
        print(f"{golden.name}: {len(golden.cases)} cases against {url}", flush=True)
        print(TABLE_HEADER, flush=True)
        try:
            return run_golden(
                golden,
                url,
                collection=collection,
                golden_path=str(args.golden),
                timeout_s=args.timeout,
                on_result=_print_result,
                judge=judge,
                # a key is for a running gateway; the command's own cluster needs none
                headers=gateway_access.headers(args) if args.gateway else None,
            )
        finally:
            if judge is not None:
                judge.close()

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
