"""Query analysis: the JSON reply is used; every failure passes the raw query through."""

from __future__ import annotations

import json

import pytest

from groundwire_core.errors import DeadlineExceeded, NotFound, Overloaded
from groundwire_orchestrator.domain import FieldFilter, Turn
from groundwire_orchestrator.stages.analysis import (
    AnalysisInput,
    FilterableFields,
    QueryAnalysisStage,
)
from tests.unit.orchestrator.doubles import FakeRetriever, Scripted, ScriptedLLM

GOOD = {
    "rewritten_query": "rate limit per user API key throttling",
    "hyde_document": "Groundwire limits each API key to a number of requests per minute.",
    "intent": "stop one client from flooding the API",
    "filters": [{"field": "doc_type", "any_of": ["guide"]}, {"field": "colour", "any_of": ["x"]}],
    "negatives": ["loud"],
}


def _stage(
    llm: ScriptedLLM | None, retriever: FakeRetriever | None = None, timeout_s: float = 1.0
) -> QueryAnalysisStage:
    return QueryAnalysisStage(
        llm, FilterableFields(retriever or FakeRetriever()), timeout_s=timeout_s
    )


async def test_valid_json_is_used_and_filters_limited_to_filterable_fields() -> None:
    llm = ScriptedLLM(fast=[f"Here you go:\n```json\n{json.dumps(GOOD)}\n```"])
    analysis, report = await _stage(llm).run(AnalysisInput("docs", "how do I stop flooding"))
    assert analysis.analysed
    assert analysis.rewritten_query == GOOD["rewritten_query"]
    assert analysis.hyde_document == GOOD["hyde_document"]
    assert analysis.filters == (FieldFilter("doc_type", ("guide",)),)
    assert analysis.negatives == ("loud",)
    assert not report.fallback
    assert report.details["filters_dropped"] == "colour"
    request = llm.requests[0]
    assert request.role == "fast"
    assert "doc_type, source_id, title" in request.system
    assert "untrusted data" in request.system
    assert "<query>\nhow do I stop flooding\n</query>" in request.messages[0].content


async def test_history_is_given_as_context() -> None:
    llm = ScriptedLLM(fast=[json.dumps(GOOD)])
    await _stage(llm).run(
        AnalysisInput(
            "docs",
            "and per day?",
            [Turn("user", "limits per minute?"), Turn("assistant", "60 [1].")],
        )
    )
    assert "user: limits per minute?" in llm.requests[0].messages[0].content


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Scripted("not json at all"), "not valid JSON"),
        (Scripted('{"rewritten_query": "x"}'), "did not match the schema (hyde_document"),
        (Scripted('{"rewritten_query": 3, "hyde_document": "y"}'), "did not match the schema"),
        (Scripted(error=Overloaded("overloaded", dependency="llm:fake")), "the LLM failed"),
        (Scripted(error=DeadlineExceeded("timed out", dependency="llm:fake")), "the LLM failed"),
        (Scripted(json.dumps(GOOD), delay_s=1.0), "did not answer within 0.05 s"),
    ],
)
async def test_failures_pass_the_raw_query_through(reply: Scripted, reason: str) -> None:
    stage = _stage(ScriptedLLM(fast=[reply]), timeout_s=0.05)
    analysis, report = await stage.run(AnalysisInput("docs", "raw question"))
    assert not analysis.analysed
    assert analysis.rewritten_query == analysis.hyde_document == "raw question"
    assert report.fallback and reason in report.reason
    assert report.reason.endswith("the raw query is used")


async def test_no_llm_passes_through_without_calling_anything() -> None:
    retriever = FakeRetriever()
    analysis, report = await _stage(None, retriever).run(AnalysisInput("docs", "q"))
    assert not analysis.analysed and report.fallback and report.dependency == "llm"
    assert "no LLM is configured" in report.reason
    assert retriever.describes == []


async def test_unknown_filterable_fields_drop_every_filter() -> None:
    llm = ScriptedLLM(fast=[json.dumps(GOOD)])
    analysis, report = await _stage(llm, FakeRetriever(down=True)).run(AnalysisInput("d", "q"))
    assert analysis.analysed and analysis.filters == ()
    assert report.details["filterable"].startswith("unknown")


async def test_filterable_fields_are_cached_per_collection() -> None:
    now = [0.0]
    retriever = FakeRetriever()
    fields = FilterableFields(retriever, ttl_s=60, clock=lambda: now[0])
    assert "doc_type" in await fields.get("a")
    await fields.get("a")
    await fields.get("b")
    assert retriever.describes == ["a", "b"]
    now[0] = 61.0
    await fields.get("a")
    assert retriever.describes == ["a", "b", "a"]


async def test_missing_collection_raises_from_the_cache() -> None:
    class Missing(FakeRetriever):
        async def describe(self, collection: str):  # type: ignore[no-untyped-def]
            raise NotFound("no such collection")

    with pytest.raises(NotFound):
        await FilterableFields(Missing()).get("nope")
