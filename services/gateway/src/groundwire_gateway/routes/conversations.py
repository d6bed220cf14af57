"""Stored conversations, feedback on answers, and the report a docs team reads.

``GET /v1/conversations`` and ``GET /v1/conversations/{id}``: what the caller may read
(its end user's own; a key's whole tenant; the operator every tenant's) — a conversation
it may not read is a 404, as a missing one. ``POST /v1/feedback``: a thumbs up or down,
with a comment, on an answer of such a conversation. ``GET /v1/admin/report``: the
most-asked, declined, low-evidence and down-rated questions of a collection (a tenant
admin's own tenant's answers; the operator's, every tenant's).
"""

from typing import Annotated, Any, cast, get_args

from fastapi import APIRouter, Depends, Path, Query

from groundwire_core.errors import NotFound
from groundwire_gateway import conversation_models as cm
from groundwire_gateway import models
from groundwire_gateway.auth import Principal
from groundwire_gateway.db.conversations import AnswerRecord, ConversationRecord, ReportEntry
from groundwire_gateway.routes import ADMIN_ERRORS, error_responses
from groundwire_gateway.routes.security import OPTIONAL_AUTH, admin_caller, public_caller
from groundwire_gateway.state import GatewayState
from groundwire_gateway.transcripts import reader_of, store_of

READ_ERRORS = error_responses(401, 404, 422, 500, 503)
ConversationId = Annotated[str, Path(pattern=models.STORED_ID_PATTERN)]


def _summary(record: ConversationRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "collection": record.collection,
        "title": record.title,
        "turns": record.turns,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


def _mode(value: str) -> models.AnswerMode:
    for mode in get_args(models.AnswerMode):
        if value == mode:
            return cast(models.AnswerMode, mode)
    return "unspecified"


def _answer(record: AnswerRecord) -> cm.StoredAnswer:
    return cm.StoredAnswer(
        id=record.id,
        question=record.question,
        answer=record.answer,
        mode=_mode(record.mode),
        via=record.via,
        sources=[models.Source.model_validate(s) for s in record.sources],
        citations=[models.Citation.model_validate(c) for c in record.citations],
        withheld=[models.WithheldSentence.model_validate(w) for w in record.withheld],
        stages=[models.StageOut.model_validate(s) for s in record.stages],
        low_evidence=record.low_evidence,
        latency_ms=record.latency_ms,
        created_at=record.created_at,
        rating="up" if record.rating == "up" else "down" if record.rating == "down" else None,
    )


def _entries(entries: list[ReportEntry]) -> list[cm.ReportEntryOut]:
    return [
        cm.ReportEntryOut(
            question=e.question,
            count=e.count,
            last_at=e.last_at,
            answer_ids=e.answer_ids,
            comments=e.comments,
        )
        for e in entries
    ]


def router(state: GatewayState) -> APIRouter:
    api = APIRouter()
    caller = public_caller(state)
    admin = admin_caller(state, "admin")
    retention = state.settings.conversation_retention_days

    @api.get(
        "/v1/conversations",
        response_model=cm.ConversationList,
        responses=READ_ERRORS,
        openapi_extra=OPTIONAL_AUTH,
        summary="Your stored conversations, newest first.",
    )
    async def list_conversations(
        principal: Annotated[Principal, Depends(caller)],
        collection: Annotated[str | None, Query(pattern=models.COLLECTION_PATTERN)] = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
    ) -> cm.ConversationList:
        store = store_of(state)
        if store is None or not store.enabled:
            return cm.ConversationList(conversations=[])
        found = await store.conversations(reader_of(principal), collection=collection, limit=limit)
        return cm.ConversationList(
            conversations=[cm.ConversationSummary(**_summary(c)) for c in found]
        )

    @api.get(
        "/v1/conversations/{conversation_id}",
        response_model=cm.ConversationOut,
        responses=READ_ERRORS,
        openapi_extra=OPTIONAL_AUTH,
        summary="One stored conversation with its answers, citations and stage reports.",
    )
    async def get_conversation(
        conversation_id: ConversationId, principal: Annotated[Principal, Depends(caller)]
    ) -> cm.ConversationOut:
        store = store_of(state)
        found = None
        if store is not None and store.enabled:
            found = await store.conversation(reader_of(principal), conversation_id)
        if found is None:
            raise NotFound("conversation not found")
        conversation, answers = found
        return cm.ConversationOut(**_summary(conversation), answers=[_answer(a) for a in answers])

    @api.post(
        "/v1/feedback",
        response_model=cm.FeedbackOut,
        responses=READ_ERRORS,
        openapi_extra=OPTIONAL_AUTH,
        summary="Rate an answer (thumbs up or down, with an optional comment); rating "
        "again replaces your rating.",
    )
    async def feedback(
        body: cm.FeedbackBody, principal: Annotated[Principal, Depends(caller)]
    ) -> cm.FeedbackOut:
        store = store_of(state)
        recorded = None
        if store is not None and store.enabled:
            recorded = await store.rate(
                reader_of(principal), body.answer_id, body.rating, body.comment.strip()
            )
        if recorded is None:
            raise NotFound("answer not found")
        return cm.FeedbackOut(
            answer_id=recorded.answer_id,
            rating=body.rating,
            comment=recorded.comment,
            created_at=recorded.created_at,
        )

    @api.get(
        "/v1/admin/report",
        response_model=cm.ReportOut,
        responses=ADMIN_ERRORS,
        summary="What to write next: a collection's most-asked, declined, low-evidence and "
        "down-rated questions, with counts.",
    )
    async def report(
        principal: Annotated[Principal, Depends(admin)],
        collection: Annotated[str, Query(pattern=models.COLLECTION_PATTERN)],
        limit: Annotated[int, Query(ge=1, le=100)] = 20,
    ) -> cm.ReportOut:
        if principal.collections is not None and collection not in principal.collections:
            raise NotFound("collection not found")  # as for any collection the key cannot use
        tenant = None if principal.operator else principal.tenant
        store = store_of(state)
        if store is None or not store.enabled:
            return cm.ReportOut(
                collection=collection,
                tenant=tenant,
                answers=0,
                rated_up=0,
                rated_down=0,
                most_asked=[],
                declined=[],
                low_evidence=[],
                marked_wrong=[],
                retention_days=retention,
            )
        found = await store.report(collection, tenant, limit=limit)
        return cm.ReportOut(
            collection=collection,
            tenant=tenant,
            answers=found.answers,
            rated_up=found.rated_up,
            rated_down=found.rated_down,
            most_asked=_entries(found.most_asked),
            declined=_entries(found.declined),
            low_evidence=_entries(found.low_evidence),
            marked_wrong=_entries(found.marked_wrong),
            retention_days=retention,
        )

    return api
