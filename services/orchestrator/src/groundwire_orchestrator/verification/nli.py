"""The entailment verifier (``method: nli``): the reranker's NLI model reads each claim
against windows of its passage.

Per (claim, passage) pair:

- windows: each sentence of the passage, and each run of ``window_sentences``
  consecutive sentences (a claim often joins two statements), none longer than the
  model reads with the claim beside it (a longer single sentence is sent anyway; the
  reranker cuts its end). At most ``max_windows`` per pair: those sharing most words
  with the claim, plus the first sentence — it usually names the subject the others
  refer to.
- the premise is a window, the hypothesis the claim; the model answers the
  probabilities of entailment, neutral and contradiction.
- support = the highest entailment over the windows; evidence = that window's
  [start, end) in the passage.
- CONTRADICTED when the highest contradiction reaches ``contradiction_threshold`` and
  exceeds the support (evidence: the contradicting window); SUPPORTED when the support
  reaches ``support_threshold``; UNSUPPORTED otherwise.

One judge() sends every window of every claim, in calls of at most ``batch_pairs``
pairs (whole claims per call) run concurrently, each bounded by ``timeout_s``. A call
that fails (no NLI model, queue full, timeout, reranker down) leaves its claims
UNCHECKED with the reason, and the chain hands them to the next verifier.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from groundwire_core.errors import GroundwireError
from groundwire_orchestrator.clients.interfaces import Entailer
from groundwire_orchestrator.clients.reranker import EntailProbs
from groundwire_orchestrator.domain import Verification
from groundwire_orchestrator.text.sentences import content_words, overlap, sentence_spans
from groundwire_orchestrator.verification.base import Claim, Judgement, Method

# Characters per token, to keep a window and its claim within the model's pair budget
# without a tokenizer here; English prose runs ~4, so 3 leaves room for the specials.
CHARS_PER_TOKEN = 3

Span = tuple[int, int]


@dataclass(frozen=True)
class NliThresholds:
    support: float = 0.5
    """Entailment probability a claim needs to be SUPPORTED."""
    contradiction: float = 0.5
    """Contradiction probability that makes a claim CONTRADICTED (when above support)."""


def windows(
    claim: str, passage: str, *, max_chars: int, window_sentences: int, max_windows: int
) -> list[Span]:
    """[start, end) of the passage windows to read ``claim`` against (module docstring).

    The whole passage is one window when it has no sentence boundary it can be cut at.
    """
    spans = sentence_spans(passage)
    if not spans:
        stripped = passage.strip()
        if not stripped:
            return []
        start = passage.index(stripped)
        return [(start, start + len(stripped))]
    found: list[Span] = list(spans)
    for size in range(2, window_sentences + 1):
        for i in range(len(spans) - size + 1):
            span = (spans[i][0], spans[i + size - 1][1])
            if span[1] - span[0] <= max_chars:
                found.append(span)
    if len(found) <= max_windows:
        return found
    wanted = content_words(claim)
    ranked = sorted(
        found[1:], key=lambda s: -overlap(wanted, content_words(passage[s[0] : s[1]]))
    )
    return [found[0], *ranked[: max_windows - 1]]


class NliVerifier:
    """Satisfies :class:`~groundwire_orchestrator.verification.base.ClaimVerifier`."""

    def __init__(
        self,
        client: Entailer,
        *,
        thresholds: NliThresholds | None = None,
        timeout_s: float = 5.0,
        max_tokens: int = 512,
        window_sentences: int = 2,
        max_windows: int = 16,
        batch_pairs: int = 64,
    ) -> None:
        """``max_tokens``: the NLI model's pair budget (the reranker's Info says it)."""
        self._client = client
        self._thresholds = thresholds or NliThresholds()
        self._timeout_s = timeout_s
        self._max_tokens = max_tokens
        self._window_sentences = max(1, window_sentences)
        self._max_windows = max(1, max_windows)
        self._batch_pairs = max(1, batch_pairs)

    @property
    def method(self) -> Method:
        return "nli"

    @property
    def thresholds(self) -> NliThresholds:
        return self._thresholds

    async def judge(self, claims: Sequence[Claim]) -> list[Judgement]:
        """One judgement per claim; UNCHECKED (with the reason) for claims whose call
        failed. Never raises for the reranker."""
        out: list[Judgement | None] = [None] * len(claims)
        plans: list[tuple[int, list[Span]]] = []
        for i, claim in enumerate(claims):
            if not claim.text.strip():
                out[i] = _unchecked("the claim is empty")
                continue
            room = self._max_tokens * CHARS_PER_TOKEN - len(claim.text)
            spans = windows(
                claim.text,
                claim.passage,
                max_chars=max(room, 1),
                window_sentences=self._window_sentences,
                max_windows=self._max_windows,
            )
            if not spans:
                out[i] = Judgement(
                    Verification.UNSUPPORTED, 0.0, "nli", reason="the passage is empty"
                )
                continue
            plans.append((i, spans))
        calls: list[list[tuple[int, list[Span]]]] = [[]]
        size = 0
        for plan in plans:
            if calls[-1] and size + len(plan[1]) > self._batch_pairs:
                calls.append([])
                size = 0
            calls[-1].append(plan)
            size += len(plan[1])
        results = await asyncio.gather(*(self._call(claims, call) for call in calls if call))
        for call, judged in zip((c for c in calls if c), results, strict=True):
            for (i, _), judgement in zip(call, judged, strict=True):
                out[i] = judgement
        return [j if j is not None else _unchecked("not judged") for j in out]

    async def _call(
        self, claims: Sequence[Claim], call: list[tuple[int, list[Span]]]
    ) -> list[Judgement]:
        pairs = [
            (claims[i].passage[start:end], claims[i].text)
            for i, spans in call
            for start, end in spans
        ]
        try:
            probs = await asyncio.wait_for(
                self._client.entail(pairs, timeout_s=self._timeout_s),
                timeout=self._timeout_s + 0.5,  # the RPC's own deadline normally fires first
            )
        except GroundwireError as error:
            return [_unchecked(f"{error.dependency or 'reranker'}: {error.message}")] * len(call)
        except TimeoutError:
            return [_unchecked(f"reranker: no entailment within {self._timeout_s:g}s")] * len(
                call
            )
        if len(probs) != len(pairs):
            return [_unchecked("reranker: a reply of the wrong length")] * len(call)
        out = []
        at = 0
        for _, spans in call:
            out.append(self._verdict(spans, probs[at : at + len(spans)]))
            at += len(spans)
        return out

    def _verdict(self, spans: list[Span], probs: Sequence[EntailProbs]) -> Judgement:
        best = max(range(len(spans)), key=lambda k: probs[k].entailment)
        worst = max(range(len(spans)), key=lambda k: probs[k].contradiction)
        support = probs[best].entailment
        contradiction = probs[worst].contradiction
        t = self._thresholds
        if contradiction >= t.contradiction and contradiction > support:
            status, evidence = Verification.CONTRADICTED, spans[worst]
            reason = f"contradiction {contradiction:.2f} (threshold {t.contradiction:g})"
        else:
            status = (
                Verification.SUPPORTED if support >= t.support else Verification.UNSUPPORTED
            )
            evidence = spans[best]
            reason = f"entailment {support:.2f} (threshold {t.support:g})"
        return Judgement(
            status,
            round(support, 4),
            "nli",
            contradiction=round(contradiction, 4),
            evidence=evidence,
            reason=reason,
        )


def _unchecked(why: str) -> Judgement:
    return Judgement(Verification.UNCHECKED, 0.0, "nli", reason=why)
