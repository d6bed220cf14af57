"""Verifiers in the configured order (nli -> llm -> similarity by default): each
claim is judged by the first verifier that can; the claims a verifier leaves
UNCHECKED (its backend failed, timed out or answered badly) go to the next one. The
judgement names the method that produced it; a claim no verifier could check stays
UNCHECKED with the last reason.

A verifier may come with a readiness check (the reranker serves an NLI model only when
one is installed; wiring reads it from the reranker's cached Info): one that is not
ready is skipped, and whether the chain can prove anything now (an nli or llm verifier
ready) decides verify-before-show's ``auto``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace

from groundwire_orchestrator.domain import Verification
from groundwire_orchestrator.verification.base import Claim, ClaimVerifier, Judgement, Method

METHODS: tuple[Method, ...] = ("nli", "llm", "similarity")
PROVING: frozenset[Method] = frozenset({"nli", "llm"})
"""Methods that tell support from a shared topic: what verify-before-show acts on."""

ReadyCheck = Callable[[], Awaitable[bool]]


def parse_order(value: str) -> tuple[Method, ...]:
    """The verifier methods of a comma-separated list, in order. Raises ValueError
    naming an unknown or repeated method."""
    order: list[Method] = []
    for raw in value.split(","):
        name = raw.strip().lower()
        if not name:
            continue
        method = next((m for m in METHODS if m == name), None)
        if method is None:
            raise ValueError(f"unknown verifier {name!r}; known: {', '.join(METHODS)}")
        if method in order:
            raise ValueError(f"verifier {name!r} is listed twice")
        order.append(method)
    if not order:
        raise ValueError("no verifier is listed")
    return tuple(order)


class VerifierChain:
    """Satisfies :class:`~groundwire_orchestrator.verification.base.ClaimVerifier`."""

    def __init__(
        self,
        verifiers: Sequence[ClaimVerifier],
        ready: Mapping[Method, ReadyCheck] | None = None,
    ) -> None:
        """``ready``: readiness checks by method (a verifier without one is always
        tried)."""
        self._verifiers = tuple(verifiers)
        self._ready = dict(ready or {})

    @property
    def method(self) -> Method:
        return self._verifiers[0].method if self._verifiers else "none"

    @property
    def methods(self) -> tuple[Method, ...]:
        """The methods tried, in order."""
        return tuple(v.method for v in self._verifiers)

    async def available(self) -> list[ClaimVerifier]:
        """The verifiers ready now, in order."""
        out = []
        for verifier in self._verifiers:
            check = self._ready.get(verifier.method)
            if check is None or await check():
                out.append(verifier)
        return out

    async def proves_now(self) -> bool:
        """Whether the first verifier ready now tells support from topic (nli or llm):
        what verify-before-show's ``auto`` is on for."""
        ready = await self.available()
        return bool(ready) and ready[0].method in PROVING

    async def judge(self, claims: Sequence[Claim]) -> list[Judgement]:
        """One judgement per claim, in order, by the verifiers ready now; never raises
        for a backend."""
        out: list[Judgement] = [
            Judgement(Verification.UNCHECKED, 0.0, "none", reason="no verifier is configured")
        ] * len(claims)
        pending = list(range(len(claims)))
        failed: dict[int, str] = {}  # why the first verifier could not judge a claim
        ready = await self.available() if claims else []
        if ready and self._verifiers[0] not in ready:
            # the first is not ready (no model installed, or its service is away): the
            # claims fell back before any was tried, and the reason says so
            failed = dict.fromkeys(pending, f"{self.method}: not ready")
        for verifier in ready:
            if not pending:
                break
            judged = await verifier.judge([claims[i] for i in pending])
            still = []
            for i, judgement in zip(pending, judged, strict=True):
                out[i] = judgement
                if judgement.status is Verification.UNCHECKED:
                    failed.setdefault(i, f"{verifier.method}: {judgement.reason}")
                    still.append(i)
            pending = still
        for i, why in failed.items():
            if out[i].status is not Verification.UNCHECKED:
                out[i] = replace(
                    out[i], reason=f"{out[i].reason}; fell back ({why})", fell_back=why
                )
        return out
