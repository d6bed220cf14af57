"""POST /v1/search: ranked results with sources, scores and a stage report.

Search spends model and LLM work (query analysis; the listwise call with
``reasons``), so it goes through the same cost controls as chat: the admission
checks the tenant's token budget with the query's tokens, and the tokens of the
search's LLM calls (reported by the orchestrator) are charged when it ends."""

from typing import Annotated

from fastapi import APIRouter, Depends

from groundwire_core.context import current_request_id
from groundwire_gateway import models
from groundwire_gateway.auth import Principal
from groundwire_gateway.limits import is_anonymous
from groundwire_gateway.routes import PUBLIC_ERRORS
from groundwire_gateway.routes.security import OPTIONAL_AUTH, public_caller
from groundwire_gateway.state import GatewayState, SearchReply


def limits_stage(state: GatewayState) -> models.StageOut:
    """The stage report of limits decided per replica (Redis down, policy open)."""
    return models.StageOut(
        name="limits",
        ms=0.0,
        fallback=True,
        reason=f"{state.limiter.down_reason or 'redis unreachable'}: limits run per replica "
        "in process (not shared)",
        dependency="redis",
    )


def router(state: GatewayState) -> APIRouter:
    api = APIRouter()
    caller = public_caller(state)

    @api.post(
        "/v1/search",
        response_model=models.SearchResponse,
        responses=PUBLIC_ERRORS,
        openapi_extra=OPTIONAL_AUTH,
        summary="Ranked search results with sources, scores and a stage report.",
    )
    async def search(
        body: models.SearchBody, principal: Annotated[Principal, Depends(caller)]
    ) -> models.SearchResponse:
        return await run_search(state, principal, body)

    return api


async def run_search(
    state: GatewayState, principal: Principal, body: models.SearchBody
) -> models.SearchResponse:
    """One search as ``POST /v1/search`` runs it (also the MCP ``search`` tool): the
    collection and filter check, the limits, the orchestrator call. Raises NotFound,
    InvalidInput, the limits' rejections and the upstream errors."""
    collection = body.collection or state.settings.default_collection
    await state.catalog.check(
        collection, body.filters, reveal=not is_anonymous(principal), caller=principal
    )
    query_tokens = max(1, models.approx_tokens(body.query))
    ticket = await state.limiter.admit(
        state.limiter.ask_for("search", principal.client, principal.tenant, query_tokens)
    )
    reply = SearchReply([], [])
    try:
        reply = await state.upstream.search(body, collection)
    finally:
        await state.limiter.release(ticket, answer_tokens=reply.llm_tokens)
    stages = list(reply.stages)
    if state.limiter.is_local(ticket):
        stages.append(limits_stage(state))
    return models.SearchResponse(
        collection=collection,
        results=reply.results,
        stages=stages,
        request_id=current_request_id(),
    )
