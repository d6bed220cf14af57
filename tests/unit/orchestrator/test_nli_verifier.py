"""The entailment verifier: passage windows, the verdict from the best window, spans
that point at the evidence, and UNCHECKED (never an exception) when the reranker's NLI
model cannot answer. The NLI model is a scripted in-process double here; the real one
is served and checked in tests/integration/reranker/test_nli.py."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from groundwire_core.errors import Overloaded, Unavailable
from groundwire_orchestrator.clients.reranker import EntailProbs
from groundwire_orchestrator.domain import Verification
from groundwire_orchestrator.verification.base import Claim
from groundwire_orchestrator.verification.nli import NliThresholds, NliVerifier, windows

PASSAGE = (
    "Each API key may send sixty requests per minute. Limits are counted per key, "
    "not per account. Bursts above the limit get HTTP 429 with a Retry-After header."
)


class ScriptedNli:
    """Entails a hypothesis when the premise holds a phrase it maps to "entail",
    contradicts it for "contradict"; neutral otherwise. Records every call."""

    def __init__(
        self,
        rules: dict[str, dict[str, str]],
        *,
        error: Exception | None = None,
        delay_s: float = 0.0,
    ) -> None:
        self.rules = rules  # hypothesis -> {premise phrase: "entail" | "contradict"}
        self.error = error
        self.delay_s = delay_s
        self.calls: list[list[tuple[str, str]]] = []
        self.in_flight = 0
        self.most_in_flight = 0  # the most calls in progress at once

    async def entail(
        self, pairs: Sequence[tuple[str, str]], *, timeout_s: float
    ) -> list[EntailProbs]:
        self.calls.append(list(pairs))
        if self.delay_s:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            try:
                await asyncio.sleep(self.delay_s)
            finally:
                self.in_flight -= 1
        if self.error is not None:
            raise self.error
        out = []
        for premise, hypothesis in pairs:
            verdicts = [v for k, v in self.rules.get(hypothesis, {}).items() if k in premise]
            if "contradict" in verdicts:
                out.append(EntailProbs(0.05, 0.15, 0.8))
            elif "entail" in verdicts:
                # a longer window dilutes the evidence a little: the sentence wins
                out.append(EntailProbs(0.9 - 0.001 * len(premise) / 10, 0.05, 0.05))
            else:
                out.append(EntailProbs(0.1, 0.8, 0.1))
        return out


def test_windows_are_sentences_and_runs_within_the_budget() -> None:
    spans = windows("limit", PASSAGE, max_chars=1000, window_sentences=2, max_windows=50)
    texts = [PASSAGE[s:e] for s, e in spans]
    assert texts[:3] == [
        "Each API key may send sixty requests per minute.",
        "Limits are counted per key, not per account.",
        "Bursts above the limit get HTTP 429 with a Retry-After header.",
    ]
    assert texts[3] == f"{texts[0]} {texts[1]}"
    assert len(spans) == 5
    short = windows("limit", PASSAGE, max_chars=60, window_sentences=3, max_windows=50)
    assert len(short) == 3, "runs longer than the budget are left out"
    assert windows("x", "   ", max_chars=100, window_sentences=2, max_windows=5) == []
    assert windows("x", "  no boundary here", max_chars=100, window_sentences=2, max_windows=5) == [
        (2, 18)
    ]


def test_many_windows_keep_the_first_sentence_and_those_sharing_words() -> None:
    passage = " ".join(f"Sentence {i} talks about topic {i}." for i in range(30))
    passage += " The reranker listens on port 50052."
    spans = windows(
        "which port does the reranker listen on",
        passage,
        max_chars=1000,
        window_sentences=2,
        max_windows=4,
    )
    texts = [passage[s:e] for s, e in spans]
    assert len(texts) == 4
    assert texts[0] == "Sentence 0 talks about topic 0."
    assert "The reranker listens on port 50052." in texts


async def test_verdicts_and_evidence_spans() -> None:
    supported = "An API key may send sixty requests a minute."
    contradicted = "Limits are counted per account."
    unrelated = "The cafeteria serves soup."
    nli = ScriptedNli(
        {
            supported: {"sixty requests": "entail"},
            contradicted: {"not per account": "contradict"},
        }
    )
    verifier = NliVerifier(nli, thresholds=NliThresholds(support=0.5, contradiction=0.5))
    assert verifier.method == "nli"
    got = await verifier.judge(
        [Claim(supported, PASSAGE), Claim(contradicted, PASSAGE), Claim(unrelated, PASSAGE)]
    )
    assert [j.status for j in got] == [
        Verification.SUPPORTED,
        Verification.CONTRADICTED,
        Verification.UNSUPPORTED,
    ]
    assert all(j.method == "nli" for j in got)
    s, e = got[0].evidence or (0, 0)
    assert PASSAGE[s:e] == "Each API key may send sixty requests per minute."
    assert got[0].support > 0.85 and got[0].contradiction == pytest.approx(0.1)
    s, e = got[1].evidence or (0, 0)
    assert PASSAGE[s:e] == "Limits are counted per key, not per account."
    assert got[1].contradiction == pytest.approx(0.8) and "contradiction 0.80" in got[1].reason
    assert got[2].support == pytest.approx(0.1) and "entailment 0.10" in got[2].reason
    assert len(nli.calls) == 1, "one call for all claims within the batch size"
    assert {h for _, h in nli.calls[0]} == {supported, contradicted, unrelated}


async def test_a_weak_contradiction_does_not_outvote_entailment() -> None:
    claim = "Limits are counted per key."
    nli = ScriptedNli({claim: {"per key": "entail", "Bursts": "contradict"}})
    verifier = NliVerifier(nli, thresholds=NliThresholds(support=0.5, contradiction=0.95))
    (judgement,) = await verifier.judge([Claim(claim, PASSAGE)])
    assert judgement.status is Verification.SUPPORTED
    assert judgement.contradiction == pytest.approx(0.8), "reported even when not decisive"


async def test_calls_hold_whole_claims_and_run_concurrently() -> None:
    nli = ScriptedNli({}, delay_s=0.2)
    verifier = NliVerifier(nli, batch_pairs=6, timeout_s=2.0)
    claims = [Claim(f"claim number {i}", PASSAGE) for i in range(5)]  # 5 windows each
    got = await verifier.judge(claims)
    assert [j.status for j in got] == [Verification.UNSUPPORTED] * 5
    assert len(nli.calls) == 5 and all(len(c) == 5 for c in nli.calls)
    assert nli.most_in_flight == 5, "the calls overlap"


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (Unavailable("no entailment (NLI) model is configured", dependency="reranker"),
         "reranker: no entailment (NLI) model"),
        (Overloaded("the entailment queue is full", retry_after_s=0.1, dependency="reranker"),
         "queue is full"),
    ],
)  # fmt: skip
async def test_a_failed_call_leaves_its_claims_unchecked(error: Exception, reason: str) -> None:
    verifier = NliVerifier(ScriptedNli({}, error=error))
    got = await verifier.judge([Claim("a claim", PASSAGE), Claim("another", PASSAGE)])
    assert [j.status for j in got] == [Verification.UNCHECKED] * 2
    assert all(reason in j.reason and j.method == "nli" for j in got)


async def test_a_slow_model_is_cut_off_by_the_timeout() -> None:
    verifier = NliVerifier(ScriptedNli({}, delay_s=5.0), timeout_s=0.05)
    started = asyncio.get_running_loop().time()
    (judgement,) = await verifier.judge([Claim("a claim", PASSAGE)])
    assert asyncio.get_running_loop().time() - started < 2
    assert judgement.status is Verification.UNCHECKED and "no entailment within" in judgement.reason


async def test_empty_claims_and_passages_are_not_sent() -> None:
    nli = ScriptedNli({})
    got = await NliVerifier(nli).judge([Claim("  ", PASSAGE), Claim("a claim", " \n ")])
    assert [j.status for j in got] == [Verification.UNCHECKED, Verification.UNSUPPORTED]
    assert nli.calls == [] and await NliVerifier(nli).judge([]) == []
