"""POST /v1/search: ranked results with sources, scores and a stage report."""

from typing import Annotated

from fastapi import APIRouter, Depends

from groundwire_core.context import current_request_id
from groundwire_gateway import models
from groundwire_gateway.auth import Principal
from groundwire_gateway.routes import PUBLIC_ERRORS
from groundwire_gateway.routes.security import OPTIONAL_AUTH, public_caller
from groundwire_gateway.state import GatewayState


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
        collection = body.collection or state.settings.default_collection
        await state.catalog.check(collection, body.filters)
        ticket = await state.limiter.admit(
            state.limiter.ask_for("search", principal.client, principal.tenant)
        )
        try:
            results, stages = await state.upstream.search(body, collection)
        finally:
            await state.limiter.release(ticket)
        return models.SearchResponse(
            collection=collection,
            results=results,
            stages=stages,
            request_id=current_request_id(),
        )

    return api
