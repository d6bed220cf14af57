"""The one module converting between orchestrator protobuf messages and domain types."""

from __future__ import annotations

from collections.abc import Sequence

from groundwire.common.v1 import common_pb2
from groundwire.orchestrator.v1 import orchestrator_pb2
from groundwire_orchestrator.domain import Candidate, FieldFilter, StageReport

MODES = {
    "generated": orchestrator_pb2.ANSWER_MODE_GENERATED,
    "extractive": orchestrator_pb2.ANSWER_MODE_EXTRACTIVE,
    "declined": orchestrator_pb2.ANSWER_MODE_DECLINED,
}


def filters_from_proto(filters: Sequence[orchestrator_pb2.FieldFilter]) -> list[FieldFilter]:
    return [FieldFilter(f.field, tuple(f.any_of)) for f in filters]


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
    )


def sources_to_proto(cands: Sequence[Candidate]) -> list[orchestrator_pb2.Source]:
    return [source_to_proto(i, c) for i, c in enumerate(cands, start=1)]


def stage_to_proto(stage: StageReport) -> common_pb2.StageReport:
    return common_pb2.StageReport(
        name=stage.name,
        ms=stage.ms,
        fallback=stage.fallback,
        reason=stage.reason,
        dependency=stage.dependency,
        details=stage.details,
    )
