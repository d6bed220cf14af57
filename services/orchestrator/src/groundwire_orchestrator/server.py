"""gRPC transport of the orchestrator: convert, run the pipeline, convert back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import grpc

from groundwire.orchestrator.v1 import orchestrator_pb2, orchestrator_pb2_grpc
from groundwire_core.clients.embedder import EmbedderClient
from groundwire_core.errors import GroundwireError, InvalidInput
from groundwire_core.grpc.client import check_health, create_channel
from groundwire_core.grpc.errors import to_error_info
from groundwire_orchestrator import convert
from groundwire_orchestrator.clients.reranker import RerankerClient
from groundwire_orchestrator.clients.retriever import RetrieverClient
from groundwire_orchestrator.pipeline import (
    AnswerDelta,
    AnswerDone,
    Pipeline,
    RetrievalDone,
    StagesDone,
)
from groundwire_orchestrator.settings import OrchestratorSettings
from groundwire_orchestrator.stages.rerank import RerankStage
from groundwire_orchestrator.stages.retrieval import RetrievalParams, RetrievalStage

DEFAULT_LIMIT = 10
MAX_LIMIT = 50


class OrchestratorService(orchestrator_pb2_grpc.OrchestratorServiceServicer):
    name = "orchestrator"
    service_names: Sequence[str] = (
        orchestrator_pb2.DESCRIPTOR.services_by_name["OrchestratorService"].full_name,
    )

    def __init__(self, settings: OrchestratorSettings) -> None:
        self._settings = settings
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._pipeline: Pipeline | None = None

    def register(self, server: grpc.aio.Server) -> None:
        orchestrator_pb2_grpc.add_OrchestratorServiceServicer_to_server(self, server)

    async def start(self) -> None:
        s = self._settings
        self._channels = {
            "embedder": create_channel(s.embedder_addr),
            "retriever": create_channel(s.retriever_addr),
        }
        if s.reranker_addr:
            self._channels["reranker"] = create_channel(s.reranker_addr)
        retrieval = RetrievalStage(
            EmbedderClient(self._channels["embedder"], timeout_s=s.call_timeout_s),
            RetrieverClient(self._channels["retriever"], timeout_s=s.call_timeout_s),
            RetrievalParams(path_limit=s.path_limit, rrf_k=s.rrf_k, dense_floor=s.dense_floor),
        )
        rerank = RerankStage(
            RerankerClient(self._channels["reranker"]) if "reranker" in self._channels else None,
            candidates=s.candidates,
            keep=s.rerank_keep,
            threshold=s.rerank_threshold,
            timeout_s=s.rerank_timeout_s,
        )
        self._pipeline = Pipeline(retrieval, rerank, candidates=s.candidates)

    async def stop(self) -> None:
        await asyncio.gather(*(c.close() for c in self._channels.values()))

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
        outcome = await self.pipeline.search(
            request.collection,
            request.query,
            limit=request.limit or DEFAULT_LIMIT,
            filters=convert.filters_from_proto(request.filters),
            rerank=request.rerank,
        )
        return orchestrator_pb2.SearchResponse(
            results=convert.sources_to_proto(outcome.candidates),
            stages=[convert.stage_to_proto(s) for s in outcome.stages],
        )

    async def Ask(
        self, request: orchestrator_pb2.AskRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[orchestrator_pb2.AskEvent]:
        try:
            if not request.messages or request.messages[-1].role != orchestrator_pb2.ROLE_USER:
                raise InvalidInput("the last message must be from the user")
            events = self.pipeline.ask(
                request.collection,
                request.messages[-1].content,
                filters=convert.filters_from_proto(request.filters),
            )
            async for event in events:
                yield self._event_to_proto(event)
        except GroundwireError as error:
            yield orchestrator_pb2.AskEvent(error=to_error_info(error))

    @staticmethod
    def _event_to_proto(
        event: RetrievalDone | AnswerDelta | StagesDone | AnswerDone,
    ) -> orchestrator_pb2.AskEvent:
        match event:
            case RetrievalDone(sources):
                return orchestrator_pb2.AskEvent(
                    retrieval=orchestrator_pb2.RetrievalEvent(
                        sources=convert.sources_to_proto(sources)
                    )
                )
            case AnswerDelta(text):
                return orchestrator_pb2.AskEvent(delta=orchestrator_pb2.DeltaEvent(text=text))
            case StagesDone(stages):
                return orchestrator_pb2.AskEvent(
                    stages=orchestrator_pb2.StagesEvent(
                        stages=[convert.stage_to_proto(s) for s in stages]
                    )
                )
            case AnswerDone(mode, answer):
                return orchestrator_pb2.AskEvent(
                    done=orchestrator_pb2.DoneEvent(mode=convert.MODES[mode], answer=answer)
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
            ok, ms, reason = await check_health(channel, timeout_s=1.0)
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
        llm = orchestrator_pb2.Dependency(
            name="llm",
            status=orchestrator_pb2.DEPENDENCY_STATUS_DISABLED,
            message="no LLM is configured: answers are extractive",
        )
        return orchestrator_pb2.DependenciesResponse(dependencies=[*deps, llm])

    async def Info(
        self, request: orchestrator_pb2.InfoRequest, context: grpc.aio.ServicerContext
    ) -> orchestrator_pb2.InfoResponse:
        s = self._settings
        return orchestrator_pb2.InfoResponse(
            llm_providers=[],
            reranker_configured=bool(s.reranker_addr),
            candidates=s.candidates,
            rerank_keep=s.rerank_keep,
            max_agent_steps=0,
        )
