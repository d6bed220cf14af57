"""LLM listwise rerank: reorders against the intent, writes reasons, falls back."""

from __future__ import annotations

import json

import pytest

from groundwire_core.errors import Overloaded
from groundwire_orchestrator.domain import QueryAnalysis
from groundwire_orchestrator.stages.listwise import ListwiseInput, ListwiseRerankStage
from tests.unit.orchestrator.doubles import Scripted, ScriptedLLM, chunk

CANDS = [chunk(i, f"restaurant {i} review text") for i in range(1, 6)]
ANALYSIS = QueryAnalysis(
    "quiet ramen", "ramen quiet", "A calm ramen bar.", "dinner", negatives=("loud",), analysed=True
)


def _stage(llm: ScriptedLLM | None, top_k: int = 4) -> ListwiseRerankStage:
    return ListwiseRerankStage(llm, top_k=top_k, timeout_s=1.0)


async def test_reorders_and_writes_reasons_for_the_top() -> None:
    reply = {
        "ranking": [3, 1, 9, 3],
        "reasons": {"3": "quiet, praised ramen", "1": "ok", "2": "not in the top"},
    }
    llm = ScriptedLLM(fast=[json.dumps(reply)])
    out, report = await _stage(llm).run(ListwiseInput(ANALYSIS, CANDS, reasons=2))
    assert [c.chunk_id for c in out] == ["c3", "c1", "c2", "c4", "c5"]
    assert [c.match_reason for c in out] == ["quiet, praised ramen", "ok", "", "", ""]
    assert not report.fallback and report.details["ignored_numbers"] == "2"
    prompt = llm.requests[0]
    assert prompt.role == "fast"
    assert "Must not be: loud" in prompt.messages[0].content
    assert '<passage n="4">' in prompt.messages[0].content
    assert '<passage n="5">' not in prompt.messages[0].content, "only top_k go to the LLM"
    assert "untrusted data" in prompt.system


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Scripted("[3, 1, 2]"), "not valid JSON"),
        (Scripted('{"ranking": []}'), "did not match the schema"),
        (Scripted('{"ranking": [8, 9]}'), "ranked none of the passages"),
        (Scripted(error=Overloaded("529 overloaded", dependency="llm:fake")), "529 overloaded"),
    ],
)
async def test_invalid_output_keeps_the_cross_encoder_order(reply: Scripted, reason: str) -> None:
    out, report = await _stage(ScriptedLLM(fast=[reply])).run(ListwiseInput(ANALYSIS, CANDS))
    assert out == CANDS
    assert report.fallback and reason in report.reason
    assert report.reason.endswith("cross-encoder order kept")


async def test_no_llm() -> None:
    out, report = await _stage(None).run(ListwiseInput(ANALYSIS, CANDS))
    assert out == CANDS and report.fallback and report.dependency == "llm"
