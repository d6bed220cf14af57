"""gRPC transport of the orchestrator: convert, run the pipeline, convert back; and the
wiring of the stages from settings."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence

import grpc

from groundwire.embedder.v1 import embedder_pb2
from groundwire.orchestrator.v1 import orchestrator_pb2, orchestrator_pb2_grpc
from groundwire.reranker.v1 import reranker_pb2
from groundwire.retriever.v1 import retriever_pb2
from groundwire_core.clients.embedder import EmbedderClient
from groundwire_core.errors import GroundwireError, InvalidInput
from groundwire_core.grpc.client import check_health, create_channel
from groundwire_core.grpc.errors import to_error_info
from groundwire_orchestrator import convert, usage
from groundwire_orchestrator.clients.llm import ObservedLLM, build_llm
from groundwire_orchestrator.clients.reranker import RerankerClient
from groundwire_orchestrator.clients.retriever import RetrieverClient
from groundwire_orchestrator.llm.base import LLMProvider
from groundwire_orchestrator.pipeline import AskInput, ChainConfig, Pipeline, SearchInput
from groundwire_orchestrator.settings import OrchestratorSettings
from groundwire_orchestrator.stages.analysis import FilterableFields, QueryAnalysisStage
from groundwire_orchestrator.stages.answer import GroundedAnswerStage
from groundwire_orchestrator.stages.citations import CitationVerifier
from groundwire_orchestrator.stages.extractive import ExtractiveAnswerStage
from groundwire_orchestrator.stages.listwise import ListwiseRerankStage
from groundwire_orchestrator.stages.passages import PassageVectors
from groundwire_orchestrator.stages.rerank import RerankStage
from groundwire_orchestrator.stages.retrieval import RetrievalParams, RetrievalStage, SourceReader
from groundwire_orchestrator.stages.screening import ScreeningStage

DEFAULT_LIMIT = 10
MAX_LIMIT = 50
READ_DOCUMENT_MAX_CHUNKS = 200
# Each dependency's own health name: its readiness, which a dependency check (the
# retriever's Qdrant) can turn NOT_SERVING while "" stays SERVING.
_HEALTH_NAMES = {
    "embedder": embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"].full_name,
    "retriever": retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name,
    "reranker": reranker_pb2.DESCRIPTOR.services_by_name["RerankerService"].full_name,
}


def build_pipeline(
    settings: OrchestratorSettings,
    *,
    embedder: EmbedderClient,
    retriever: RetrieverClient,
    reranker: RerankerClient | None,
    llm: LLMProvider | None,
    query_embedder: EmbedderClient | None = None,
) -> Pipeline:
    """Every stage configured from ``settings``; opens nothing. ``query_embedder``
    embeds queries (``embedder`` when None; passages always go to ``embedder``)."""
    s = settings
    query = query_embedder or embedder
    passages = PassageVectors(embedder)  # chunk-text vectors, shared by two stages
    answer = (
        GroundedAnswerStage(
            llm,
            timeout_s=s.answer_timeout_s,
            max_tokens=s.answer_max_tokens,
            context_tokens=s.answer_context_tokens,
            history_tokens=s.answer_history_tokens,
        )
        if llm is not None
        else None
    )
    return Pipeline(
        analysis=QueryAnalysisStage(
            llm, FilterableFields(retriever), timeout_s=s.analysis_timeout_s
        ),
        retrieval=RetrievalStage(
            query,
            retriever,
            RetrievalParams(path_limit=s.path_limit, rrf_k=s.rrf_k, dense_floor=s.dense_floor),
        ),
        rerank=RerankStage(
            reranker,
            candidates=s.candidates,
            keep=s.rerank_keep,
            threshold=s.rerank_threshold,
            timeout_s=s.rerank_timeout_s,
            budget_ms=s.rerank_budget_ms,
            min_candidates=s.rerank_min_candidates,
            info_ttl_s=s.reranker_info_ttl_s,
        ),
        screening=ScreeningStage(),
        listwise=ListwiseRerankStage(
            llm, top_k=s.listwise_top_k, timeout_s=s.listwise_timeout_s
        ),
        answer=answer,
        extractive=ExtractiveAnswerStage(
            query, min_score=s.extractive_min_score, passages=passages
        ),
        verifier=CitationVerifier(
            embedder, threshold=s.citation_support_threshold, passages=passages
        ),
        reader=SourceReader(query, retriever, max_chunks=READ_DOCUMENT_MAX_CHUNKS),
        config=ChainConfig(
            candidates=s.candidates,
            rerank_keep=s.rerank_keep,
            answer_sources=s.answer_sources,
            context_tokens=s.answer_context_tokens,
            default_agent_steps=s.agent_steps,
            max_agent_steps=s.agent_steps_max,
            search_tool_results=s.agent_search_results,
            tool_result_tokens=s.agent_result_tokens,
            listwise_reasons=s.listwise_reasons,
        ),
    )


class OrchestratorService(orchestrator_pb2_grpc.OrchestratorServiceServicer):
    name = "orchestrator"
    service_names: Sequence[str] = (
        orchestrator_pb2.DESCRIPTOR.services_by_name["OrchestratorService"].full_name,
    )

    def __init__(
        self, settings: OrchestratorSettings, *, llm: LLMProvider | None = None
    ) -> None:
        """``llm`` replaces the providers the settings describe (tests inject one)."""
        self._settings = settings
        self._injected_llm = llm
        self._llm: ObservedLLM | None = None
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._pipeline: Pipeline | None = None

    def register(self, server: grpc.aio.Server) -> None:
        orchestrator_pb2_grpc.add_OrchestratorServiceServicer_to_server(self, server)

    async def start(self) -> None:
        s = self._settings
        if self._injected_llm is not None:
            self._llm = ObservedLLM(self._injected_llm, (self._injected_llm.name,))
        else:
            self._llm = build_llm(s)
        if self._llm is not None:
            await self._llm.warm_up()  # before SERVING: SDK setup must not eat a deadline
        self._channels = {
            "embedder": create_channel(s.embedder_addr),
            "retriever": create_channel(s.retriever_addr),
        }
        if s.reranker_addr:
            self._channels["reranker"] = create_channel(s.reranker_addr)
        self._pipeline = build_pipeline(
            s,
            embedder=EmbedderClient(self._channels["embedder"], timeout_s=s.call_timeout_s),
            query_embedder=EmbedderClient(
                self._channels["embedder"],
                timeout_s=min(s.embedder_query_timeout_s, s.call_timeout_s),
            ),
            retriever=RetrieverClient(self._channels["retriever"], timeout_s=s.call_timeout_s),
            reranker=(
                RerankerClient(self._channels["reranker"]) if "reranker" in self._channels else None
            ),
            llm=self._llm,
        )

    async def stop(self) -> None:
        await asyncio.gather(*(c.close() for c in self._channels.values()))
        if self._llm is not None:
            await self._llm.aclose()

    async def check(self) -> None:
        """Nothing to re-check: each stage falls back or names the dependency it lost
        in the request's own error, and every replica shares the same dependencies,
        so taking this one out of rotation would help no caller."""

    @property
    def pipeline(self) -> Pipeline:
        if self._pipeline is None:
            raise RuntimeError("the orchestrator is not started")
        return self._pipeline

    async def Search(
        self, request: orchestrator_pb2.SearchRequest, context: grpc.aio.ServicerContext
    ) -> orchestrator_pb2.SearchResponse:
        if request.limit > MAX_LIMIT:
            raise InvalidInput(f"limit must be at most {MAX_LIMIT}")
        with usage.metered() as spent:
            outcome = await self.pipeline.search(
                SearchInput(
                    collection=request.collection,
                    query=request.query,
                    limit=request.limit or DEFAULT_LIMIT,
                    filters=convert.filters_from_proto(request.filters),
                    rerank=request.rerank,
                    reasons=request.reasons,
                )
            )
        return orchestrator_pb2.SearchResponse(
            results=convert.sources_to_proto(outcome.candidates),
            stages=[convert.stage_to_proto(s) for s in outcome.stages],
            llm_usage=convert.usage_to_proto(spent),
        )

    async def Ask(
        self, request: orchestrator_pb2.AskRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[orchestrator_pb2.AskEvent]:
        # before any work, as a status (INVALID_ARGUMENT): a 20 MB history used to be
        # accepted and carried through every stage
        size = len(request.instructions.encode()) + sum(
            len(m.content.encode()) for m in request.messages
        )
        if size > self._settings.ask_max_bytes:
            raise InvalidInput(
                f"the messages and instructions have {size} bytes; the limit is "
                f"{self._settings.ask_max_bytes}"
            )
        try:
            events = self.pipeline.ask(
                AskInput(
                    collection=request.collection,
                    messages=convert.turns_from_proto(request.messages),
                    filters=convert.filters_from_proto(request.filters),
                    listwise=request.listwise_rerank,
                    max_agent_steps=request.max_agent_steps,
                    instructions=request.instructions,
                )
            )
            async for event in events:
                yield convert.event_to_proto(event)
        except GroundwireError as error:
            yield orchestrator_pb2.AskEvent(error=to_error_info(error))

    def _llm_dependency(self) -> orchestrator_pb2.Dependency:
        llm = self._llm
        if llm is None:
            return orchestrator_pb2.Dependency(
                name="llm",
                status=orchestrator_pb2.DEPENDENCY_STATUS_DISABLED,
                message="no LLM is configured: answers are extractive",
            )
        target = " > ".join(llm.names)
        last = llm.last
        if last is None or last.ok:
            message = (
                "configured; not called yet"
                if last is None
                else f"last call succeeded {time.monotonic() - last.at:.0f} s ago"
            )
            return orchestrator_pb2.Dependency(
                name="llm",
                status=orchestrator_pb2.DEPENDENCY_STATUS_SERVING,
                target=target,
                message=message,
            )
        return orchestrator_pb2.Dependency(
            name="llm",
            status=orchestrator_pb2.DEPENDENCY_STATUS_NOT_SERVING,
            target=target,
            message=f"last call failed {time.monotonic() - last.at:.0f} s ago: {last.message}",
        )

    async def Dependencies(
        self, request: orchestrator_pb2.DependenciesRequest, context: grpc.aio.ServicerContext
    ) -> orchestrator_pb2.DependenciesResponse:
        s = self._settings
        targets = {
            "embedder": s.embedder_addr,
            "retriever": s.retriever_addr,
            "reranker": s.reranker_addr or "",
        }

        async def probe(name: str) -> orchestrator_pb2.Dependency:
            channel = self._channels.get(name)
            if channel is None:
                return orchestrator_pb2.Dependency(
                    name=name,
                    status=orchestrator_pb2.DEPENDENCY_STATUS_DISABLED,
                    message="not configured",
                )
            ok, ms, reason = await check_health(channel, _HEALTH_NAMES[name], timeout_s=1.0)
            return orchestrator_pb2.Dependency(
                name=name,
                status=(
                    orchestrator_pb2.DEPENDENCY_STATUS_SERVING
                    if ok
                    else orchestrator_pb2.DEPENDENCY_STATUS_NOT_SERVING
                ),
                target=targets[name],
                latency_ms=ms,
                message=reason,
            )

        deps = await asyncio.gather(*(probe(n) for n in targets))
        return orchestrator_pb2.DependenciesResponse(
            dependencies=[*deps, self._llm_dependency()]
        )

    async def Info(
        self, request: orchestrator_pb2.InfoRequest, context: grpc.aio.ServicerContext
    ) -> orchestrator_pb2.InfoResponse:
        s = self._settings
        return orchestrator_pb2.InfoResponse(
            llm_providers=list(self._llm.names) if self._llm is not None else [],
            reranker_configured=bool(s.reranker_addr),
            candidates=s.candidates,
            rerank_keep=s.rerank_keep,
            max_agent_steps=s.agent_steps,
        )
