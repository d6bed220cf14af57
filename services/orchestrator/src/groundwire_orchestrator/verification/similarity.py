"""The lexical-semantic score, as a verifier (``method: similarity``): what every
citation was checked with before the entailment model and the LLM judge, kept as the
offline fallback and reported as such, never as proof.

Per (claim, passage) pair:

- semantic: the embedder's cosine between the claim and each sentence of the passage,
  and the passage as a whole; the best one counts.
- lexical: the share of the claim's content words (stop words removed, stemmed) that
  occur in the passage.
- support = 0.6 * max(semantic, 0) + 0.4 * lexical, in [0, 1]; a claim with fewer than
  two content words ("Yes.") is judged on the semantic part alone.
- the score reads no meaning, so it never says SUPPORTED, UNSUPPORTED or CONTRADICTED
  (issue #32: a verbatim quote scores ~1.0 against its own chunk by construction, and
  "verified 3 of 3" was printed beside answers that did not answer): QUOTED when the
  sentence is verbatim from the passage (nothing judged), else SIMILAR when the score
  reaches the threshold and UNRELATED under it. The score is reported as a relevance
  score.

Measured (issue #21, SciFact claims with MiniLM at 0.45): 87.5 % of contradicted claims
and 43.8 % of claims the passage does not address are judged SUPPORTED; ROC AUC of
supported vs contradicted 0.61. The rule that halved the support of a claim stating a
figure the passage lacks is gone: it rejected every supported claim it fired on (a
rate worked out from counts is a figure the passage implies, not states).

Embedder down -> UNCHECKED judgements with the reason (the chain has nothing after it).
"""

from __future__ import annotations

from collections.abc import Sequence

from groundwire_core.errors import GroundwireError
from groundwire_orchestrator.domain import Verification
from groundwire_orchestrator.text.passages import PassageVectors, Vector, cosine
from groundwire_orchestrator.text.sentences import (
    content_words,
    overlap,
    prose_sentences,
    sentence_spans,
)
from groundwire_orchestrator.verification.base import Claim, Judgement, Method
from groundwire_orchestrator.verification.evidence import best_sentence, flat

SEMANTIC_WEIGHT = 0.6
LEXICAL_WEIGHT = 0.4
UNITS_PER_PASSAGE = 6
"""Passage sentences embedded per passage at most (those sharing most words with its
claims): bounds the embedder's work for long chunks."""


def _units(passage: str) -> list[str]:
    units = [u for u in prose_sentences(passage) if len(u) >= 3]
    whole = flat(passage)
    return [*units, whole] if whole else units


def _closest_units(passage: str, claims: Sequence[str]) -> list[str]:
    units = _units(passage)
    if len(units) <= UNITS_PER_PASSAGE + 1:
        return units
    words = [w for c in claims for w in content_words(c)]
    sentences, whole = units[:-1], units[-1]
    ranked = sorted(sentences, key=lambda u: -overlap(words, content_words(u)))
    return [*ranked[:UNITS_PER_PASSAGE], whole]


class SimilarityVerifier:
    """Satisfies :class:`~groundwire_orchestrator.verification.base.ClaimVerifier`."""

    def __init__(self, passages: PassageVectors | None, *, threshold: float) -> None:
        """``passages``: the chunk-text vectors (None: no embedder, all UNCHECKED)."""
        self._passages = passages
        self._threshold = threshold

    @property
    def method(self) -> Method:
        return "similarity"

    @property
    def threshold(self) -> float:
        return self._threshold

    async def judge(self, claims: Sequence[Claim]) -> list[Judgement]:
        """One judgement per claim; UNCHECKED (with the reason) when the embedder is
        missing or fails. Never raises for the embedder."""
        if not claims:
            return []
        if self._passages is None:
            return [_unchecked("no embedder is configured")] * len(claims)
        by_passage: dict[str, list[str]] = {}
        for c in claims:
            by_passage.setdefault(c.passage, []).append(c.text)
        units = [u for p, cs in by_passage.items() for u in _closest_units(p, cs)]
        try:
            got = await self._passages.get([*(c.text for c in claims), *units], keep=units)
        except GroundwireError as error:
            return [_unchecked(error.message, error.dependency or "embedder")] * len(claims)
        return [self._judge_one(c, got.vectors) for c in claims]

    def support(self, claim: str, passage: str, vectors: dict[str, Vector]) -> float:
        """Support of ``claim`` by ``passage`` in [0, 1] (see the module docstring)."""
        claim_vec = vectors.get(claim)
        semantic = max(
            (cosine(claim_vec, vectors[u]) for u in _units(passage) if u in vectors and claim_vec),
            default=0.0,
        )
        semantic = max(semantic, 0.0)
        words = content_words(claim)
        if len(set(words)) < 2:
            return min(semantic, 1.0)
        lexical = overlap(words, content_words(passage))
        return min(SEMANTIC_WEIGHT * semantic + LEXICAL_WEIGHT * lexical, 1.0)

    def _evidence(
        self, claim: str, passage: str, vectors: dict[str, Vector]
    ) -> tuple[int, int] | None:
        """The passage sentence closest to the claim (by cosine when embedded, else
        by shared words), as [start, end) of the passage."""
        claim_vec = vectors.get(claim)
        best: tuple[float, tuple[int, int]] | None = None
        for start, end in sentence_spans(passage):
            cleaned = prose_sentences(passage[start:end])
            vec = vectors.get(cleaned[0]) if len(cleaned) == 1 else None
            if vec is None or claim_vec is None:
                continue
            score = cosine(claim_vec, vec)
            if best is None or score > best[0]:
                best = (score, (start, end))
        return best[1] if best else best_sentence(claim, passage)

    def _judge_one(self, claim: Claim, vectors: dict[str, Vector]) -> Judgement:
        score = round(self.support(claim.text, claim.passage, vectors), 4)
        if claim.verbatim:
            status = Verification.QUOTED
            reason = f"quoted verbatim; relevance {score:.2f} by similarity, meaning not checked"
        else:
            status = (
                Verification.SIMILAR if score >= self._threshold else Verification.UNRELATED
            )
            reason = (
                f"relevance {score:.2f} by similarity (threshold {self._threshold:g}), "
                "meaning not checked"
            )
        evidence = self._evidence(claim.text, claim.passage, vectors)
        return Judgement(status, score, "similarity", evidence=evidence, reason=reason)


def _unchecked(why: str, dependency: str = "embedder") -> Judgement:
    return Judgement(
        Verification.UNCHECKED, 0.0, "similarity", reason=f"{dependency}: {why}"
    )
