"""`groundwire eval answers` without services: the /v1/chat stream read from canned
SSE (payloads built with the gateway's own event models, so a contract change shows
up here), every check against those streams, and the runner over a mock transport."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from sse_starlette import ServerSentEvent

from groundwire_cli.chat import (
    ChatOutcome,
    ChatProtocolError,
    ChatRequestError,
    SseEvent,
    ask,
    parse_sse,
)
from groundwire_cli.golden import (
    EXTRACTIVE_NA,
    AnswersReport,
    CheckResult,
    GoldenCase,
    case_status,
    evaluate_case,
    format_table,
    parse_golden,
    run_golden,
    to_markdown,
    write_reports,
)
from groundwire_gateway import models

NO_LLM = "no LLM is configured: extractive answer"


def source(n: int, source_id: str, *, flagged: bool = False) -> models.Source:
    return models.Source(
        number=n,
        chunk_id=f"{source_id}#{n}",
        source_id=source_id,
        title=source_id.removesuffix(".md").title(),
        heading_path=["Guide"],
        url=f"https://docs.example.com/{source_id}",
        text="Limits reset every minute.",
        score=0.5,
        injection_flagged=flagged,
    )


def citation(n: int, status: str = "supported", support: float = 1.0) -> models.Citation:
    return models.Citation.model_validate(
        {"number": n, "sentence": f"A claim [{n}].", "status": status, "support": support}
    )


def stages(answer_details: dict[str, str], *, extractive: bool) -> models.StagesEvent:
    return models.StagesEvent(
        stages=[
            models.StageOut(
                name="analysis",
                ms=0.1,
                fallback=True,
                reason="no LLM is configured: the raw query is used",
            ),
            models.StageOut(name="retrieval", ms=12.0, fallback=False),
            models.StageOut(
                name="answer",
                ms=40.0,
                fallback=extractive,
                reason=NO_LLM if extractive else "",
                details=answer_details,
            ),
            models.StageOut(name="citations", ms=1.0, fallback=False),
        ]
    )


def wire(*events: Any, ping: bool = True) -> str:
    """The SSE text the gateway writes for ``events`` (sse-starlette, ``\\n`` separator),
    with a keep-alive comment first."""
    out = [": ping\n\n"] if ping else []
    for event in events:
        out.append(
            ServerSentEvent(data=event.model_dump_json(), event=event.event, sep="\n")
            .encode()
            .decode()
        )
    return "".join(out)


def chat_stream(
    *,
    mode: str = "extractive",
    answer: str = "Limits reset every minute [1].",
    sources: Sequence[models.Source] = (),
    cited: Sequence[int] = (),
    citations: Sequence[models.Citation] = (),
    answer_details: dict[str, str] | None = None,
    resets: int = 0,
) -> str:
    srcs = list(sources) or [source(1, "rate-limits.md"), source(2, "security.md")]
    events: list[Any] = [models.RetrievalEvent(sources=srcs)]
    for _ in range(resets):
        events += [models.DeltaEvent(text="thinking…"), models.ResetEvent(reason="tool call")]
    events.append(models.DeltaEvent(text=answer))
    extractive = mode == "extractive" or (answer_details or {}).get("mode") == "extractive"
    details = (
        answer_details
        if answer_details is not None
        else ({"mode": "extractive"} if extractive else {"provider": "fake", "steps": "0"})
    )
    events += [
        models.CitationsEvent(
            sources=[s for s in srcs if s.number in cited], citations=list(citations)
        ),
        stages(details, extractive=extractive),
        models.DoneEvent.model_validate(
            {
                "mode": mode,
                "answer": answer,
                "unsupported_citations": sum(c.status == "unsupported" for c in citations),
            }
        ),
    ]
    return wire(*events)


def outcome_of(text: str) -> ChatOutcome:
    return ChatOutcome.from_events(parse_sse(text.splitlines()))


def case(**checks: Any) -> GoldenCase:
    return GoldenCase.model_validate({"id": "c1", "question": "how fast?", **checks})


def only(results: list[CheckResult], name: str) -> CheckResult:
    [found] = [r for r in results if r.check == name]
    return found


EXTRACTIVE_OK = chat_stream(cited=[1], citations=[citation(1)])


# ------------------------------------------------------------------------- the stream


def test_the_stream_is_read_into_one_outcome() -> None:
    out = outcome_of(
        chat_stream(
            mode="generated",
            answer="Limits reset every minute [1].",
            cited=[1],
            citations=[citation(1, "supported", 0.81)],
            resets=1,
        )
    )
    assert out.events == ["retrieval", "delta", "reset", "delta", "citations", "stages", "done"]
    assert [s.source_id for s in out.sources] == ["rate-limits.md", "security.md"]
    assert out.streamed == "Limits reset every minute [1]."  # the reset dropped "thinking…"
    assert out.resets == ["tool call"]
    assert [s.source_id for s in out.cited] == ["rate-limits.md"]
    assert out.citations[0].status == "supported" and out.citations[0].support == 0.81
    assert [s.name for s in out.stages] == ["analysis", "retrieval", "answer", "citations"]
    analysis = out.stage("analysis")
    assert analysis is not None and analysis.fallback
    assert out.mode == "generated" and out.finished and out.error is None


def test_sse_parser_handles_crlf_comments_and_multiline_data() -> None:
    text = ': ping\r\n\r\nevent: delta\r\ndata: {"text":\r\ndata: "a"}\r\n\r\ndata: x\r\n\r\n'
    events = list(parse_sse(text.splitlines(keepends=True)))
    assert events == [SseEvent("delta", '{"text":\n"a"}'), SseEvent("message", "x")]


def test_an_error_event_ends_the_stream() -> None:
    error = models.ErrorEvent(code="unavailable", message="embedder down", dependency="embedder")
    out = outcome_of(wire(models.RetrievalEvent(sources=[source(1, "a.md")]), error))
    assert out.error is not None and out.error.dependency == "embedder"
    assert not out.finished


def test_a_stream_without_done_or_error_is_a_protocol_error() -> None:
    with pytest.raises(ChatProtocolError, match="without a done"):
        outcome_of(wire(models.RetrievalEvent(sources=[])))


def test_a_payload_that_is_not_the_gateways_is_a_protocol_error() -> None:
    with pytest.raises(ChatProtocolError, match="'retrieval'"):
        outcome_of('event: retrieval\ndata: {"nope": 1}\n\n')
    with pytest.raises(ChatProtocolError, match="'delta'"):
        outcome_of("event: delta\ndata: not json\n\n")


def test_tools_used_reads_the_answer_stage_trace() -> None:
    out = outcome_of(
        chat_stream(
            mode="generated",
            answer_details={
                "tools": "search(reranker overload; queue) -> 2 new; read_document(3) -> 4 parts"
            },
        )
    )
    assert out.tools_used() == ["search", "read_document"]


# ------------------------------------------------------------------------- the checks


def test_cites_needs_every_expected_source_and_cites_any_one_of_them() -> None:
    results = evaluate_case(case(cites=["nope.md", "rate-limits.md"]), outcome_of(EXTRACTIVE_OK))
    assert results == [
        CheckResult("cites", "fail", "nope.md not cited; the answer cites rate-limits.md")
    ]
    results = evaluate_case(case(cites=["rate-limits.md"]), outcome_of(EXTRACTIVE_OK))
    assert results == [CheckResult("cites", "pass", "cites rate-limits.md")]
    results = evaluate_case(
        case(cites_any=["nope.md", "rate-limits.md"]), outcome_of(EXTRACTIVE_OK)
    )
    assert results == [CheckResult("cites_any", "pass", "cites rate-limits.md")]


def test_cites_fails_naming_what_was_cited_instead() -> None:
    [result] = evaluate_case(case(cites=["security.md"]), outcome_of(EXTRACTIVE_OK))
    assert result.status == "fail"
    assert "security.md" in result.reason and "cites rate-limits.md" in result.reason


def test_a_retrieved_but_uncited_source_does_not_count_as_cited() -> None:
    # security.md is in the retrieval event, not in the citations event
    [result] = evaluate_case(case(cites=["security.md"]), outcome_of(EXTRACTIVE_OK))
    assert result.status == "fail"


def test_refuses_passes_on_a_decline_without_citations() -> None:
    declined = outcome_of(
        chat_stream(mode="declined", answer="I can't answer that from the available documents.")
    )
    assert evaluate_case(case(refuses=True), declined)[0].status == "pass"


def test_refuses_is_not_applicable_to_an_extractive_answer() -> None:
    [result] = evaluate_case(case(refuses=True), outcome_of(EXTRACTIVE_OK))
    assert result.status == "n/a" and result.reason.startswith(EXTRACTIVE_NA)


def test_refuses_fails_when_the_model_answers_with_citations() -> None:
    answered = outcome_of(chat_stream(mode="generated", cited=[1], citations=[citation(1)]))
    [result] = evaluate_case(case(refuses=True), answered)
    assert result.status == "fail" and "generated" in result.reason


def test_refuses_false_needs_a_cited_answer() -> None:
    assert evaluate_case(case(refuses=False), outcome_of(EXTRACTIVE_OK))[0].status == "pass"
    declined = outcome_of(chat_stream(mode="declined", answer="I can't answer that."))
    assert evaluate_case(case(refuses=False), declined)[0].status == "fail"


def test_uses_tool_passes_fails_and_is_not_applicable_without_an_agent() -> None:
    searched = outcome_of(
        chat_stream(
            mode="generated",
            cited=[1],
            citations=[citation(1)],
            answer_details={"provider": "fake", "steps": "1", "tools": "search(q) -> 1 new"},
        )
    )
    assert evaluate_case(case(uses_tool="search"), searched)[0].status == "pass"
    read = evaluate_case(case(uses_tool="read_document"), searched)[0]
    assert read.status == "fail" and "called: search" in read.reason
    extractive = evaluate_case(case(uses_tool="search"), outcome_of(EXTRACTIVE_OK))[0]
    assert extractive.status == "n/a" and "no agent" in extractive.reason


def test_forbids_is_case_insensitive_and_names_what_it_found() -> None:
    priced = outcome_of(
        chat_stream(
            answer="The Enterprise plan costs $99 per Month [1].",
            cited=[1],
            citations=[citation(1)],
        )
    )
    [result] = evaluate_case(case(forbids=["$", "per month", "free"]), priced)
    assert result.status == "fail"
    assert "'$'" in result.reason and "'per month'" in result.reason and "free" not in result.reason
    assert evaluate_case(case(forbids=["pwned"]), outcome_of(EXTRACTIVE_OK))[0].status == "pass"


def test_min_supported_counts_verified_citations() -> None:
    mixed = outcome_of(
        chat_stream(
            mode="generated",
            cited=[1, 2],
            citations=[citation(1), citation(2, "unsupported", 0.2)],
        )
    )
    strict = evaluate_case(case(min_supported=True), mixed)[0]
    assert strict.status == "fail"
    assert strict.reason == "1 of 2 citations supported or quoted verbatim ([2] unsupported)"
    assert evaluate_case(case(min_supported=0.5), mixed)[0].status == "pass"
    unchecked = outcome_of(chat_stream(cited=[1], citations=[citation(1, "unchecked", 0.0)]))
    assert evaluate_case(case(min_supported=True), unchecked)[0].status == "fail"


def test_min_supported_fails_an_answer_that_cites_nothing() -> None:
    uncited = outcome_of(chat_stream(mode="generated", answer="Probably fine."))
    [result] = evaluate_case(case(min_supported=True), uncited)
    assert result.status == "fail" and "cites nothing" in result.reason


def test_flags_injection_reads_the_retrieved_sources() -> None:
    flagged = outcome_of(
        chat_stream(
            sources=[source(1, "security.md", flagged=True), source(2, "a.md")],
            cited=[1],
            citations=[citation(1)],
        )
    )
    assert evaluate_case(case(flags_injection=True), flagged)[0] == CheckResult(
        "flags_injection", "pass", "flagged: security.md"
    )
    assert evaluate_case(case(flags_injection=True), outcome_of(EXTRACTIVE_OK))[0].status == "fail"
    assert evaluate_case(case(flags_injection=False), flagged)[0].status == "fail"


def test_llm_only_cases_are_not_applicable_in_extractive_mode_but_judged_otherwise() -> None:
    c = case(llm_only=True, cites=["security.md"], min_supported=True)
    skipped = evaluate_case(c, outcome_of(EXTRACTIVE_OK))
    assert [(r.check, r.status) for r in skipped] == [("cites", "n/a"), ("min_supported", "n/a")]
    assert all("llm_only" in r.reason for r in skipped)
    assert case_status(skipped) == "n/a"
    generated = outcome_of(chat_stream(mode="generated", cited=[1], citations=[citation(1)]))
    judged = evaluate_case(c, generated)
    assert [(r.check, r.status) for r in judged] == [("cites", "fail"), ("min_supported", "pass")]


def test_an_extractive_decline_is_judged_not_skipped() -> None:
    nothing = outcome_of(
        chat_stream(
            mode="declined",
            answer="I can't answer that from the available documents: nothing matched.",
            answer_details={"mode": "extractive", "sentences": "0"},
        )
    )
    results = evaluate_case(case(refuses=True, uses_tool="search"), nothing)
    assert [(r.check, r.status) for r in results] == [("refuses", "pass"), ("uses_tool", "n/a")]


def test_a_failed_chat_fails_the_case() -> None:
    error = models.ErrorEvent(code="deadline_exceeded", message="too slow")
    results = evaluate_case(case(forbids=["x"], refuses=True), outcome_of(wire(error)))
    reason = "the chat failed: deadline_exceeded: too slow"
    assert results == [
        CheckResult("refuses", "fail", reason),
        CheckResult("forbids", "fail", reason),
    ]


def test_case_status_needs_a_pass_and_no_failure() -> None:
    assert case_status([CheckResult("a", "pass", ""), CheckResult("b", "n/a", "")]) == "pass"
    assert case_status([CheckResult("a", "pass", ""), CheckResult("b", "fail", "")]) == "fail"
    assert case_status([CheckResult("a", "n/a", "")]) == "n/a"


# ------------------------------------------------------------------------- the runner

GOLDEN = """
name: unit
cases:
  - id: in-scope
    question: how fast may I call?
    cites: [rate-limits.md]
    min_supported: true
  - id: bait
    question: what does the enterprise plan cost?
    refuses: true
    forbids: ["$"]
  - id: refused-by-gateway
    question: too long
    forbids: ["<excerpt>"]
"""


def _gateway(
    replies: dict[str, Callable[[], httpx.Response]], seen: list[dict[str, Any]]
) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        assert request.url.path == "/v1/chat"
        return replies[body["messages"][-1]["content"]]()

    return httpx.MockTransport(handle)


def _sse(text: str) -> httpx.Response:
    return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})


def _run(replies: dict[str, Callable[[], httpx.Response]]) -> tuple[AnswersReport, list[Any]]:
    seen: list[dict[str, Any]] = []
    report = run_golden(
        parse_golden(GOLDEN),
        "http://gateway.test",
        collection="docs",
        golden_path="unit.yaml",
        transport=_gateway(replies, seen),
        sleep=lambda s: None,
    )
    return report, seen


def test_the_runner_asks_every_case_and_reports_each_check(tmp_path: Path) -> None:
    calls = {"in-scope": 0}

    def limited_once() -> httpx.Response:
        calls["in-scope"] += 1
        if calls["in-scope"] == 1:
            return httpx.Response(
                429,
                json={"error": {"code": "rate_limited", "message": "slow"}},
                headers={"retry-after": "1"},
            )
        return _sse(EXTRACTIVE_OK)

    replies: dict[str, Callable[[], httpx.Response]] = {
        "how fast may I call?": limited_once,
        "what does the enterprise plan cost?": lambda: _sse(
            chat_stream(answer="It costs $10 [1].", cited=[1], citations=[citation(1)])
        ),
        "too long": lambda: httpx.Response(
            422, json={"error": {"code": "invalid_input", "message": "messages: too many tokens"}}
        ),
    }
    report, seen = _run(replies)

    # the 429 was waited out and retried
    assert [b["messages"][-1]["content"] for b in seen][:2] == ["how fast may I call?"] * 2
    assert all(b["collection"] == "docs" for b in seen)
    by_id = {r.case.id: r for r in report.results}
    assert by_id["in-scope"].status == "pass"
    assert [(c.check, c.status) for c in by_id["bait"].checks] == [
        ("refuses", "n/a"),
        ("forbids", "fail"),
    ]
    refused = by_id["refused-by-gateway"].checks
    assert refused[0].status == "fail" and "HTTP 422" in refused[0].reason
    assert report.totals() == {"cases": 3, "pass": 1, "fail": 2, "n/a": 0}
    assert not report.passed

    table = format_table(report)
    assert "FAIL  bait" in table and "forbids: the answer contains '$'" in table
    markdown = write_reports(report, tmp_path / "answers-unit.json")
    text = markdown.read_text()
    for cid in ("in-scope", "bait", "refused-by-gateway"):
        assert f"## {cid}" in text
    assert "not applicable in extractive mode" in text and "**FAILED**" in text
    assert "&lt;excerpt&gt;" in text and "<excerpt>" not in text  # shown, not eaten as HTML
    data = json.loads((tmp_path / "answers-unit.json").read_text())
    assert data["totals"]["fail"] == 2 and data["passed"] is False
    assert data["cases"][0]["cited_sources"] == ["rate-limits.md"]
    assert data["cases"][1]["checks"][1]["reason"] == "the answer contains '$'"


def test_a_run_with_only_passes_and_not_applicable_passes() -> None:
    replies: dict[str, Callable[[], httpx.Response]] = {
        "how fast may I call?": lambda: _sse(EXTRACTIVE_OK),
        "what does the enterprise plan cost?": lambda: _sse(EXTRACTIVE_OK),
        "too long": lambda: _sse(EXTRACTIVE_OK),
    }
    report, _ = _run(replies)
    assert report.passed and report.totals()["fail"] == 0
    assert report.modes() == {"extractive": 3}
    assert "**PASSED**" in to_markdown(report)


def test_ask_raises_the_gateways_error_before_the_stream() -> None:
    transport = httpx.MockTransport(
        lambda r: httpx.Response(
            429,
            json={"error": {"code": "rate_limited", "message": "slow down"}},
            headers={"retry-after": "7"},
        )
    )
    with httpx.Client(base_url="http://g.test", transport=transport) as client:
        with pytest.raises(ChatRequestError) as caught:
            ask(client, "q")
    assert (caught.value.status, caught.value.code, caught.value.retry_after_s) == (
        429,
        "rate_limited",
        7.0,
    )
