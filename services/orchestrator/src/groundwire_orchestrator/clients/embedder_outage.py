"""The embedder as the orchestrator's stages see it: after a failure, not asked again
for a while.

Every stage that embeds has a fallback without the embedder (retrieval: BM25 alone;
the extractive answer: word overlap; the similarity citation check: UNCHECKED). What
each fallback costs is the wait before it: a frozen embedder holds a query embedding
for EMBEDDER_QUERY_TIMEOUT_S and a passage batch for CALL_TIMEOUT_S, so one chat
would wait twice (retrieval, then the citation check) and every following request
again. One :class:`EmbedderOutage` shared by the query and passage clients records the
failure, and for EMBEDDER_RETRY_AFTER_S every call fails at once with ``Unavailable``
naming the embedder and the first failure: a request pays the deadline at most once,
and the next ones degrade immediately. After that time the embedder is asked again
(a half-open circuit breaker with a fixed pause; a restarted embedder is used again
within that pause).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from groundwire_core.clients.embedder import EmbedderInfo, TextEmbedding
from groundwire_core.errors import DeadlineExceeded, Overloaded, Unavailable
from groundwire_orchestrator.clients.interfaces import Embedder

OUTAGE_ERRORS = (Unavailable, DeadlineExceeded, Overloaded)
"""Failures that say the embedder cannot answer now (down, frozen or slow, full);
anything else (INVALID_ARGUMENT) is about the request and does not trip the outage."""


class EmbedderOutage:
    """The embedder's last outage, shared by every client of one embedder."""

    def __init__(self, retry_after_s: float, *, clock: Callable[[], float] = time.monotonic):
        self._retry_after_s = retry_after_s
        self._clock = clock
        self._until = 0.0
        self._reason = ""

    def check(self) -> None:
        """Raises Unavailable (dependency "embedder") while a recent failure holds."""
        left = self._until - self._clock()
        if left > 0:
            raise Unavailable(
                f"the embedder failed recently ({self._reason}); asked again in {left:.1f} s",
                dependency="embedder",
            )

    def failed(self, error: Exception) -> None:
        """Records an outage failure: the embedder is not asked for retry_after_s."""
        self._until = self._clock() + self._retry_after_s
        self._reason = str(error) or type(error).__name__

    @property
    def active(self) -> bool:
        return self._clock() < self._until


class OutageAwareEmbedder:
    """An :class:`Embedder` that fails at once during a recorded outage and records
    the outage failures of the embedder it wraps. Raises what the wrapped one raises,
    and Unavailable during an outage."""

    def __init__(self, inner: Embedder, outage: EmbedderOutage) -> None:
        self._inner = inner
        self._outage = outage

    async def info(self) -> EmbedderInfo:
        self._outage.check()
        try:
            return await self._inner.info()
        except OUTAGE_ERRORS as error:
            self._outage.failed(error)
            raise

    async def embed(
        self, texts: Sequence[str], *, query: bool, outputs: Sequence[str] = ("dense",)
    ) -> list[TextEmbedding]:
        self._outage.check()
        try:
            return await self._inner.embed(texts, query=query, outputs=outputs)
        except OUTAGE_ERRORS as error:
            self._outage.failed(error)
            raise
