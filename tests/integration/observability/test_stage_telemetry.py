"""The chain's stage spans, LLM spans and stage/LLM metrics, with the orchestrator's
real stages and LLM wrapper over in-process fakes (tests/unit/orchestrator/doubles):
one span per stage under the caller's span, the report's attributes on it, each LLM
call a span under the stage that made it, and the Prometheus series they feed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from prometheus_client import REGISTRY

from groundwire_core.errors import Unavailable
from groundwire_orchestrator.domain import AnswerDone, AskEvent, StageReport, StagesDone, Turn
from groundwire_orchestrator.llm.base import ChatMessage, LLMRequest, StreamEvent, TextDelta
from groundwire_orchestrator.llm.failover import FailoverLLM
from groundwire_orchestrator.llm.observed import ObservedLLM
from groundwire_orchestrator.pipeline import AskInput, ChainConfig, Pipeline
from groundwire_orchestrator.stages.analysis import FilterableFields, QueryAnalysisStage
from groundwire_orchestrator.stages.answer import GroundedAnswerStage
from groundwire_orchestrator.stages.citations import CitationVerifier
from groundwire_orchestrator.stages.extractive import ExtractiveAnswerStage
from groundwire_orchestrator.stages.listwise import ListwiseRerankStage
from groundwire_orchestrator.stages.rerank import RerankStage
from groundwire_orchestrator.stages.retrieval import RetrievalParams, RetrievalStage, SourceReader
from groundwire_orchestrator.stages.screening import ScreeningStage
from tests.unit.orchestrator.doubles import (
    FakeEmbedder,
    FakeReranker,
    FakeRetriever,
    Scripted,
    ScriptedLLM,
    chunk,
)

CORPUS = [
    chunk(1, "Boil the spaghetti in salted water for nine minutes.", source="pasta.md"),
    chunk(2, "Prune roses in late winter above an outward bud.", source="roses.md"),
    chunk(3, "Spaghetti and other pasta cook faster at sea level.", source="more-pasta.md"),
]
ANSWER = ["Spaghetti boils for ", "nine minutes [1]."]
QUESTION = "how long does spaghetti boil"
tracer = trace.get_tracer("tests.observability")


def answering_llm() -> ObservedLLM:
    """No analysis JSON (the analysis falls back), then the answer citing [1]."""
    return ObservedLLM(
        ScriptedLLM(fast=[Scripted("not json")], strong=[Scripted(ANSWER)]), ("fake",)
    )


def make_pipeline(llm: ObservedLLM, reranker: FakeReranker | None = None) -> Pipeline:
    embedder = FakeEmbedder()
    retriever = FakeRetriever(list(CORPUS))
    return Pipeline(
        analysis=QueryAnalysisStage(llm, FilterableFields(retriever), timeout_s=1.0),
        retrieval=RetrievalStage(embedder, retriever, RetrievalParams(dense_floor=0.05)),
        rerank=RerankStage(
            reranker or FakeReranker(scores=lambda q, p: 0.9),
            candidates=50,
            keep=20,
            threshold=0.5,
            timeout_s=1.0,
        ),
        screening=ScreeningStage(),
        listwise=ListwiseRerankStage(llm, top_k=10, timeout_s=1.0),
        answer=GroundedAnswerStage(
            llm, timeout_s=5, max_tokens=400, context_tokens=3000, history_tokens=500
        ),
        extractive=ExtractiveAnswerStage(embedder),
        verifier=CitationVerifier(embedder, threshold=0.3),
        reader=SourceReader(embedder, retriever, max_chunks=50),
        config=ChainConfig(answer_sources=5),
    )


async def ask(pipeline: Pipeline) -> tuple[list[AskEvent], ReadableSpan | None]:
    """The chain's events, asked inside a root span (as the RPC's span would be)."""
    with tracer.start_as_current_span("rpc") as root:
        events = [e async for e in pipeline.ask(AskInput("docs", [Turn("user", QUESTION)]))]
    return events, root  # type: ignore[return-value]


def reports(events: Sequence[AskEvent]) -> dict[str, StageReport]:
    [done] = [e for e in events if isinstance(e, StagesDone)]
    return {s.name: s for s in done.stages}


def only(spans: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = [s for s in spans.get_finished_spans() if s.name == name]
    assert len(found) == 1, f"{name}: {[s.name for s in spans.get_finished_spans()]}"
    return found[0]


def attrs(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


STAGES = ("analysis", "retrieval", "rerank", "screening", "answer", "citations")


async def test_each_stage_is_one_span_carrying_its_report(spans: InMemorySpanExporter) -> None:
    llm = answering_llm()
    latency = {s: sample("groundwire_stage_duration_seconds_count", stage=s) for s in STAGES}
    # invalid JSON is the model's fault, not a dependency's: the label says "none"
    fallbacks = sample("groundwire_stage_fallbacks_total", stage="analysis", dependency="none")
    events, root = await ask(make_pipeline(llm))
    assert isinstance(events[-1], AnswerDone) and events[-1].mode == "generated"
    by_name = reports(events)
    assert root is not None

    for stage in STAGES:
        span = only(spans, f"stage.{stage}")
        assert span.parent is not None and span.parent.span_id == root.context.span_id
        assert span.context.trace_id == root.context.trace_id
        report = by_name[stage]
        assert attrs(span)["groundwire.stage.name"] == stage
        assert attrs(span)["groundwire.stage.fallback"] == report.fallback
        assert attrs(span)["groundwire.stage.ms"] == round(report.ms, 3)
        for key, value in report.details.items():
            assert attrs(span)[f"groundwire.stage.detail.{key}"] == value
        assert sample("groundwire_stage_duration_seconds_count", stage=stage) - latency[stage] == 1

    # the analysis got no JSON: its fallback, why, and the metric
    analysis = attrs(only(spans, "stage.analysis"))
    assert analysis["groundwire.stage.fallback"] is True
    assert analysis["groundwire.stage.reason"] == by_name["analysis"].reason != ""
    assert analysis["groundwire.stage.dependency"] == "" == by_name["analysis"].dependency
    assert sample("groundwire_stage_fallbacks_total", stage="analysis", dependency="none") == (
        fallbacks + 1
    )
    # candidates flow from stage to stage
    retrieval = attrs(only(spans, "stage.retrieval"))
    rerank = attrs(only(spans, "stage.rerank"))
    screening = attrs(only(spans, "stage.screening"))
    assert retrieval["groundwire.stage.candidates_out"] == rerank["groundwire.stage.candidates_in"]
    assert rerank["groundwire.stage.candidates_in"] == int(
        by_name["rerank"].details["candidates_in"]
    )
    assert rerank["groundwire.stage.candidates_out"] == int(
        by_name["rerank"].details["candidates_out"]
    )
    assert rerank["groundwire.stage.candidates_out"] == screening["groundwire.stage.candidates_in"]
    answer = attrs(only(spans, "stage.answer"))
    assert answer["groundwire.stage.tokens"] == int(by_name["answer"].details["context_tokens"]) > 0
    assert answer["groundwire.stage.fallback"] is False


async def test_each_llm_call_is_a_span_under_the_stage_that_made_it(
    spans: InMemorySpanExporter,
) -> None:
    llm = answering_llm()
    calls = sample("groundwire_llm_calls_total", provider="fake", role="strong", outcome="ok")
    await ask(make_pipeline(llm))
    llm_spans = [s for s in spans.get_finished_spans() if s.name == "llm.fake"]
    assert len(llm_spans) == 2
    parents = {
        only(spans, f"stage.{stage}").context.span_id: stage for stage in ("analysis", "answer")
    }
    by_role = {attrs(s)["groundwire.llm.role"]: s for s in llm_spans}
    fast, strong = by_role["fast"], by_role["strong"]
    assert fast.parent is not None and parents[fast.parent.span_id] == "analysis"
    assert strong.parent is not None and parents[strong.parent.span_id] == "answer"
    assert attrs(fast)["groundwire.llm.stream"] is False
    assert attrs(fast)["groundwire.llm.output_chars"] == len("not json")
    assert attrs(strong)["groundwire.llm.stream"] is True
    assert attrs(strong)["groundwire.llm.outcome"] == "ok"
    assert attrs(strong)["gen_ai.provider.name"] == "fake"
    assert attrs(strong)["groundwire.llm.output_chars"] == len("".join(ANSWER))
    # four characters a token, rounded up
    assert attrs(strong)["groundwire.llm.output_tokens_estimate"] == 10 == -(-37 // 4)
    assert attrs(strong)["groundwire.llm.first_event_ms"] >= 0  # type: ignore[operator]
    assert strong.status.status_code != StatusCode.ERROR
    after = sample("groundwire_llm_calls_total", provider="fake", role="strong", outcome="ok")
    assert after - calls == 1


async def test_a_failed_llm_answer_is_an_error_span_and_an_extractive_fallback(
    spans: InMemorySpanExporter,
) -> None:
    down = Unavailable("the fake API is down", dependency="llm:fake")
    llm = ObservedLLM(
        ScriptedLLM(fast=[Scripted("not json")], strong=[Scripted(error=down)]), ("fake",)
    )
    failed = sample(
        "groundwire_llm_calls_total", provider="fake", role="strong", outcome="unavailable"
    )
    answer_fallbacks = sample(
        "groundwire_stage_fallbacks_total", stage="answer", dependency="llm:fake"
    )
    events, _ = await ask(make_pipeline(llm))
    assert isinstance(events[-1], AnswerDone) and events[-1].mode == "extractive"
    [strong] = [
        s for s in spans.get_finished_spans() if attrs(s).get("groundwire.llm.role") == "strong"
    ]
    assert strong.name == "llm.fake"
    assert strong.status.status_code == StatusCode.ERROR
    assert attrs(strong)["groundwire.llm.outcome"] == "unavailable"
    assert attrs(strong)["error.type"] == "unavailable"
    answer = attrs(only(spans, "stage.answer"))
    assert answer["groundwire.stage.fallback"] is True
    assert answer["groundwire.stage.dependency"] == "llm:fake"
    assert "the LLM failed" in str(answer["groundwire.stage.reason"])
    assert (
        sample("groundwire_llm_calls_total", provider="fake", role="strong", outcome="unavailable")
        - failed
        == 1
    )
    assert (
        sample("groundwire_stage_fallbacks_total", stage="answer", dependency="llm:fake")
        - answer_fallbacks
        == 1
    )


async def test_a_reranker_that_is_down_is_the_rerank_spans_fallback(
    spans: InMemorySpanExporter,
) -> None:
    llm = answering_llm()
    reranker = FakeReranker(load_error=Unavailable("no reranker", dependency="reranker"))
    before = sample("groundwire_stage_fallbacks_total", stage="rerank", dependency="reranker")
    await ask(make_pipeline(llm, reranker))
    rerank = attrs(only(spans, "stage.rerank"))
    assert rerank["groundwire.stage.fallback"] is True
    assert rerank["groundwire.stage.dependency"] == "reranker"
    assert rerank["groundwire.stage.reason"] == "no reranker"
    assert rerank["groundwire.stage.candidates_out"] == rerank["groundwire.stage.candidates_in"]
    after = sample("groundwire_stage_fallbacks_total", stage="rerank", dependency="reranker")
    assert after - before == 1


async def test_the_span_names_the_provider_that_served_after_a_failover(
    spans: InMemorySpanExporter,
) -> None:
    first = ScriptedLLM(
        default_fast=Scripted(error=Unavailable("down", dependency="llm:a")), name="a"
    )
    second = ScriptedLLM(default_fast="hello", name="b")
    llm = ObservedLLM(FailoverLLM([first, second]), ("a", "b"))
    request = LLMRequest(system="", messages=(ChatMessage("user", "hi"),), role="fast")
    assert await llm.complete(request, timeout_s=5) == "hello"
    [span] = [s for s in spans.get_finished_spans() if s.name.startswith("llm")]
    assert span.name == "llm.b"
    assert attrs(span)["groundwire.llm.providers"] == "a,b"
    assert attrs(span)["gen_ai.provider.name"] == "b"


async def test_a_stream_closed_early_ends_its_span_as_cancelled(
    spans: InMemorySpanExporter,
) -> None:
    llm = ObservedLLM(ScriptedLLM(strong=[Scripted(["one ", "two ", "three"])]), ("fake",))
    request = LLMRequest(system="", messages=(ChatMessage("user", "hi"),))
    stream = llm.stream(request, timeout_s=5)
    assert spans.get_finished_spans() == ()  # open while the stream is
    await anext(stream)
    await stream.aclose()
    [span] = spans.get_finished_spans()
    assert span.name == "llm.fake"
    assert attrs(span)["groundwire.llm.outcome"] == "cancelled"
    assert attrs(span)["groundwire.llm.output_chars"] == len("one ")
    assert span.status.status_code != StatusCode.ERROR


class SpyProvider:
    """An LLMProvider that notes the span current while it works, and starts its own
    span the way the anthropic SDK does (so warm-up tracing can be seen)."""

    name = "spy"

    def __init__(self) -> None:
        self.current: list[trace.Span] = []

    async def stream(self, request: LLMRequest, *, timeout_s: float) -> AsyncIterator[StreamEvent]:
        self.current.append(trace.get_current_span())
        yield TextDelta("streamed")

    async def complete(self, request: LLMRequest, *, timeout_s: float) -> str:
        self.current.append(trace.get_current_span())
        return "completed"

    async def warm_up(self) -> None:
        with tracer.start_as_current_span("sdk.rehearsal"):
            pass

    async def aclose(self) -> None:
        pass


async def test_the_llm_span_is_current_while_the_provider_works(
    spans: InMemorySpanExporter,
) -> None:
    spy = SpyProvider()
    llm = ObservedLLM(spy, ("spy",))
    request = LLMRequest(system="", messages=(ChatMessage("user", "hi"),))
    assert await llm.complete(request, timeout_s=5) == "completed"
    assert [e async for e in llm.stream(request, timeout_s=5)] == [TextDelta("streamed")]
    finished = {s.context.span_id: s for s in spans.get_finished_spans()}
    assert [finished[c.get_span_context().span_id].name for c in spy.current] == [
        "llm.spy",
        "llm.spy",
    ]
    assert {
        attrs(finished[c.get_span_context().span_id])["groundwire.llm.stream"] for c in spy.current
    } == {
        False,
        True,
    }


async def test_the_warm_up_rehearsal_is_not_traced(spans: InMemorySpanExporter) -> None:
    await ObservedLLM(SpyProvider(), ("spy",)).warm_up()
    assert spans.get_finished_spans() == ()
    # the same span outside the warm-up is recorded: the test can see one
    with tracer.start_as_current_span("sdk.rehearsal"):
        pass
    assert [s.name for s in spans.get_finished_spans()] == ["sdk.rehearsal"]
