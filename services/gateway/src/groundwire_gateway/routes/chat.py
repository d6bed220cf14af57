"""``POST /v1/chat``: the orchestrator's Ask events as typed server-sent events.

Admission and the chat's life are in ``groundwire_gateway.chat_session``.
"""

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from sse_starlette import EventSourceResponse, ServerSentEvent

from groundwire_core.errors import GroundwireError
from groundwire_gateway import models
from groundwire_gateway.auth import Principal
from groundwire_gateway.chat_session import (
    SSE_PING_S,
    SSE_SEPARATOR,
    ChatSession,
    error_event,
    internal_error,
    start_chat,
)
from groundwire_gateway.routes import PUBLIC_ERRORS
from groundwire_gateway.routes.security import OPTIONAL_AUTH, public_caller
from groundwire_gateway.state import GatewayState


def _sse_events_schema(payloads: dict[str, str]) -> dict[str, Any]:
    """One event of a text/event-stream, as schemathesis and OpenAPI 3.2 read it:
    ``event`` names it, ``data`` is JSON of the given component."""
    return {
        "oneOf": [
            {
                "type": "object",
                "required": ["event", "data"],
                "properties": {
                    "event": {"const": name},
                    "data": {
                        "type": "string",
                        "contentMediaType": "application/json",
                        "contentSchema": {"$ref": f"#/components/schemas/{component}"},
                    },
                },
            }
            for name, component in payloads.items()
        ]
    }


CHAT_STREAM_SCHEMA = _sse_events_schema(
    {
        "retrieval": "RetrievalEvent",
        "delta": "DeltaEvent",
        "reset": "ResetEvent",
        "citations": "CitationsEvent",
        "stages": "StagesEvent",
        "done": "DoneEvent",
        "error": "ErrorEvent",
    }
)


def router(state: GatewayState) -> APIRouter:
    api = APIRouter()
    caller = public_caller(state)
    settings = state.settings

    @api.post(
        "/v1/chat",
        response_class=EventSourceResponse,
        responses={
            200: {
                "description": "Server-sent events: `retrieval` (before any text), `delta`s, "
                "maybe `reset` (discard the text so far), `citations`, `stages`, then exactly "
                "one `done` or `error`. Each `data:` line is one JSON object.",
                "content": {"text/event-stream": {"schema": CHAT_STREAM_SCHEMA}},
            },
            **PUBLIC_ERRORS,
        },
        openapi_extra=OPTIONAL_AUTH,
        summary="Answer the last user message, streamed as server-sent events.",
    )
    async def chat(
        body: models.ChatBody, principal: Annotated[Principal, Depends(caller)]
    ) -> EventSourceResponse:
        collection = body.collection or settings.default_collection
        chat, first = await start_chat(
            state,
            principal,
            body.messages,
            collection,
            body.filters,
            listwise_rerank=body.listwise_rerank,
            max_agent_steps=body.max_agent_steps,
            conversation_id=body.conversation_id,
        )
        return EventSourceResponse(
            _chat_events(state, chat, first), sep=SSE_SEPARATOR, ping=SSE_PING_S
        )

    return api


async def _chat_events(
    state: GatewayState, chat: ChatSession, first: models.AskEvent
) -> AsyncIterator[ServerSentEvent]:
    state.metrics.inflight_chats.inc()
    try:
        event = first
        while True:
            yield ServerSentEvent(data=event.model_dump_json(), event=event.event)
            if isinstance(event, models.DoneEvent):
                return
            event = await chat.next()
    except GroundwireError as error:
        chat.ended = True
        state.metrics.errors.labels("/v1/chat", error.code).inc()
        yield ServerSentEvent(data=error_event(error).model_dump_json(), event="error")
    except Exception:
        chat.ended = True
        internal = internal_error()
        state.metrics.errors.labels("/v1/chat", internal.code).inc()
        yield ServerSentEvent(data=error_event(internal).model_dump_json(), event="error")
    finally:
        state.metrics.inflight_chats.dec()
        await chat.close()
