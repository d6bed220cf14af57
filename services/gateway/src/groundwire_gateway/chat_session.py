"""One admitted chat, shared by ``POST /v1/chat`` and ``POST /v1/chat/completions``.

Order of work for a chat: schema validation (pydantic) → input token budget →
known collection and filter fields (cached) → the limits (rate, daily quota, token
budget, chat slot: one atomic admission) → the Ask call. The first event is read
before the response starts, so an immediate failure is a plain HTTP error; after
that, failures are ``error`` events. A client that goes away mid-answer cancels the
Ask call.
"""

import logging
import math
import time
from dataclasses import dataclass, field

import anyio

from groundwire_core.context import current_request_id
from groundwire_core.errors import BackendFailure, GroundwireError, InvalidInput
from groundwire_gateway import models
from groundwire_gateway.auth import Principal
from groundwire_gateway.limits import Ticket
from groundwire_gateway.routes.search import limits_stage
from groundwire_gateway.state import EventStream, GatewayState
from groundwire_gateway.transcripts import Recording, begin, store_of

log = logging.getLogger("groundwire.gateway.chat")

SSE_SEPARATOR = "\n"
SSE_PING_S = 15


@dataclass
class Answer:
    """What a finished (or interrupted) answer produced."""

    text: str = ""
    generated_chars: int = 0
    mode: models.AnswerMode | None = None
    citations: list[models.Source] = field(default_factory=list)
    stages: list[models.StageOut] = field(default_factory=list)
    withheld: list[models.WithheldSentence] = field(default_factory=list)
    checked: models.CitationsEvent | None = None
    """The citations event as sent (sources, checks, withheld): what is stored."""

    def take(self, event: models.AskEvent) -> None:
        if isinstance(event, models.DeltaEvent):
            self.text += event.text
            self.generated_chars += len(event.text)
        elif isinstance(event, models.ResetEvent):
            self.text = ""
        elif isinstance(event, models.CitationsEvent):
            self.citations = event.sources
            self.withheld = event.withheld
            self.checked = event
        elif isinstance(event, models.StagesEvent):
            self.stages = event.stages
        elif isinstance(event, models.DoneEvent):
            self.text = event.answer
            self.mode = event.mode

    @property
    def tokens(self) -> int:
        return math.ceil(self.generated_chars / models.CHARS_PER_TOKEN)


class ChatSession:
    """One admitted chat: its Ask stream, its ticket, and how it ends."""

    def __init__(
        self,
        state: GatewayState,
        stream: EventStream,
        ticket: Ticket,
        prompt_tokens: int = 0,
        recording: Recording | None = None,
    ) -> None:
        self.state = state
        self.stream = stream
        self.events = aiter(stream)
        self.ticket = ticket
        self.prompt_tokens = prompt_tokens
        """The input's approximate tokens, as charged at admission."""
        self.answer = Answer()
        self.ended = False
        self.recording = recording
        """Where the answer is stored when it ends (None: not stored)."""
        self.stored = False
        self.latency_ms = 0.0

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
        if isinstance(event, models.StagesEvent) and self.state.limiter.is_local(self.ticket):
            # Redis down, policy open: say so in the chat's stage report, as search does
            event = models.StagesEvent(stages=[*event.stages, limits_stage(self.state)])
        if isinstance(event, models.DoneEvent) and (recording := self.recording) is not None:
            self.latency_ms = (time.perf_counter() - recording.started) * 1e3
            event = event.model_copy(
                update={
                    "answer_id": recording.answer_id,
                    "conversation_id": recording.conversation_id,
                }
            )
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
            await self.state.limiter.release(
                self.ticket, self.answer.tokens, spent=self.stream.llm_tokens
            )
            await self._store()

    async def _store(self) -> None:
        """Records a finished answer (after its last event went out; never raises)."""
        recording, answer = self.recording, self.answer
        if recording is None or answer.mode is None or self.stored:
            return  # nothing to store, never finished, or already stored
        self.stored = True
        turn = recording.turn(
            answer.text, answer.mode, answer.checked, answer.stages, self.latency_ms
        )
        await recording.store.record(recording.reader, turn)


def approx_prompt_tokens(messages: list[models.ChatMessage], instructions: str) -> int:
    """Approximate input tokens: the conversation and the operator's instructions."""
    extra = models.approx_tokens(instructions) + models.TOKENS_PER_MESSAGE if instructions else 0
    return models.conversation_tokens(messages) + extra


def input_tokens(
    state: GatewayState, messages: list[models.ChatMessage], instructions: str = ""
) -> int:
    tokens = approx_prompt_tokens(messages, instructions)
    limit = state.settings.max_input_tokens
    if tokens > limit:
        raise InvalidInput(
            f"messages: about {tokens} input tokens (approximate: 4 characters per token, "
            f"4 per message); the limit is {limit}"
        )
    return tokens


async def start_chat(
    state: GatewayState,
    principal: Principal,
    messages: list[models.ChatMessage],
    collection: str,
    filters: list[models.FieldFilter],
    *,
    listwise_rerank: bool = False,
    max_agent_steps: int = 0,
    instructions: str = "",
    via: str = "chat",
    conversation_id: str | None = None,
) -> tuple[ChatSession, models.AskEvent]:
    """Admits a chat and reads its first event; ``via`` and ``conversation_id`` say how
    its answer is stored (see ``transcripts``)."""
    tokens = input_tokens(state, messages, instructions)
    await state.catalog.check(collection, filters, caller=principal)
    recording = await begin(
        store_of(state),
        principal,
        collection,
        messages[-1].text,
        via=via,
        conversation_id=conversation_id,
    )
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
    chat = ChatSession(state, stream, ticket, tokens, recording)
    return chat, await chat.first()


def error_event(error: GroundwireError) -> models.ErrorEvent:
    retry = getattr(error, "retry_after_s", None)
    return models.ErrorEvent(
        code=error.code,
        message=error.message,
        dependency=error.dependency,
        retry_after_s=float(retry) if retry is not None else None,
        request_id=current_request_id(),
    )


def internal_error() -> GroundwireError:
    log.exception("unexpected error while streaming an answer")
    return GroundwireError("internal error")
