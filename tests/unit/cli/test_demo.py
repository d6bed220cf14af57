"""`groundwire demo` without services: which answers fail the demo, and what it prints
for an answer (mode, citations with their verification, sources, stage fallbacks)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from sse_starlette import ServerSentEvent

from groundwire_cli.chat import ChatOutcome, parse_sse
from groundwire_cli.demo import print_answer, read_questions, unverified
from groundwire_gateway import models

SOURCE = models.Source(
    number=1,
    chunk_id="c1",
    source_id="rate-limits.md",
    title="Rate limits and quotas",
    heading_path=["Rate limits and quotas", "What clients see"],
    url="https://groundwire.dev/docs/rate-limits",
    text="A request over a limit is rejected with HTTP 429.",
    score=0.03,
)


def _outcome(mode: str, statuses: list[str], method: str = "none") -> ChatOutcome:
    answer = "A request over a limit is rejected with HTTP 429 [1]."
    events: list[Any] = [
        models.RetrievalEvent(sources=[SOURCE]),
        models.DeltaEvent(text=answer),
        models.CitationsEvent.model_validate(
            {
                "sources": [SOURCE.model_dump()] if statuses else [],
                "citations": [
                    {"number": 1, "sentence": answer, "status": s, "support": 0.3, "method": method}
                    for s in statuses
                ],
            }
        ),
        models.StagesEvent(
            stages=[
                models.StageOut(
                    name="analysis",
                    ms=0.2,
                    fallback=True,
                    reason="no LLM is configured: the raw query is used",
                ),
                models.StageOut(
                    name="answer",
                    ms=35.0,
                    fallback=mode == "extractive",
                    reason="no LLM is configured: extractive answer",
                    details={"mode": "extractive"},
                ),
            ]
        ),
        models.DoneEvent.model_validate({"mode": mode, "answer": answer}),
    ]
    text = "".join(
        ServerSentEvent(data=e.model_dump_json(), event=e.event, sep="\n").encode().decode()
        for e in events
    )
    return ChatOutcome.from_events(parse_sse(text.splitlines()))


def test_an_extractive_answer_must_verify_in_full() -> None:
    assert unverified(_outcome("extractive", ["supported", "supported"])) == []
    assert unverified(_outcome("extractive", ["quoted", "quoted"], "similarity")) == []
    [similar] = unverified(_outcome("extractive", ["similar"], "similarity"))
    assert similar.startswith("[1] is similar"), "an extractive answer quotes, verbatim"
    [problem] = unverified(_outcome("extractive", ["supported", "unchecked"]))
    assert problem.startswith("[1] is unchecked")
    assert unverified(_outcome("extractive", [])) == ["the extractive answer cites nothing"]


def test_a_generated_answers_unsupported_citation_is_reported_not_fatal() -> None:
    assert unverified(_outcome("generated", ["unsupported"])) == []


def test_a_failed_chat_fails_the_demo() -> None:
    outcome = ChatOutcome()
    outcome.take_error("unavailable", "the embedder is down", "embedder")
    assert unverified(outcome) == ["the chat failed: unavailable: the embedder is down"]


def test_the_answer_is_printed_with_mode_citations_sources_and_fallbacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_answer(
        "how do I stop one user from flooding the API",
        _outcome("extractive", ["supported"], "nli"),
    )
    out = capsys.readouterr().out
    assert "mode: EXTRACTIVE" in out
    assert "rejected with HTTP 429 [1]." in out
    assert "[1] Rate limits and quotas > What clients see" in out
    assert "https://groundwire.dev/docs/rate-limits  (rate-limits.md)" in out
    assert "[1] SUPPORTED   nli 0.30" in out
    assert "analysis          0ms  fallback: no LLM is configured: the raw query is used" in out
    assert "fallback: no LLM is configured: extractive answer" in out
    assert "verified: 1 of 1 citations supported (by nli)" in out


def test_a_similarity_verdict_is_named_and_not_counted_as_proof(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_answer("how are requests limited", _outcome("extractive", ["quoted"], "similarity"))
    out = capsys.readouterr().out
    assert "[1] QUOTED      verbatim" in out and "0.30" not in out  # no figure for a quote
    assert "passages chosen by similarity; nothing read their meaning" in out
    assert "the answer is 1 passage(s) quoted from the sources, chosen by similarity" in out
    assert not re.search(r"\b(verified|supported)\b", out, re.IGNORECASE), out
    print_answer("how are requests limited", _outcome("generated", ["similar"], "similarity"))
    out = capsys.readouterr().out
    assert "scored by similarity only (a relevance score, not proof)" in out
    assert "[1] SIMILAR     relevance 0.30" in out
    assert not re.search(r"\b(verified|supported)\b", out, re.IGNORECASE), out
    print_answer("how are requests limited", _outcome("extractive", ["supported"], "nli"))
    out = capsys.readouterr().out
    assert "[1] SUPPORTED   nli 0.30" in out and "verified: 1 of 1" in out
    assert "similarity" not in out


def test_questions_skip_blank_lines_and_comments(tmp_path: Path) -> None:
    path = tmp_path / "q.txt"
    path.write_text("# expected: a.md\n\n  first?  \n   # indented comment\nsecond?\n")
    assert read_questions(path) == ["first?", "second?"]
