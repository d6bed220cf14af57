"""The gateway's clients of the orchestrator and the retriever.

The only gateway module that touches protobuf messages: it converts them to the
HTTP models, and AioRpcErrors to GroundwireErrors (through the shared mapper).
"""

from __future__ import annotations

import asyncio

import grpc

from groundwire.orchestrator.v1 import orchestrator_pb2, orchestrator_pb2_grpc
from groundwire_core.grpc.client import check_health, create_channel, rpc_errors
from groundwire_gateway import models
from groundwire_gateway.settings import GatewaySettings

_DEP_STATUS: dict[int, str] = {
    orchestrator_pb2.DEPENDENCY_STATUS_SERVING: "serving",
    orchestrator_pb2.DEPENDENCY_STATUS_NOT_SERVING: "not_serving",
    orchestrator_pb2.DEPENDENCY_STATUS_DISABLED: "disabled",
}


class Upstream:
    def __init__(self, settings: GatewaySettings) -> None:
        self._settings = settings
        self._orchestrator_channel: grpc.aio.Channel | None = None
        self._retriever_channel: grpc.aio.Channel | None = None

    async def start(self) -> None:
        self._orchestrator_channel = create_channel(self._settings.orchestrator_addr)
        self._retriever_channel = create_channel(self._settings.retriever_addr)

    async def stop(self) -> None:
        for channel in (self._orchestrator_channel, self._retriever_channel):
            if channel is not None:
                await channel.close()

    @property
    def _orchestrator(self) -> orchestrator_pb2_grpc.OrchestratorServiceStub:
        assert self._orchestrator_channel is not None, "Upstream.start() was not called"
        return orchestrator_pb2_grpc.OrchestratorServiceStub(self._orchestrator_channel)

    async def search(
        self, body: models.SearchBody, collection: str
    ) -> tuple[list[models.SearchResult], list[models.StageOut]]:
        request = orchestrator_pb2.SearchRequest(
            collection=collection,
            query=body.query,
            limit=body.limit,
            filters=[
                orchestrator_pb2.FieldFilter(field=f.field, any_of=f.any_of) for f in body.filters
            ],
            rerank=body.rerank,
        )
        with rpc_errors("orchestrator"):
            reply = await self._orchestrator.Search(
                request, timeout=self._settings.request_timeout_s
            )
        results = [
            models.SearchResult(
                rank=s.number,
                score=s.score,
                chunk_id=s.chunk_id,
                source_id=s.source_id,
                title=s.title,
                heading_path=list(s.heading_path),
                url=s.url,
                text=s.text,
                match_reason=s.match_reason,
                injection_flagged=s.injection_flagged,
            )
            for s in reply.results
        ]
        stages = [
            models.StageOut(
                name=st.name,
                ms=st.ms,
                fallback=st.fallback,
                reason=st.reason,
                dependency=st.dependency,
                details=dict(st.details),
            )
            for st in reply.stages
        ]
        return results, stages

    async def health(self) -> dict[str, models.DependencyOut]:
        """Each dependency's health: the orchestrator's view of its own, plus ours."""
        assert self._orchestrator_channel is not None and self._retriever_channel is not None
        s = self._settings

        async def direct(channel: grpc.aio.Channel, target: str) -> models.DependencyOut:
            ok, ms, reason = await check_health(channel, timeout_s=1.0)
            return models.DependencyOut(
                status="serving" if ok else "not_serving",
                target=target,
                latency_ms=ms,
                message=reason,
            )

        orch, retr = await asyncio.gather(
            direct(self._orchestrator_channel, s.orchestrator_addr),
            direct(self._retriever_channel, s.retriever_addr),
        )
        deps = {"orchestrator": orch, "retriever": retr}
        if orch.status == "serving":
            try:
                with rpc_errors("orchestrator"):
                    reply = await self._orchestrator.Dependencies(
                        orchestrator_pb2.DependenciesRequest(), timeout=2.0
                    )
            except Exception as error:  # health must answer whatever failed
                deps["orchestrator"] = models.DependencyOut(
                    status="not_serving", target=s.orchestrator_addr, message=str(error)
                )
            else:
                for d in reply.dependencies:
                    if d.name not in deps:
                        deps[d.name] = models.DependencyOut(
                            status=_DEP_STATUS.get(d.status, "not_serving"),
                            target=d.target,
                            latency_ms=d.latency_ms,
                            message=d.message,
                        )
        return deps
