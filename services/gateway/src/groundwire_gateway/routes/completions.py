"""The OpenAI-compatible API: ``POST /v1/chat/completions`` (streaming and not, with
citations) and ``GET /v1/models`` ('groundwire' and 'groundwire:<collection>').

Admission and the chat's life are in ``groundwire_gateway.chat_session``.
"""

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse, ServerSentEvent

from groundwire_core.context import current_request_id
from groundwire_core.errors import BackendFailure, GroundwireError
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

MODEL = "groundwire"


def _collection_for(model: str, explicit: str | None, default: str) -> str:
    """The collection a completion reads: the request's, the model's, or the default
    (the model name was checked against models.MODEL_PATTERN)."""
    _, _, collection = model.partition(":")
    return explicit or collection or default


COMPLETION_STREAM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["data"],
    "properties": {
        "event": {"const": "message"},
        "data": {
            "anyOf": [
                {"const": "[DONE]"},
                {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": {
                        "anyOf": [
                            {"$ref": "#/components/schemas/ChatCompletionChunk"},
                            {"$ref": "#/components/schemas/ErrorResponse"},
                        ]
                    },
                },
            ]
        },
    },
}


def router(state: GatewayState) -> APIRouter:
    api = APIRouter()
    caller = public_caller(state)
    settings = state.settings

    @api.post(
        "/v1/chat/completions",
        response_model=models.ChatCompletion,
        responses={
            200: {
                "description": "A chat completion (`stream: false`) or, with `stream: true`, "
                "server-sent `chat.completion.chunk`s ending with `data: [DONE]`. The cited "
                "sources are in `citations`.",
                "content": {"text/event-stream": {"schema": COMPLETION_STREAM_SCHEMA}},
            },
            **PUBLIC_ERRORS,
        },
        openapi_extra=OPTIONAL_AUTH,
        summary="OpenAI-compatible chat completions (streaming and not), with citations.",
    )
    async def completions(
        body: models.CompletionBody, principal: Annotated[Principal, Depends(caller)]
    ) -> Any:
        collection = _collection_for(body.model, body.collection, settings.default_collection)
        conversation, instructions = body.conversation(), body.instructions()
        chat, first = await start_chat(
            state,
            principal,
            conversation,
            collection,
            body.filters,
            instructions=instructions,
            via="completions",
            conversation_id=body.conversation_id,
        )
        created = int(time.time())
        ident = f"chatcmpl-{current_request_id()}"
        prompt_tokens = chat.prompt_tokens  # counted once, at admission
        if body.stream:
            usage = body.stream_options is not None and body.stream_options.include_usage
            return EventSourceResponse(
                _completion_chunks(
                    state, chat, first, ident, created, body.model, collection, prompt_tokens, usage
                ),
                sep=SSE_SEPARATOR,
                ping=SSE_PING_S,
            )
        state.metrics.inflight_chats.inc()
        try:
            event = first
            while not isinstance(event, models.DoneEvent):
                event = await chat.next()
        finally:
            state.metrics.inflight_chats.dec()
            await chat.close()
        answer = chat.answer
        completion = models.ChatCompletion(
            id=ident,
            created=created,
            model=body.model,
            choices=[
                models.CompletionChoice(message=models.CompletionMessage(content=answer.text))
            ],
            usage=models.Usage(
                prompt_tokens=prompt_tokens,
                completion_tokens=answer.tokens,
                total_tokens=prompt_tokens + answer.tokens,
            ),
            citations=answer.citations,
            groundwire=models.GroundwireExtra(
                mode=answer.mode,
                collection=collection,
                request_id=current_request_id(),
                stages=answer.stages,
                withheld=answer.withheld,
                **_stored_ids(chat),
            ),
        )
        return JSONResponse(completion.model_dump(mode="json"))

    @api.get(
        "/v1/models",
        response_model=models.ModelList,
        responses=PUBLIC_ERRORS,
        openapi_extra=OPTIONAL_AUTH,
        summary="OpenAI-compatible model list: 'groundwire' and 'groundwire:<collection>'.",
    )
    async def list_models(principal: Annotated[Principal, Depends(caller)]) -> models.ModelList:
        created = 0
        names = sorted(await state.catalog.names(principal))
        return models.ModelList(
            data=[models.ModelCard(id=MODEL, created=created)]
            + [models.ModelCard(id=f"{MODEL}:{n}", created=created) for n in names]
        )

    return api


def _stored_ids(chat: ChatSession) -> dict[str, str]:
    """``answer_id`` and ``conversation_id`` of a stored answer (none when not stored)."""
    recording = chat.recording
    if recording is None:
        return {}
    return {"answer_id": recording.answer_id, "conversation_id": recording.conversation_id}


def _chunk(
    ident: str, created: int, model: str, delta: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    finish = extra.pop("finish_reason", None)
    chunk: dict[str, Any] = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    chunk.update({k: v for k, v in extra.items() if v is not None})
    return chunk


async def _completion_chunks(
    state: GatewayState,
    chat: ChatSession,
    first: models.AskEvent,
    ident: str,
    created: int,
    model: str,
    collection: str,
    prompt_tokens: int,
    include_usage: bool,
) -> AsyncIterator[ServerSentEvent]:
    def sse(payload: dict[str, Any] | str) -> ServerSentEvent:
        if isinstance(payload, str):
            return ServerSentEvent(data=payload)
        return ServerSentEvent(data=json.dumps(payload, separators=(",", ":")))

    state.metrics.inflight_chats.inc()
    sent = False
    try:
        yield sse(_chunk(ident, created, model, {"role": "assistant", "content": ""}))
        event = first
        while True:
            if isinstance(event, models.DeltaEvent) and event.text:
                sent = True
                yield sse(_chunk(ident, created, model, {"content": event.text}))
            elif isinstance(event, models.ResetEvent) and sent:
                # An OpenAI client cannot take text back. The orchestrator never sends
                # text an agent step may discard (it holds it back), so a reset after
                # text means the model failed mid-answer: the text so far is void,
                # and an error is the one thing such a client will not keep as the
                # answer. (/v1/chat carries the reset and the fallback answer.)
                raise BackendFailure(
                    f"the answer failed mid-stream ({event.reason}); the text streamed so "
                    "far is void: retry, or use /v1/chat, which falls back to an "
                    "extractive answer",
                    dependency="llm",
                )
            elif isinstance(event, models.DoneEvent):
                answer = chat.answer
                extra = models.GroundwireExtra(
                    mode=answer.mode,
                    collection=collection,
                    request_id=current_request_id(),
                    stages=answer.stages,
                    withheld=answer.withheld,
                    **_stored_ids(chat),
                )
                yield sse(
                    _chunk(
                        ident,
                        created,
                        model,
                        {},
                        finish_reason="stop",
                        citations=[s.model_dump(mode="json") for s in answer.citations],
                        groundwire=extra.model_dump(mode="json"),
                    )
                )
                if include_usage:
                    usage = models.Usage(
                        prompt_tokens=prompt_tokens,
                        completion_tokens=answer.tokens,
                        total_tokens=prompt_tokens + answer.tokens,
                    )
                    chunk = _chunk(ident, created, model, {}, usage=usage.model_dump())
                    chunk["choices"] = []
                    yield sse(chunk)
                yield sse("[DONE]")
                return
            event = await chat.next()
    except GroundwireError as error:
        chat.ended = True
        state.metrics.errors.labels("/v1/chat/completions", error.code).inc()
        yield sse({"error": error_event(error).model_dump(mode="json", exclude_none=True)})
    except Exception:
        chat.ended = True
        internal = internal_error()
        state.metrics.errors.labels("/v1/chat/completions", internal.code).inc()
        yield sse({"error": error_event(internal).model_dump(mode="json", exclude_none=True)})
    finally:
        state.metrics.inflight_chats.dec()
        await chat.close()
