"""Follow-ups: the heuristic that makes one standalone without an LLM, and the analysis
stage's standalone question (the LLM's rewrite, else the heuristic's) in its report."""

from __future__ import annotations

import json

import pytest

from groundwire_orchestrator.domain import Turn
from groundwire_orchestrator.stages.analysis import (
    AnalysisInput,
    FilterableFields,
    QueryAnalysisStage,
)
from groundwire_orchestrator.text.follow_up import is_follow_up, standalone_question
from tests.unit.orchestrator.doubles import FakeRetriever, ScriptedLLM

FIRST = "How do I limit requests per client?"
HISTORY = (Turn("user", FIRST), Turn("assistant", "With a rate limit per key [1]."))
ANALYSIS = {
    "rewritten_query": "rate limit gateway replicas shared counters",
    "hyde_document": "Replicas share their counters in Redis.",
    "intent": "limits across replicas",
    "filters": [],
    "negatives": [],
}


@pytest.mark.parametrize(
    "message",
    [
        "And across several gateway replicas?",
        "and pin it to a tag?",
        "What about Kubernetes?",
        "Why?",
        "For the reranker?",
        "How long does it take to restart?",
        "Also the quotas",
    ],
)
def test_follow_ups_are_recognised(message: str) -> None:
    assert is_follow_up(message)


@pytest.mark.parametrize(
    "message",
    [
        "How do I limit requests per client?",
        "Which settings control the reranker's batch size and queue depth?",
        "Andromeda galaxy distance from earth",  # "and" only as a word prefix
        "How do I install Groundwire with docker compose on one machine?",
        "",
    ],
)
def test_questions_that_stand_alone_are_not_follow_ups(message: str) -> None:
    assert not is_follow_up(message)


def test_an_elliptical_follow_up_is_combined_with_the_previous_user_question() -> None:
    follow = "And across several gateway replicas?"
    assert standalone_question(follow, HISTORY) == f"{FIRST} {follow}"
    # a new question, or no earlier question: unchanged
    new = "How do I install Groundwire with docker compose on one machine?"
    assert standalone_question(new, HISTORY) == new
    assert standalone_question(follow, ()) == follow
    assert standalone_question(follow, (Turn("assistant", "Hello."),)) == follow


def test_a_chain_of_follow_ups_keeps_the_first_topic() -> None:
    history = (*HISTORY, Turn("user", "And across replicas?"), Turn("assistant", "Redis [2]."))
    assert standalone_question("What about quotas?", history) == (
        f"{FIRST} And across replicas? What about quotas?"
    )
    # a new question in between starts a new topic
    history = (*HISTORY, Turn("user", "How do I deploy on Kubernetes with Helm charts?"))
    assert standalone_question("And with kustomize?", history) == (
        "How do I deploy on Kubernetes with Helm charts? And with kustomize?"
    )


def test_the_previous_question_is_cut_before_it_drowns_the_follow_up() -> None:
    long_question = "How do I limit requests " + "per client " * 200 + "?"
    combined = standalone_question("And across replicas?", (Turn("user", long_question),))
    assert combined.endswith(" And across replicas?")
    assert len(combined) == 600 + len(" And across replicas?")


ACCESS_KEY = (
    Turn("user", "How do I create an access key for a user?"),
    Turn("assistant", "Run `aws iam create-access-key --user-name Bob` [1]."),
)


def test_a_follow_up_pointing_at_a_noun_is_searched_on_its_own_words() -> None:
    # glued to the question before it, this was searched as an access-key question
    # and found delete-access-key (issue #32)
    resolved = standalone_question("…and how do I delete that user again?", ACCESS_KEY)
    assert resolved == "how do I delete the user Bob?"
    assert "access" not in resolved and "key" not in resolved
    # no name in the previous turn: the pointer only
    plain = (Turn("user", "How do I list the buckets?"), Turn("assistant", "Use ls [1]."))
    assert standalone_question("And how do I empty those buckets?", plain) == (
        "how do I empty the buckets?"
    )


def test_a_bare_pronoun_becomes_what_the_previous_question_asked_about() -> None:
    history = (Turn("user", "How do I deploy Groundwire on Kubernetes?"), Turn("assistant", "[1]"))
    assert standalone_question("How many replicas should it run?", history) == (
        "How many replicas should Groundwire on Kubernetes run?"
    )
    image = (Turn("user", "How do I build the docker image?"),)
    assert standalone_question("and pin it to a tag?", image) == "pin the docker image to a tag?"
    # a pointer that is not a noun's ("is that enough"): the ellipsis rule, as before
    assert standalone_question("Is that enough?", HISTORY) == f"{FIRST} Is that enough?"


async def test_the_analysis_report_shows_the_resolved_question_searched() -> None:
    follow = "and how do I delete that user again?"
    analysis, report = await _stage(None).run(AnalysisInput("docs", follow, ACCESS_KEY))
    assert analysis.searched == "how do I delete the user Bob?"
    assert report.details["standalone_question"] == "how do I delete the user Bob?"
    assert "previous question and its answer" in report.details["follow_up"]


def _stage(llm: ScriptedLLM | None) -> QueryAnalysisStage:
    return QueryAnalysisStage(llm, FilterableFields(FakeRetriever()), timeout_s=1.0)


async def test_without_an_llm_the_follow_up_is_searched_with_its_question() -> None:
    follow = "And across several gateway replicas?"
    analysis, report = await _stage(None).run(AnalysisInput("docs", follow, HISTORY))
    combined = f"{FIRST} {follow}"
    assert analysis.query == follow
    assert analysis.searched == analysis.rewritten_query == analysis.hyde_document == combined
    assert report.fallback
    assert report.details["standalone_question"] == combined
    assert "previous question" in report.details["follow_up"]
    # a question that stands alone: no standalone form, nothing reported
    analysis, report = await _stage(None).run(AnalysisInput("docs", FIRST, ()))
    assert analysis.searched == FIRST and analysis.standalone_question == ""
    assert "standalone_question" not in report.details


async def test_the_llms_standalone_question_is_searched_and_reported() -> None:
    rewrite = "How do I limit requests per client across several gateway replicas?"
    llm = ScriptedLLM(fast=[json.dumps({**ANALYSIS, "standalone_question": rewrite})])
    analysis, report = await _stage(llm).run(
        AnalysisInput("docs", "And across several gateway replicas?", HISTORY)
    )
    assert analysis.searched == rewrite
    assert analysis.rewritten_query == ANALYSIS["rewritten_query"]
    assert report.details["standalone_question"] == rewrite
    assert report.details["follow_up"] == "rewritten by the LLM"
    assert '"standalone_question"' in llm.requests[0].system


async def test_an_llm_without_a_standalone_question_falls_back_to_the_heuristic() -> None:
    follow = "And across several gateway replicas?"
    llm = ScriptedLLM(fast=[json.dumps(ANALYSIS)])
    analysis, report = await _stage(llm).run(AnalysisInput("docs", follow, HISTORY))
    assert analysis.analysed and analysis.searched == f"{FIRST} {follow}"
    assert "LLM gave no standalone question" in report.details["follow_up"]


async def test_without_history_the_llms_rephrasing_is_not_searched() -> None:
    llm = ScriptedLLM(fast=[json.dumps({**ANALYSIS, "standalone_question": "Something else?"})])
    analysis, report = await _stage(llm).run(AnalysisInput("docs", FIRST, ()))
    assert analysis.searched == FIRST
    assert "standalone_question" not in report.details
