"""The citation verifiers: the LLM judge (verdicts, evidence located in the passage,
invalid JSON, timeouts and missing verdicts falling back), the chain's order and the
similarity score reported as ``similarity``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from groundwire_core.errors import Overloaded
from groundwire_orchestrator.domain import NumberedSource, Verification
from groundwire_orchestrator.llm.base import LLMRequest
from groundwire_orchestrator.stages.citations import CitationVerifier, VerificationInput
from groundwire_orchestrator.text.passages import PassageVectors
from groundwire_orchestrator.verification.base import Claim, Judgement, Method
from groundwire_orchestrator.verification.chain import VerifierChain, parse_order
from groundwire_orchestrator.verification.judge import LlmJudge, judge_message
from groundwire_orchestrator.verification.similarity import SimilarityVerifier
from tests.unit.orchestrator.doubles import (
    FakeEmbedder,
    FakeReranker,
    Scripted,
    ScriptedLLM,
    chunk,
)

PASSAGE = (
    "Rate limits are enforced per API key. Each key may send sixty requests per\n"
    "minute; beyond that the gateway answers 429."
)
SUPPORTED = "Rate limits apply to each API key."
CONTRADICTED = "Each key may send twenty requests per minute."


def _verdicts(*items: dict[str, Any]) -> str:
    return json.dumps({"verdicts": list(items)})


def _chain(llm: ScriptedLLM, *, timeout_s: float = 2.0, batch: int = 8) -> VerifierChain:
    return VerifierChain(
        [
            LlmJudge(llm, timeout_s=timeout_s, batch_size=batch),
            SimilarityVerifier(PassageVectors(FakeEmbedder()), threshold=0.5),
        ]
    )


CLAIMS = [Claim(SUPPORTED, PASSAGE), Claim(CONTRADICTED, PASSAGE)]


async def test_the_judges_verdicts_with_their_evidence_located_in_the_passage() -> None:
    llm = ScriptedLLM(
        fast=[
            _verdicts(
                {
                    "claim": 1,
                    "verdict": "supported",
                    "confidence": 0.93,
                    "evidence": "Rate limits are enforced per API key.",
                },
                # quoted on one line: the passage wraps it
                {
                    "claim": 2,
                    "verdict": "contradicted",
                    "confidence": 0.88,
                    "evidence": "Each key may send sixty requests per minute;",
                },
            )
        ]
    )
    supported, contradicted = await _chain(llm).judge(CLAIMS)
    assert (supported.status, supported.method, supported.support) == (
        Verification.SUPPORTED,
        "llm",
        0.93,
    )
    assert supported.evidence is not None
    assert PASSAGE[slice(*supported.evidence)] == "Rate limits are enforced per API key."
    assert (contradicted.status, contradicted.method) == (Verification.CONTRADICTED, "llm")
    assert contradicted.contradiction == 0.88 and contradicted.support == 0.0
    assert contradicted.evidence is not None
    assert PASSAGE[slice(*contradicted.evidence)] == (
        "Each key may send sixty requests per\nminute;"
    )
    [request] = llm.requests
    assert request.role == "fast" and request.system.startswith("You check claims")
    assert request.messages[0].content.count("<passage ") == 1, "a shared passage is sent once"


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("I think both are fine.", "not valid JSON"),
        (_verdicts({"claim": 1, "verdict": "maybe"}), "did not match the schema"),
        (Scripted(error=Overloaded("busy", dependency="llm:fake")), "the LLM failed"),
        (Scripted(text=_verdicts(), delay_s=0.5), "did not answer within 0.05 s"),
    ],
    ids=["not-json", "bad-verdict", "provider-error", "timeout"],
)
async def test_a_failed_judge_falls_back_to_similarity(reply: Any, why: str) -> None:
    llm = ScriptedLLM(fast=[reply])
    sources = {1: NumberedSource(1, chunk(1, PASSAGE))}
    verifier = CitationVerifier(FakeEmbedder(), threshold=0.5, chain=_chain(llm, timeout_s=0.05))
    citations, report = await verifier.run(
        VerificationInput(f"{SUPPORTED[:-1]} [1]. {CONTRADICTED[:-1]} [1].", sources.get)
    )
    assert [c.method for c in citations] == ["similarity", "similarity"]
    assert all(c.status is not Verification.UNCHECKED for c in citations)
    # the similarity score cannot see the contradiction: why it is never proof, and
    # says "similar" (a relevance score), never "supported"
    assert citations[1].status is Verification.SIMILAR
    assert report.fallback and why in report.reason and report.dependency == "llm"
    assert report.details["method_similarity"] == "2"


async def test_a_claim_the_judge_skipped_falls_back_alone() -> None:
    llm = ScriptedLLM(fast=[_verdicts({"claim": 2, "verdict": "not_addressed"})])
    first, second = await _chain(llm).judge(CLAIMS)
    assert first.method == "similarity" and first.status is Verification.SIMILAR
    assert (second.method, second.status) == ("llm", Verification.UNSUPPORTED)


async def test_claims_are_judged_in_concurrent_batches() -> None:
    def answer(request: LLMRequest) -> str:
        content = request.messages[0].content
        n = content.count("<claim ")
        return _verdicts(*({"claim": i, "verdict": "supported"} for i in range(1, n + 1)))

    llm = ScriptedLLM(default_fast=answer)
    claims = [Claim(f"Claim number {i} holds.", PASSAGE) for i in range(5)]
    judged = await _chain(llm, batch=2).judge(claims)
    assert [j.method for j in judged] == ["llm"] * 5
    assert len(llm.requests) == 3
    assert 'number="2"' in judge_message(claims[:2]) and "Claim number 1" in judge_message(
        claims[:2]
    )


def test_the_chain_order_is_validated() -> None:
    assert parse_order(" nli, llm ,similarity") == ("nli", "llm", "similarity")
    for bad in ("nli,nli", "magic", ""):
        with pytest.raises(ValueError):
            parse_order(bad)


async def test_citations_report_the_method_and_the_chain_says_what_it_proves() -> None:
    llm = ScriptedLLM(
        fast=[
            _verdicts(
                {
                    "claim": 1,
                    "verdict": "supported",
                    "evidence": "Rate limits are enforced per API key.",
                }
            )
        ]
    )
    source = chunk(1, PASSAGE)
    verifier = CitationVerifier(FakeEmbedder(), threshold=0.5, chain=_chain(llm))
    assert await verifier.proves_now()
    citations, report = await verifier.run(
        VerificationInput(f"{SUPPORTED[:-1]} [1].", {1: NumberedSource(1, source)}.get)
    )
    [citation] = citations
    assert citation.method == "llm" and not report.fallback
    assert citation.source_span is not None
    assert source.text[slice(*citation.source_span)] == "Rate limits are enforced per API key."
    assert not await CitationVerifier(FakeEmbedder(), threshold=0.5).proves_now()


async def test_readiness_is_probed_at_most_once_per_ttl() -> None:
    from groundwire_orchestrator.clients.reranker import RerankerLoad
    from groundwire_orchestrator.stages.rerank import RerankerLoadCache
    from groundwire_orchestrator.wiring import entailment_ready

    now = [0.0]
    reranker = FakeReranker(load_value=RerankerLoad(True, 0, 0.0, 256, entailment_ready=False))
    info = RerankerLoadCache(reranker, ttl_s=1.0, timeout_s=1.0, clock=lambda: now[0])
    ready = entailment_ready(info)
    assert await ready() is False and await ready() is False
    assert reranker.load_calls == 1
    reranker.load_value = RerankerLoad(True, 0, 0.0, 256, entailment_ready=True)
    now[0] = 1.5
    assert await ready() is True and reranker.load_calls == 2


async def test_a_first_verifier_not_ready_is_named_in_the_fallback() -> None:
    llm = ScriptedLLM(fast=[_verdicts({"claim": 1, "verdict": "supported", "evidence": ""})])
    chain = VerifierChain(
        [
            LlmJudge(llm, timeout_s=2.0, batch_size=8),
            SimilarityVerifier(PassageVectors(FakeEmbedder()), threshold=0.5),
        ],
        ready={"llm": _never_ready},
    )
    verifier = CitationVerifier(FakeEmbedder(), threshold=0.5, chain=chain)
    _, report = await verifier.run(
        VerificationInput(f"{SUPPORTED[:-1]} [1].", {1: NumberedSource(1, chunk(1, PASSAGE))}.get)
    )
    assert report.fallback
    assert report.reason == "llm could not judge 1 citation(s) (llm: not ready): similarity used"
    assert llm.requests == []  # skipped, not tried


async def _never_ready() -> bool:
    return False


class _Unchecking:
    """A first verifier that cannot judge: its reason ends with a parenthesis."""

    @property
    def method(self) -> Method:
        return "nli"

    async def judge(self, claims: Sequence[Claim]) -> list[Judgement]:
        why = "reranker: unavailable (no NLI model)"
        return [Judgement(Verification.UNCHECKED, 0.0, "nli", reason=why)] * len(claims)


async def test_the_fallback_reason_keeps_the_first_verifiers_words_whole() -> None:
    chain = VerifierChain(
        [_Unchecking(), SimilarityVerifier(PassageVectors(FakeEmbedder()), threshold=0.5)]
    )
    verifier = CitationVerifier(FakeEmbedder(), threshold=0.5, chain=chain)
    _, report = await verifier.run(
        VerificationInput(f"{SUPPORTED[:-1]} [1].", {1: NumberedSource(1, chunk(1, PASSAGE))}.get)
    )
    assert report.reason == (
        "nli could not judge 1 citation(s) (nli: reranker: unavailable (no NLI model)): "
        "similarity used"
    )
