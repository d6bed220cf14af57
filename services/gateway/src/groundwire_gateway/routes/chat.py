"""Chat: ``POST /v1/chat`` (the orchestrator's Ask events as typed SSE events) and
the OpenAI-compatible ``POST /v1/chat/completions`` (+ ``GET /v1/models``).

Order of work for a chat: schema validation (pydantic) → input token budget →
known collection and filter fields (cached) → the limits (rate, daily quota, token
budget, chat slot: one atomic admission) → the Ask call. The first event is read
before the response starts, so an immediate failure is a plain HTTP error; after
that, failures are ``error`` events. A client that goes away mid-answer cancels the
Ask call.
"""

import json
import logging
import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse, ServerSentEvent

from groundwire_core.context import current_request_id
from groundwire_core.errors import BackendFailure, GroundwireError, InvalidInput
from groundwire_gateway import models
from groundwire_gateway.auth import Principal
from groundwire_gateway.limits import Ticket
from groundwire_gateway.routes import PUBLIC_ERRORS
from groundwire_gateway.routes.security import OPTIONAL_AUTH, public_caller
from groundwire_gateway.state import EventStream, GatewayState

log = logging.getLogger("groundwire.gateway.chat")

MODEL = "groundwire"
SSE_SEPARATOR = "\n"
SSE_PING_S = 15


@dataclass
class _Answer:
    """What a finished (or interrupted) answer produced."""

    text: str = ""
    generated_chars: int = 0
    mode: models.AnswerMode | None = None
    citations: list[models.Source] = field(default_factory=list)
    stages: list[models.StageOut] = field(default_factory=list)

    def take(self, event: models.AskEvent) -> None:
        if isinstance(event, models.DeltaEvent):
            self.text += event.text
            self.generated_chars += len(event.text)
        elif isinstance(event, models.ResetEvent):
            self.text = ""
        elif isinstance(event, models.CitationsEvent):
            self.citations = event.sources
        elif isinstance(event, models.StagesEvent):
            self.stages = event.stages
        elif isinstance(event, models.DoneEvent):
            self.text = event.answer
            self.mode = event.mode

    @property
    def tokens(self) -> int:
        return math.ceil(self.generated_chars / models.CHARS_PER_TOKEN)


class _Chat:
    """One admitted chat: its Ask stream, its ticket, and how it ends."""

    def __init__(self, state: GatewayState, stream: EventStream, ticket: Ticket) -> None:
        self.state = state
        self.stream = stream
        self.events = aiter(stream)
        self.ticket = ticket
        self.answer = _Answer()
        self.ended = False

    async def first(self) -> models.AskEvent:
        """The first event; on failure the chat is closed and the error raised."""
        try:
            return await self.next()
        except BaseException:
            await self.close()
            raise

    async def next(self) -> models.AskEvent:
        try:
            event = await anext(self.events)
        except StopAsyncIteration:
            self.ended = True
            raise BackendFailure(
                "the orchestrator ended the answer without a done event",
                dependency="orchestrator",
            ) from None
        except Exception:
            self.ended = True  # the call failed: nothing to cancel
            raise
        self.answer.take(event)
        if isinstance(event, models.DoneEvent):
            self.ended = True
        return event

    async def close(self) -> None:
        """Cancels the Ask call unless it ended, frees the slot, charges the answer.
        Safe to call from a cancelled task (the cleanup is shielded)."""
        if not self.ended:
            # Still running: the client went away (or the server is stopping). gRPC
            # may already have cancelled the call with the task; cancel() is idempotent.
            self.ended = True
            self.stream.cancel()
            self.state.metrics.cancelled_chats.inc()
            log.info("chat abandoned mid-answer: the orchestrator call was cancelled")
        with anyio.CancelScope(shield=True):
            await self.state.limiter.release(self.ticket, self.answer.tokens)


def _prompt_tokens(messages: list[models.ChatMessage], instructions: str) -> int:
    """Approximate input tokens: the conversation and the operator's instructions."""
    extra = models.approx_tokens(instructions) + models.TOKENS_PER_MESSAGE if instructions else 0
    return models.conversation_tokens(messages) + extra


def _input_tokens(
    state: GatewayState, messages: list[models.ChatMessage], instructions: str = ""
) -> int:
    tokens = _prompt_tokens(messages, instructions)
    limit = state.settings.max_input_tokens
    if tokens > limit:
        raise InvalidInput(
            f"messages: about {tokens} input tokens (approximate: 4 characters per token, "
            f"4 per message); the limit is {limit}"
        )
    return tokens


async def _start(
    state: GatewayState,
    principal: Principal,
    messages: list[models.ChatMessage],
    collection: str,
    filters: list[models.FieldFilter],
    *,
    listwise_rerank: bool = False,
    max_agent_steps: int = 0,
    instructions: str = "",
) -> tuple[_Chat, models.AskEvent]:
    tokens = _input_tokens(state, messages, instructions)
    await state.catalog.check(collection, filters)
    ticket = await state.limiter.admit(
        state.limiter.ask_for("chat", principal.client, principal.tenant, tokens)
    )
    try:
        stream = state.upstream.ask(
            messages,
            collection,
            filters,
            listwise_rerank=listwise_rerank,
            max_agent_steps=max_agent_steps,
            instructions=instructions,
        )
    except BaseException:
        with anyio.CancelScope(shield=True):
            await state.limiter.release(ticket)
        raise
    chat = _Chat(state, stream, ticket)
    return chat, await chat.first()


def _error_event(error: GroundwireError) -> models.ErrorEvent:
    retry = getattr(error, "retry_after_s", None)
    return models.ErrorEvent(
        code=error.code,
        message=error.message,
        dependency=error.dependency,
        retry_after_s=float(retry) if retry is not None else None,
        request_id=current_request_id(),
    )


def _internal_error() -> GroundwireError:
    log.exception("unexpected error while streaming an answer")
    return GroundwireError("internal error")


def _collection_for(model: str, explicit: str | None, default: str) -> str:
    """The collection a completion reads: the request's, the model's, or the default
    (the model name was checked against models.MODEL_PATTERN)."""
    _, _, collection = model.partition(":")
    return explicit or collection or default


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
        chat, first = await _start(
            state,
            principal,
            body.messages,
            collection,
            body.filters,
            listwise_rerank=body.listwise_rerank,
            max_agent_steps=body.max_agent_steps,
        )
        return EventSourceResponse(
            _chat_events(state, chat, first), sep=SSE_SEPARATOR, ping=SSE_PING_S
        )

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
        chat, first = await _start(
            state, principal, conversation, collection, body.filters, instructions=instructions
        )
        created = int(time.time())
        ident = f"chatcmpl-{current_request_id()}"
        prompt_tokens = _prompt_tokens(conversation, instructions)
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
        names = sorted(await state.catalog.names())
        return models.ModelList(
            data=[models.ModelCard(id=MODEL, created=created)]
            + [models.ModelCard(id=f"{MODEL}:{n}", created=created) for n in names]
        )

    return api


async def _chat_events(
    state: GatewayState, chat: _Chat, first: models.AskEvent
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
        yield ServerSentEvent(data=_error_event(error).model_dump_json(), event="error")
    except Exception:
        chat.ended = True
        internal = _internal_error()
        state.metrics.errors.labels("/v1/chat", internal.code).inc()
        yield ServerSentEvent(data=_error_event(internal).model_dump_json(), event="error")
    finally:
        state.metrics.inflight_chats.dec()
        await chat.close()


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
    chat: _Chat,
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
        yield sse({"error": _error_event(error).model_dump(mode="json", exclude_none=True)})
    except Exception:
        chat.ended = True
        internal = _internal_error()
        state.metrics.errors.labels("/v1/chat/completions", internal.code).inc()
        yield sse({"error": _error_event(internal).model_dump(mode="json", exclude_none=True)})
    finally:
        state.metrics.inflight_chats.dec()
        await chat.close()
