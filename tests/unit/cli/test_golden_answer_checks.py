"""The golden checks added for answers that can fail: `contains`, `declines`,
`no_unsupported`, `spans_valid`, and the optional LLM judge (reported apart, never
counted), on streams built with the gateway's own event models; the judge against the
fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from groundwire_cli.golden import CheckResult, evaluate_case, parse_golden, run_case
from groundwire_cli.golden.judge import NO_JUDGE, JudgeConfig, LlmJudge, parse_verdict
from groundwire_gateway import models
from tests.fakes.llm_server import FakeLLMServer, Reply
from tests.unit.cli.test_golden_checks import (
    case,
    chat_stream,
    citation,
    only,
    outcome_of,
    source,
)

ANSWER = "Limits reset every minute [1]."


def spanned(
    n: int, answer: tuple[int, int] | None, src: tuple[int, int] | None, status: str = "supported"
) -> models.Citation:
    raw: dict[str, object] = {"number": n, "sentence": ANSWER, "status": status, "support": 0.9}
    if answer is not None:
        raw["answer_span"] = list(answer)
    if src is not None:
        raw["source_span"] = list(src)
    return models.Citation.model_validate(raw)


def test_contains_needs_every_term_in_the_answer() -> None:
    out = outcome_of(chat_stream(cited=[1], citations=[citation(1)], answer=ANSWER))
    ok = evaluate_case(case(contains=["every MINUTE", "reset"]), out)
    assert ok == [CheckResult("contains", "pass", "states all 2 expected terms")]
    missing = only(evaluate_case(case(contains=["minute", "per key"]), out), "contains")
    assert missing.status == "fail" and "'per key'" in missing.reason


def test_declines_is_judged_in_extractive_mode_too() -> None:
    declined = outcome_of(
        chat_stream(
            mode="declined", answer="I can't answer that.", answer_details={"mode": "extractive"}
        )
    )
    answered = outcome_of(chat_stream(cited=[1], citations=[citation(1)]))
    assert only(evaluate_case(case(declines=True), declined), "declines").status == "pass"
    failed = only(evaluate_case(case(declines=True), answered), "declines")
    assert failed.status == "fail" and "answered (extractive) with 1 citations" in failed.reason
    assert only(evaluate_case(case(declines=False), answered), "declines").status == "pass"
    assert only(evaluate_case(case(declines=False), declined), "declines").status == "fail"


def test_no_unsupported_fails_on_an_unsupported_or_contradicted_citation() -> None:
    good = outcome_of(chat_stream(cited=[1], citations=[citation(1)]))
    assert only(evaluate_case(case(no_unsupported=True), good), "no_unsupported").status == "pass"
    bad = outcome_of(
        chat_stream(
            cited=[1, 2],
            citations=[citation(1, "contradicted", 0.1), citation(2, "unsupported", 0.2)],
        )
    )
    result = only(evaluate_case(case(no_unsupported=True), bad), "no_unsupported")
    assert result == CheckResult("no_unsupported", "fail", "[1] contradicted, [2] unsupported")


def test_spans_valid_checks_each_range_against_the_text_it_indexes() -> None:
    text = "Limits reset every minute."  # the fixture source's text
    sources = [source(1, "rate-limits.md")]
    good = outcome_of(
        chat_stream(
            sources=sources,
            cited=[1],
            answer=ANSWER,
            citations=[spanned(1, (0, len(ANSWER)), (0, len(text)))],
        )
    )
    assert only(evaluate_case(case(spans_valid=True), good), "spans_valid").status == "pass"

    outside = outcome_of(
        chat_stream(
            sources=sources,
            cited=[1],
            answer=ANSWER,
            citations=[spanned(1, (0, len(ANSWER)), (5, 999))],
        )
    )
    result = only(evaluate_case(case(spans_valid=True), outside), "spans_valid")
    assert result.status == "fail" and "source span [5, 999) is outside" in result.reason

    missing = outcome_of(
        chat_stream(sources=sources, cited=[1], answer=ANSWER, citations=[spanned(1, None, None)])
    )
    result = only(evaluate_case(case(spans_valid=True), missing), "spans_valid")
    assert result.status == "fail" and "no answer span (the server sent none)" in result.reason

    blank = outcome_of(
        chat_stream(
            sources=sources, cited=[1], answer="  " + ANSWER, citations=[spanned(1, (0, 2), (0, 4))]
        )
    )
    result = only(evaluate_case(case(spans_valid=True), blank), "spans_valid")
    assert result.status == "fail" and "answer span [0, 2) is blank" in result.reason


def test_a_decline_case_cannot_also_expect_content() -> None:
    with pytest.raises(Exception, match="'declines: true' contradicts"):
        parse_golden("cases:\n  - {id: a, question: q, declines: true, contains: [x]}")
    with pytest.raises(Exception, match="true or left out"):
        parse_golden("cases:\n  - {id: a, question: q, spans_valid: false}")


def test_the_judge_verdict_is_parsed_or_reported_as_not_applicable() -> None:
    assert parse_verdict('{"verdict": "fail", "reason": "off topic"}') == CheckResult(
        "judge", "fail", "off topic"
    )
    assert parse_verdict('```json\n{"verdict": "pass"}\n```').status == "pass"
    assert parse_verdict("I think it is fine").status == "n/a"
    assert parse_verdict('{"verdict": "maybe"}').status == "n/a"


async def test_the_llm_judge_is_asked_and_reported_but_never_counted() -> None:
    golden = parse_golden(
        "cases:\n  - {id: a, question: how fast, cites: [rate-limits.md], "
        "judge: the answer says how often limits reset}"
    )
    [the_case] = golden.cases
    stream = chat_stream(cited=[1], citations=[citation(1)], answer=ANSWER)

    def gateway(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=stream, headers={"content-type": "text/event-stream"})

    chat = httpx.Client(base_url="http://gw", transport=httpx.MockTransport(gateway))
    # no judge configured: n/a, and the case still passes on its checks
    result = run_case(chat, the_case, "docs")
    assert result.judge == CheckResult("judge", "n/a", NO_JUDGE) and result.status == "pass"

    replies = [Reply(json={"verdict": "fail", "reason": "no figure"}), Reply(status=500)]
    async with FakeLLMServer(replies) as fake:
        judge = LlmJudge(JudgeConfig(fake.openai_url, "judge-model", "k", timeout_s=5.0))
        try:
            result = await asyncio.to_thread(run_case, chat, the_case, "docs", judge=judge)
            assert result.judge == CheckResult("judge", "fail", "no figure")
            assert result.status == "pass", "the judge's verdict is never counted"
            assert result.to_json()["judge"]["counted"] is False
            prompt = fake.requests[0].body["messages"][0]["content"]
            assert "the answer says how often limits reset" in prompt and ANSWER in prompt
            failed = await asyncio.to_thread(run_case, chat, the_case, "docs", judge=judge)
            assert failed.judge == CheckResult("judge", "n/a", "the judge failed: HTTP 500")
        finally:
            judge.close()
