"""Composes the stages into the two operations the orchestrator serves.

    search: analysis -> retrieval -> rerank -> screening -> [listwise]
    ask:    the same ranking -> numbered sources -> answer (LLM, agentic loop, or
            extractive) -> citation check -> events

Each stage owns its fallback and reports it; the pipeline only wires inputs to
outputs, collects the reports and turns the answer into events. Each stage run is
one span and feeds the stage metrics (see instrumentation).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Literal

from groundwire_core.errors import InvalidInput
from groundwire_orchestrator.agent import AgentToolbox
from groundwire_orchestrator.domain import (
    AnswerDelta,
    AnswerDone,
    AnswerMode,
    AnswerReset,
    AskEvent,
    Candidate,
    CitationsDone,
    FieldFilter,
    NumberedSource,
    QueryAnalysis,
    RetrievalDone,
    SearchOutcome,
    StageReport,
    StagesDone,
    Turn,
    Verification,
    Withheld,
)
from groundwire_orchestrator.fusion import AS_CONFIGURED, FusionChoice
from groundwire_orchestrator.instrumentation import run_stage, stage_span
from groundwire_orchestrator.llm.base import WebSearch
from groundwire_orchestrator.stages.analysis import AnalysisInput, QueryAnalysisStage
from groundwire_orchestrator.stages.answer import (
    AnswerFailed,
    AnswerFinished,
    AnswerInput,
    GroundedAnswerStage,
)
from groundwire_orchestrator.stages.citations import CitationVerifier, VerificationInput
from groundwire_orchestrator.stages.coverage import CoverageInput, CoverageStage
from groundwire_orchestrator.stages.extractive import (
    FLAGGED_ONLY,
    ExtractiveAnswerStage,
    ExtractiveInput,
    SynopsisReader,
    is_synopsis,
)
from groundwire_orchestrator.stages.gate import VerifyBeforeShow
from groundwire_orchestrator.stages.listwise import ListwiseInput, ListwiseRerankStage
from groundwire_orchestrator.stages.live_docs import LiveDocsInput, LiveDocsStage
from groundwire_orchestrator.stages.rerank import RerankInput, RerankStage
from groundwire_orchestrator.stages.retrieval import RetrievalInput, RetrievalStage, SourceReader
from groundwire_orchestrator.stages.screening import ScreeningStage, flag
from groundwire_orchestrator.text.ledger import SourceLedger, clean_markers
from groundwire_orchestrator.text.prompting import DECLINE_PREFIX, fit_sources, is_decline

MAX_QUERY_CHARS = 4000
NOTHING_FOUND = f"{DECLINE_PREFIX}: nothing in the collection matched the question closely enough."


def declined(reason: str) -> str:
    """The decline the reader gets when the coverage stage found the question not
    covered: what was looked for, and why it does not count."""
    return f"{DECLINE_PREFIX}: the collection does not cover this question ({reason})."


@dataclass(frozen=True)
class ChainConfig:
    candidates: int = 50
    """Fused candidates passed to rerank."""
    rerank_keep: int = 20
    answer_sources: int = 8
    """Most excerpts given to the answer."""
    context_tokens: int = 6000
    default_agent_steps: int = 0
    max_agent_steps: int = 4
    search_tool_results: int = 5
    tool_result_tokens: int = 3000
    listwise_reasons: int = 3
    verify_before_show: Literal["auto", "on", "off"] = "off"
    """Hold each sentence until its citations are checked (stages.gate); auto: when
    an nli or llm verifier is ready."""


@dataclass(frozen=True)
class SearchInput:
    collection: str
    query: str
    limit: int = 10
    filters: Sequence[FieldFilter] = ()
    rerank: bool = True
    reasons: bool = False
    """Run the listwise stage (reorder + match reasons)."""
    fusion: FusionChoice = AS_CONFIGURED
    """The request's own fusion; unset parts are the configured ones."""
    group_by_source: bool = False
    """One result per source (document): its best chunk (see RetrievalInput)."""


@dataclass(frozen=True)
class AskInput:
    collection: str
    messages: Sequence[Turn]
    """The conversation; the last message is the user's question."""
    filters: Sequence[FieldFilter] = ()
    listwise: bool = False
    max_agent_steps: int = 0
    """0 = the server's default."""
    instructions: str = ""
    """The operator's extra instructions (placed below the prompt's rules)."""


@dataclass(frozen=True)
class _Answered:
    """How the answer ended: its text (as streamed), mode and stage report."""

    text: str
    mode: AnswerMode
    report: StageReport
    pending: bool = False
    """Not streamed yet: the pipeline sends it as one delta."""


def from_extractive(text: str, report: StageReport, ledger: SourceLedger) -> _Answered:
    """An extractive answer, its markers checked against the ledger like the LLM's (the
    decline when only flagged passages matched is marked declined)."""
    cleaned, _ = clean_markers(text, lambda n: n in ledger)
    return _Answered(cleaned, "declined" if text == FLAGGED_ONLY else "extractive", report, True)


@dataclass(frozen=True)
class _Ranked:
    analysis: QueryAnalysis
    candidates: list[Candidate]
    stages: list[StageReport]


def validate_query(query: str) -> str:
    """The stripped query; raises InvalidInput when empty or too long."""
    stripped = query.strip()
    if not stripped:
        raise InvalidInput("the query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"the query has {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    return stripped


def merge_filters(
    requested: Sequence[FieldFilter], suggested: Sequence[FieldFilter]
) -> tuple[FieldFilter, ...]:
    """The request's filters, plus the analysis' on fields the request leaves open."""
    taken = {f.field for f in requested}
    return (*requested, *(f for f in suggested if f.field not in taken))


class Pipeline:
    def __init__(
        self,
        *,
        analysis: QueryAnalysisStage,
        retrieval: RetrievalStage,
        rerank: RerankStage,
        screening: ScreeningStage,
        listwise: ListwiseRerankStage,
        answer: GroundedAnswerStage | None,
        extractive: ExtractiveAnswerStage,
        verifier: CitationVerifier,
        reader: SourceReader,
        config: ChainConfig,
        coverage: CoverageStage | None = None,
        live_docs: LiveDocsStage | None = None,
    ) -> None:
        self._analysis = analysis
        self._retrieval = retrieval
        self._rerank = rerank
        self._screening = screening
        self._listwise = listwise
        self._answer = answer
        self._extractive = extractive
        self._verifier = verifier
        self._reader = reader
        self._config = config
        self._coverage = coverage
        self._live_docs = live_docs

    @property
    def config(self) -> ChainConfig:
        return self._config

    async def _rerank_and_screen(
        self, query: str, found: list[Candidate], *, rerank: bool, keep: int
    ) -> tuple[list[Candidate], list[StageReport]]:
        """Retrieved candidates through [rerank] and screening, each stage in its span:
        the ranking the operations and the agent's search tool share."""
        reports = []
        if rerank:
            found, report = await run_stage(
                "rerank",
                self._rerank.run(RerankInput(query, found, keep)),
                candidates_in=len(found),
            )
            reports.append(report)
        found, report = await run_stage(
            "screening", self._screening.run(found), candidates_in=len(found)
        )
        reports.append(report)
        return found, reports

    async def _rank(
        self,
        collection: str,
        query: str,
        history: Sequence[Turn],
        filters: Sequence[FieldFilter],
        *,
        rerank: bool,
        listwise: bool,
        keep: int,
        fusion: FusionChoice = AS_CONFIGURED,
        group_by_source: bool = False,
    ) -> _Ranked:
        analysis, report = await run_stage(
            "analysis", self._analysis.run(AnalysisInput(collection, query, history))
        )
        stages = [report]
        merged = merge_filters(filters, analysis.filters)
        hyde = analysis.analysed and analysis.hyde_document != query
        retrieval_input = RetrievalInput(
            collection,
            lexical_query=analysis.rewritten_query,
            dense_query=analysis.hyde_document,
            filters=merged,
            limit=max(keep, self._config.candidates),
            dense_from="hyde" if hyde else "query",
            fusion=fusion,
            group_by_source=group_by_source,
            rerank=rerank,
        )
        found, report = await run_stage("retrieval", self._retrieval.run(retrieval_input))
        if not found and len(merged) > len(filters):
            # the analysis' filters are guesses: when they empty the result, drop them
            retry = RetrievalInput(
                collection,
                retrieval_input.lexical_query,
                retrieval_input.dense_query,
                filters,
                retrieval_input.limit,
                retrieval_input.dense_from,
                fusion,
                group_by_source,
                rerank,
            )
            found, report = await run_stage("retrieval", self._retrieval.run(retry))
            report.details["analysis_filters_dropped"] = "they matched nothing"
        stages.append(report)
        # the cross-encoder scores the question as searched: a follow-up made standalone
        found, reports = await self._rerank_and_screen(
            analysis.searched, found, rerank=rerank, keep=keep
        )
        stages += reports
        if listwise:
            found, report = await run_stage(
                "listwise",
                self._listwise.run(
                    ListwiseInput(analysis, found, reasons=self._config.listwise_reasons)
                ),
                candidates_in=len(found),
            )
            stages.append(report)
        return _Ranked(analysis, found, stages)

    async def search(self, inp: SearchInput) -> SearchOutcome:
        """Ranked candidates for the query. Raises InvalidInput, NotFound, Unavailable."""
        query = validate_query(inp.query)
        ranked = await self._rank(
            inp.collection,
            query,
            (),
            inp.filters,
            rerank=inp.rerank,
            listwise=inp.reasons,
            keep=inp.limit,
            fusion=inp.fusion,
            group_by_source=inp.group_by_source,
        )
        return SearchOutcome(tuple(ranked.candidates[: inp.limit]), tuple(ranked.stages))

    def _agent_steps(self, requested: int) -> int:
        steps = requested or self._config.default_agent_steps
        return max(0, min(steps, self._config.max_agent_steps))

    def _toolbox(self, inp: AskInput, ledger: SourceLedger) -> AgentToolbox:
        async def searcher(query: str) -> list[Candidate]:
            # the agent's query goes through the same stages as the request's, with
            # their spans and metrics (its reports are not the response's stages)
            retrieval_input = RetrievalInput(
                inp.collection, query, query, inp.filters, self._config.candidates
            )
            found, _ = await run_stage("retrieval", self._retrieval.run(retrieval_input))
            found, _ = await self._rerank_and_screen(
                query, found, rerank=True, keep=self._config.rerank_keep
            )
            return found

        return AgentToolbox(
            searcher=searcher,
            reader=self._reader,
            ledger=ledger,
            collection=inp.collection,
            search_results=self._config.search_tool_results,
            result_tokens=self._config.tool_result_tokens,
        )

    def _synopsis_reader(
        self, collection: str, ledger: SourceLedger
    ) -> tuple[SynopsisReader, list[NumberedSource]]:
        """What the extractive answer calls for a page's synopsis parts (screened like
        any excerpt, numbered in ``ledger``), and the list the new sources it numbered
        are put in (to be sent as sources before the answer cites them)."""
        added: list[NumberedSource] = []

        async def read(source_id: str) -> list[NumberedSource]:
            stored = await self._reader.read(collection, source_id, "synopsis usage")
            parts = [flag(c) for c in stored if is_synopsis(c)]
            added.extend(ledger.add(parts))
            return [s for c in parts if (n := ledger.number_of(c.chunk_id)) is not None
                    and (s := ledger.get(n)) is not None]

        return read, added

    async def _write(
        self,
        inp: AskInput,
        question: str,
        searched: str,
        history: Sequence[Turn],
        ledger: SourceLedger,
        web_search: WebSearch | None = None,
    ) -> AsyncIterator[AnswerDelta | AnswerReset | RetrievalDone | _Answered]:
        """The answer's events, then one _Answered: the LLM's answer (with the agent's
        tools when steps are allowed), or the extractive one when there is no LLM or it
        failed (a reset first when it had streamed text). The LLM gets ``question`` with
        the conversation; the extractive answer, which sees no conversation, scores its
        sentences against ``searched`` (the standalone question)."""
        read, read_sources = self._synopsis_reader(inp.collection, ledger)
        if self._answer is None:
            text, report = await self._extractive.run(
                ExtractiveInput(
                    searched,
                    ledger.sources,
                    "no LLM is configured: extractive answer",
                    read_synopsis=read,
                )
            )
            if read_sources:
                yield RetrievalDone(tuple(read_sources))
            yield from_extractive(text, report, ledger)
            return
        steps = self._agent_steps(inp.max_agent_steps)
        if not len(ledger) and steps == 0 and web_search is None:
            report = StageReport("answer", 0.0, details={"sources": "0", "skipped": "no excerpts"})
            yield _Answered("", "declined", report)
            return
        toolbox = self._toolbox(inp, ledger) if steps else None
        answer_input = AnswerInput(
            question, history, ledger, steps, toolbox, inp.instructions, web_search
        )
        async for event in self._answer.run(answer_input):
            if isinstance(event, AnswerFinished):
                if event.dropped_citations:
                    event.report.details["dropped_citations"] = ", ".join(
                        str(n) for n in event.dropped_citations
                    )
                yield _Answered(event.text, "generated", event.report)
                return
            if isinstance(event, AnswerFailed):
                error = event.error
                if event.streamed:
                    yield AnswerReset(f"the language model failed: {error.message}")
                text, report = await self._extractive.run(
                    ExtractiveInput(
                        searched,
                        ledger.sources,
                        f"the LLM failed ({error.message}): extractive answer",
                        error.dependency or "llm",
                        read_synopsis=read,
                    )
                )
                report.details.update(event.details)
                if read_sources:
                    yield RetrievalDone(tuple(read_sources))
                yield from_extractive(text, report, ledger)
                return
            yield event

    async def ask(self, inp: AskInput) -> AsyncIterator[AskEvent]:
        """Answers the last message: sources first, then the answer text (deltas, resets,
        more sources from the agent's tools), citations, stages, done. Raises
        InvalidInput, NotFound, Unavailable (before any event)."""
        if not inp.messages or inp.messages[-1].role != "user":
            raise InvalidInput("the last message must be from the user")
        question = validate_query(inp.messages[-1].content)
        history = list(inp.messages[:-1])
        ranked = await self._rank(
            inp.collection,
            question,
            history,
            inp.filters,
            rerank=True,
            listwise=inp.listwise,
            keep=self._config.rerank_keep,
        )
        stages = ranked.stages
        candidates = ranked.candidates
        web_search: WebSearch | None = None
        declined_because = ""  # what the coverage stage looked for, when it declined
        if self._coverage is not None:
            # a question the collection does not cover is declined from calibrated
            # evidence: the empty ledger below becomes the normal decline
            reranked = any(s.name == "rerank" and not s.fallback for s in stages)
            coverage, report = await run_stage(
                "coverage",
                self._coverage.run(CoverageInput(ranked.analysis.searched, candidates, reranked)),
                candidates_in=len(candidates),
            )
            stages.append(report)
            if coverage.covered:
                pass
            elif self._coverage.acts(llm=self._answer is not None):
                candidates = []
                declined_because = coverage.decline_reason()
            else:
                report.details["acted"] = "no: the LLM writing the answer may decline"
            if self._live_docs is not None and self._live_docs.enabled:
                # not covered but in-domain: look it up on the collection's own sites
                live, report = await run_stage(
                    "live_docs",
                    self._live_docs.run(
                        LiveDocsInput(
                            inp.collection, ranked.analysis.searched, coverage, ranked.candidates
                        )
                    ),
                    candidates_in=len(ranked.candidates),
                )
                stages.append(report)
                web_search = live.search
                if live.candidates:
                    screened, screening = await self._screening.run(live.candidates)
                    report.details["flagged"] = screening.details.get("flagged", "0")
                    candidates = [*screened, *candidates]
        ledger = SourceLedger()
        ledger.add(c for c in candidates[: self._config.answer_sources])
        fitted, tokens = fit_sources(ledger.sources, self._config.context_tokens)
        if len(fitted) < len(ledger):
            ledger = SourceLedger()
            ledger.add(s.candidate for s in fitted)
        yield RetrievalDone(tuple(ledger.sources))

        answered: _Answered | None = None
        verify = self._config.verify_before_show
        verify_first = verify == "on" or (verify == "auto" and await self._verifier.proves_now())
        gate = VerifyBeforeShow(self._verifier, ledger.get) if verify_first else None
        with stage_span("answer", candidates_in=len(ledger), tokens=tokens) as answer_span:
            async for event in answer_span.steps(
                self._write(inp, question, ranked.analysis.searched, history, ledger, web_search)
            ):
                if isinstance(event, _Answered):
                    answered = event
                else:
                    for shown in await gate.pass_event(event) if gate else [event]:
                        yield shown
            assert answered is not None
            text, mode, report = answered.text, answered.mode, answered.report
            report.details["context_tokens"] = str(tokens)
            answer_span.record(report, tokens=tokens)
        stages.append(report)
        if mode == "declined":
            gate = None  # a decline bypasses the gate (only flagged passages matched)
        if answered.pending and text:  # not streamed by anyone: it is one piece
            piece = AnswerDelta(text)
            for shown in await gate.pass_event(piece) if gate else [piece]:
                yield shown
        withheld: tuple[Withheld, ...] = ()
        if gate is not None and not gate.holds:
            gate = None  # no answer text went through it
        if gate is not None:
            # verify before show: the deltas were checked as they came
            events, citations_report = await run_stage("citations", gate.close())
            for shown in events:
                yield shown
            text, withheld = gate.text, gate.withheld
            mode = "declined" if gate.declined else mode

        if not text:
            text = (
                declined(declined_because)
                if declined_because and not candidates
                else (NOTHING_FOUND)
            )
            yield AnswerDelta(text)
            mode = "declined"
        if mode == "generated" and is_decline(text):
            mode = "declined"
        if gate is not None:
            citations = () if mode == "declined" else gate.citations
        else:
            # a decline cites nothing: attaching sources to it would suggest they support it
            citations, citations_report = await run_stage(
                "citations",
                self._verifier.run(
                    VerificationInput("" if mode == "declined" else text, ledger.get)
                ),
            )
        if mode == "generated" and not citations:
            mode = "declined"  # nothing in an uncited answer is grounded
        cited = sorted({c.number for c in citations})
        sources = tuple(s for n in cited if (s := ledger.get(n)) is not None)
        stages.append(citations_report)
        yield CitationsDone(sources, citations, withheld)
        yield StagesDone(tuple(stages))
        unsupported = sum(
            c.status in (Verification.UNSUPPORTED, Verification.UNRELATED) for c in citations
        )
        yield AnswerDone(mode, text, unsupported)
