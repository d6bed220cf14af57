"""The one module converting between orchestrator protobuf messages and domain types."""

from __future__ import annotations

from collections.abc import Sequence

from groundwire.common.v1 import common_pb2
from groundwire.orchestrator.v1 import orchestrator_pb2
from groundwire_core.errors import InvalidInput
from groundwire_orchestrator.domain import (
    AnswerDelta,
    AnswerDone,
    AnswerReset,
    AskEvent,
    Candidate,
    Citation,
    CitationsDone,
    FieldFilter,
    NumberedSource,
    RetrievalDone,
    StageReport,
    StagesDone,
    Turn,
    Verification,
    Withheld,
)
from groundwire_orchestrator.fusion import FusionChoice, check_method, check_weights
from groundwire_orchestrator.usage import LLMUsage

MODES = {
    "generated": orchestrator_pb2.ANSWER_MODE_GENERATED,
    "extractive": orchestrator_pb2.ANSWER_MODE_EXTRACTIVE,
    "declined": orchestrator_pb2.ANSWER_MODE_DECLINED,
}

STATUSES = {
    Verification.SUPPORTED: orchestrator_pb2.VERIFICATION_STATUS_SUPPORTED,
    Verification.UNSUPPORTED: orchestrator_pb2.VERIFICATION_STATUS_UNSUPPORTED,
    Verification.UNCHECKED: orchestrator_pb2.VERIFICATION_STATUS_UNCHECKED,
    Verification.CONTRADICTED: orchestrator_pb2.VERIFICATION_STATUS_CONTRADICTED,
    Verification.QUOTED: orchestrator_pb2.VERIFICATION_STATUS_QUOTED,
    Verification.SIMILAR: orchestrator_pb2.VERIFICATION_STATUS_SIMILAR,
    Verification.UNRELATED: orchestrator_pb2.VERIFICATION_STATUS_UNRELATED,
}

_ROLES = {orchestrator_pb2.ROLE_USER: "user", orchestrator_pb2.ROLE_ASSISTANT: "assistant"}


def filters_from_proto(filters: Sequence[orchestrator_pb2.FieldFilter]) -> list[FieldFilter]:
    return [FieldFilter(f.field, tuple(f.any_of)) for f in filters]


def group_by_source_from_proto(request: orchestrator_pb2.SearchRequest) -> bool:
    """Whether the search is by document. Raises InvalidInput for an unknown value."""
    if request.group_by in (orchestrator_pb2.GROUP_BY_UNSPECIFIED, orchestrator_pb2.GROUP_BY_CHUNK):
        return False
    if request.group_by == orchestrator_pb2.GROUP_BY_DOCUMENT:
        return True
    raise InvalidInput(f"unknown group_by {request.group_by}")


def fusion_from_proto(request: orchestrator_pb2.SearchRequest) -> FusionChoice:
    """The search's own fusion (unset parts: the configured ones). The wire enum is
    the retriever's, matched by name. Raises InvalidInput for an unknown fusion value,
    an unknown path or a bad weight."""
    method = ""
    if request.fusion != orchestrator_pb2.FUSION_UNSPECIFIED:
        try:
            method = orchestrator_pb2.Fusion.Name(request.fusion).removeprefix("FUSION_").lower()
            check_method(method)
        except ValueError:
            raise InvalidInput(f"unknown fusion value {request.fusion}") from None
    try:
        weights = check_weights(dict(request.fusion_weights))
    except ValueError as e:
        raise InvalidInput(str(e)) from None
    return FusionChoice(method, weights)


def turns_from_proto(messages: Sequence[orchestrator_pb2.Message]) -> list[Turn]:
    """The conversation; raises InvalidInput for a message without a role."""
    turns = []
    for i, m in enumerate(messages):
        role = _ROLES.get(m.role)
        if role is None:
            raise InvalidInput(f"message {i} has no role (user or assistant)")
        turns.append(Turn("user" if role == "user" else "assistant", m.content))
    return turns


def source_to_proto(number: int, cand: Candidate) -> orchestrator_pb2.Source:
    return orchestrator_pb2.Source(
        number=number,
        chunk_id=cand.chunk_id,
        source_id=cand.source_id,
        title=cand.title,
        heading_path=list(cand.heading_path),
        url=cand.url,
        text=cand.text,
        score=cand.score,
        match_reason=cand.match_reason,
        injection_flagged=cand.injection_flagged,
        matching_chunks=cand.matching_chunks,
        other_headings=list(cand.other_headings),
        live=cand.live,
        fetched_at=cand.fetched_at,
    )


def sources_to_proto(cands: Sequence[Candidate]) -> list[orchestrator_pb2.Source]:
    """Ranked results: ``number`` is the rank from 1."""
    return [source_to_proto(i, c) for i, c in enumerate(cands, start=1)]


def numbered_to_proto(sources: Sequence[NumberedSource]) -> list[orchestrator_pb2.Source]:
    return [source_to_proto(s.number, s.candidate) for s in sources]


def _span(span: tuple[int, int] | None) -> orchestrator_pb2.Span | None:
    return None if span is None else orchestrator_pb2.Span(start=span[0], end=span[1])


def citation_to_proto(citation: Citation) -> orchestrator_pb2.Citation:
    return orchestrator_pb2.Citation(
        number=citation.number,
        sentence=citation.sentence,
        status=STATUSES[citation.status],
        support=citation.support,
        method=citation.method,
        contradiction=citation.contradiction,
        answer_span=_span(citation.answer_span),
        source_span=_span(citation.source_span),
        reason=citation.reason,
        chunk_span=_span(citation.chunk_span),
    )


def withheld_to_proto(withheld: Withheld) -> orchestrator_pb2.Withheld:
    return orchestrator_pb2.Withheld(
        sentence=withheld.sentence,
        numbers=list(withheld.numbers),
        status=STATUSES[withheld.status],
        reason=withheld.reason,
    )


def stage_to_proto(stage: StageReport) -> common_pb2.StageReport:
    return common_pb2.StageReport(
        name=stage.name,
        ms=stage.ms,
        fallback=stage.fallback,
        reason=stage.reason,
        dependency=stage.dependency,
        details=stage.details,
    )


def event_to_proto(event: AskEvent) -> orchestrator_pb2.AskEvent:
    match event:
        case RetrievalDone(sources):
            return orchestrator_pb2.AskEvent(
                retrieval=orchestrator_pb2.RetrievalEvent(sources=numbered_to_proto(sources))
            )
        case AnswerDelta(text):
            return orchestrator_pb2.AskEvent(delta=orchestrator_pb2.DeltaEvent(text=text))
        case AnswerReset(reason):
            return orchestrator_pb2.AskEvent(reset=orchestrator_pb2.ResetEvent(reason=reason))
        case CitationsDone(sources, citations, withheld):
            return orchestrator_pb2.AskEvent(
                citations=orchestrator_pb2.CitationsEvent(
                    sources=numbered_to_proto(sources),
                    citations=[citation_to_proto(c) for c in citations],
                    withheld=[withheld_to_proto(w) for w in withheld],
                )
            )
        case StagesDone(stages):
            return orchestrator_pb2.AskEvent(
                stages=orchestrator_pb2.StagesEvent(stages=[stage_to_proto(s) for s in stages])
            )
        case AnswerDone(mode, answer, unsupported):
            return orchestrator_pb2.AskEvent(
                done=orchestrator_pb2.DoneEvent(
                    mode=MODES[mode], answer=answer, unsupported_citations=unsupported
                )
            )


def usage_to_proto(usage: LLMUsage) -> orchestrator_pb2.LlmUsage:
    return orchestrator_pb2.LlmUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        estimated=usage.estimated,
    )
