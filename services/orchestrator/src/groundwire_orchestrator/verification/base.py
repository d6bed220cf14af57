"""The contract every citation verifier keeps.

A claim is one sentence (or code block) of an answer with its citation markers
removed; its passage is the text of the chunk it cites. A verifier judges each
(claim, passage) pair on its own: SUPPORTED, CONTRADICTED, UNSUPPORTED (the passage
does not address the claim) or UNCHECKED (the verifier could not run); the similarity
score, which reads no meaning, says QUOTED, SIMILAR or UNRELATED instead. Backends:

- ``nli``: an entailment model served by the reranker service (premise = the best
  passage window, hypothesis = the claim);
- ``llm``: the fast LLM as judge, batched, validated JSON, bounded by a timeout;
- ``similarity``: the lexical-semantic score, reported as a relevance score and never
  as proof (QUOTED for a verbatim quote, SIMILAR or UNRELATED otherwise).

The chain falls back nli -> llm -> similarity per batch when a backend fails, and
each judgement names the method that produced it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from groundwire_orchestrator.domain import Verification

Method = Literal["nli", "llm", "similarity", "none"]


@dataclass(frozen=True)
class Claim:
    text: str
    """The claim, citation markers removed."""
    passage: str
    """The cited chunk's text (its body, heading prefix removed)."""
    verbatim: bool = False
    """Whether the sentence is quoted verbatim from the passage (what a verifier that
    reads no meaning may say about it: QUOTED)."""


@dataclass(frozen=True)
class Judgement:
    status: Verification
    support: float
    """Probability (nli), confidence (llm) or score (similarity) of support, in [0, 1]."""
    method: Method
    contradiction: float = 0.0
    """Probability or confidence that the passage contradicts the claim, in [0, 1]."""
    evidence: tuple[int, int] | None = None
    """[start, end) of the best-supporting sentence or window in the passage."""
    reason: str = ""
    """Why, in a few words (e.g. the judge's note, or why the check did not run)."""
    fell_back: str = ""
    """Why the chain's first verifier did not judge this claim ("" when it did)."""


class ClaimVerifier(Protocol):
    """Judges claims against passages. Never raises for a failed backend: a verifier
    that cannot run returns UNCHECKED judgements with the reason (the fallback chain
    moves to the next backend on those)."""

    @property
    def method(self) -> Method: ...

    async def judge(self, claims: Sequence[Claim]) -> list[Judgement]:
        """One judgement per claim, in order."""
        ...
