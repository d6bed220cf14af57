"""gRPC transport of the orchestrator: convert, run the pipeline, convert back (the
pipeline itself is assembled in wiring)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence

import grpc

from groundwire.embedder.v1 import embedder_pb2
from groundwire.orchestrator.v1 import orchestrator_pb2, orchestrator_pb2_grpc
from groundwire.reranker.v1 import reranker_pb2
from groundwire.retriever.v1 import retriever_pb2
from groundwire_core.errors import GroundwireError, InvalidInput
from groundwire_core.grpc.client import check_health
from groundwire_core.grpc.errors import to_error_info
from groundwire_orchestrator import convert, usage
from groundwire_orchestrator.llm.base import LLMProvider
from groundwire_orchestrator.llm.observed import ObservedLLM
from groundwire_orchestrator.pipeline import AskInput, Pipeline, SearchInput
from groundwire_orchestrator.settings import OrchestratorSettings
from groundwire_orchestrator.wiring import Assembly, assemble

DEFAULT_LIMIT = 10
MAX_LIMIT = 50
# Each dependency's own health name: its readiness, which a dependency check (the
# retriever's Qdrant) can turn NOT_SERVING while "" stays SERVING.
_HEALTH_NAMES = {
    "embedder": embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"].full_name,
    "retriever": retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name,
    "reranker": reranker_pb2.DESCRIPTOR.services_by_name["RerankerService"].full_name,
}


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
        self._assembly: Assembly | None = None

    def register(self, server: grpc.aio.Server) -> None:
        orchestrator_pb2_grpc.add_OrchestratorServiceServicer_to_server(self, server)

    async def start(self) -> None:
        self._assembly = await assemble(self._settings, llm=self._injected_llm)

    async def stop(self) -> None:
        if self._assembly is not None:
            await self._assembly.aclose()

    async def check(self) -> None:
        """Nothing to re-check: each stage falls back or names the dependency it lost
        in the request's own error, and every replica shares the same dependencies,
        so taking this one out of rotation would help no caller."""

    @property
    def pipeline(self) -> Pipeline:
        if self._assembly is None:
            raise RuntimeError("the orchestrator is not started")
        return self._assembly.pipeline

    @property
    def _llm(self) -> ObservedLLM | None:
        return self._assembly.llm if self._assembly is not None else None

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
                    fusion=convert.fusion_from_proto(request),
                    group_by_source=convert.group_by_source_from_proto(request),
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
            # every LLM call of this answer (analysis, listwise, answer, judge, agent
            # steps) is metered and reported on its done event: the gateway charges
            # the tenant what the chat spent, not only its input and answer (#31)
            with usage.metered() as spent:
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
                    out = convert.event_to_proto(event)
                    if out.HasField("done") and (spent.input_tokens or spent.output_tokens):
                        out.done.llm_usage.CopyFrom(convert.usage_to_proto(spent))
                    yield out
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
            channel = self._assembly.channels.get(name) if self._assembly is not None else None
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
