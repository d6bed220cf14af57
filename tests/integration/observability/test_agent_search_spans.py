"""The agent's search tool runs the pipeline's own ranking stages (retrieval, rerank,
screening), each one span under the answer's span, feeding the stage metrics."""

from __future__ import annotations

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from groundwire_orchestrator.domain import AnswerDone, Turn
from groundwire_orchestrator.llm.base import ToolCall
from groundwire_orchestrator.llm.observed import ObservedLLM
from groundwire_orchestrator.pipeline import AskInput
from tests.integration.observability.test_stage_telemetry import (
    QUESTION,
    make_pipeline,
    sample,
    tracer,
)
from tests.unit.orchestrator.doubles import FakeReranker, Scripted, ScriptedLLM

RANKING = ("retrieval", "rerank", "screening")


async def test_the_agents_search_runs_the_ranking_stages_under_the_answer_span(
    spans: InMemorySpanExporter,
) -> None:
    call = ToolCall("t1", "search", {"query": "prune roses winter"})
    llm = ObservedLLM(
        ScriptedLLM(
            fast=[Scripted("not json")],
            strong=[Scripted("Checking.", tool_calls=[call]), Scripted("Prune in winter [2].")],
        ),
        ("fake",),
    )
    queries: list[str] = []

    def score(query: str, passage: str) -> float:
        queries.append(query)
        return 0.9

    before = {s: sample("groundwire_stage_duration_seconds_count", stage=s) for s in RANKING}
    pipeline = make_pipeline(llm, FakeReranker(scores=score))
    with tracer.start_as_current_span("rpc"):
        events = [
            e
            async for e in pipeline.ask(
                AskInput("docs", [Turn("user", QUESTION)], max_agent_steps=1)
            )
        ]
    assert isinstance(events[-1], AnswerDone)
    assert "prune roses winter" in queries  # the agent's query reached the reranker

    finished = spans.get_finished_spans()
    [answer] = [s for s in finished if s.name == "stage.answer"]
    for stage in RANKING:
        runs = [s for s in finished if s.name == f"stage.{stage}"]
        assert len(runs) == 2, f"{stage}: the request's run and the agent's search"
        parents = sorted(s.parent.span_id for s in runs if s.parent is not None)
        assert answer.context.span_id in parents
        assert sample("groundwire_stage_duration_seconds_count", stage=stage) - before[stage] == 2
