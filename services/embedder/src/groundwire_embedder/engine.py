"""The embedding engine: a bounded queue in front of one model, batched by tokens.

No gRPC here. Requests join a bounded queue (full -> Overloaded at once); one batcher
task drains it, packs requests into one model batch up to the token budget, runs
the encoder in a worker thread and hands each request its rows with queue and
inference times.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from groundwire_core.errors import InvalidInput, Overloaded, Unavailable
from groundwire_embedder.models.manifest import ModelManifest
from groundwire_embedder.models.onnx_backend import EncodedBatch, EncoderOutput

log = logging.getLogger("groundwire.embedder.engine")

# Characters kept per text before tokenizing: a token is rarely longer than 16
# characters, so this never cuts text the model would have seen, and a 1 MB text
# costs a bounded tokenizer pass instead of a megabyte-sized one.
CHARS_PER_TOKEN_BOUND = 16


class Encoder(Protocol):
    """What the engine needs from a model backend (see models.onnx_backend)."""

    def load(self) -> None: ...

    @property
    def manifest(self) -> ModelManifest: ...

    def tokenize(self, texts: Sequence[str]) -> EncodedBatch: ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...

    def infer(self, batch: EncodedBatch) -> Any: ...

    def postprocess(self, batch: EncodedBatch, raw: Any) -> EncoderOutput: ...


@dataclass
class EmbedResult:
    output: EncoderOutput
    tokens: list[int]
    truncated: list[bool]
    queue_ms: float
    inference_ms: float


@dataclass
class _Job:
    texts: list[str]
    enqueued: float
    future: asyncio.Future[EmbedResult] = field(repr=False)


class EmbeddingEngine:
    """Serves one encoder behind a bounded queue with token-budget batching."""

    def __init__(
        self, encoder: Encoder, *, max_batch_tokens: int, max_batch_texts: int, max_queue: int
    ) -> None:
        self._encoder = encoder
        self._max_batch_tokens = max_batch_tokens
        self._max_batch_texts = max_batch_texts
        self._queue: asyncio.Queue[_Job] = asyncio.Queue(maxsize=max_queue)
        self._worker: asyncio.Task[None] | None = None
        self._ready = False

    @property
    def manifest(self) -> ModelManifest:
        return self._encoder.manifest

    @property
    def max_batch_texts(self) -> int:
        return self._max_batch_texts

    @property
    def queue_depth(self) -> int:
        return self._queue.qsize()

    async def start(self) -> None:
        """Loads the model and runs one warm-up batch; raises if the model is missing."""
        await asyncio.to_thread(self._encoder.load)
        await asyncio.to_thread(self._encode, ["warm-up query", "a longer warm-up " * 8])
        self._worker = asyncio.create_task(self._run(), name="embedder-batcher")
        self._ready = True

    async def stop(self) -> None:
        self._ready = False
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
        while not self._queue.empty():
            job = self._queue.get_nowait()
            if not job.future.done():
                job.future.set_exception(Unavailable("the embedder is shutting down"))

    async def embed(self, texts: Sequence[str]) -> EmbedResult:
        """Embeds ``texts`` in order.

        Raises InvalidInput (empty list, too many texts), Overloaded (queue full),
        Unavailable (not started).
        """
        if not self._ready:
            raise Unavailable("the embedder is not ready")
        if not texts:
            raise InvalidInput("texts must not be empty")
        if len(texts) > self._max_batch_texts:
            raise InvalidInput(f"at most {self._max_batch_texts} texts per call (got {len(texts)})")
        limit = self.manifest.max_tokens * CHARS_PER_TOKEN_BOUND
        job = _Job(
            [t[:limit] for t in texts],
            time.perf_counter(),
            asyncio.get_running_loop().create_future(),
        )
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            raise Overloaded(
                f"the embedder queue is full ({self._queue.maxsize} requests)", retry_after_s=1.0
            ) from None
        return await job.future

    async def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Untruncated token counts. Raises InvalidInput (empty, too many), Unavailable."""
        if not self._ready:
            raise Unavailable("the embedder is not ready")
        if not texts:
            raise InvalidInput("texts must not be empty")
        if len(texts) > self._max_batch_texts:
            raise InvalidInput(f"at most {self._max_batch_texts} texts per call (got {len(texts)})")
        return await asyncio.to_thread(self._encoder.count_tokens, texts)

    def _take_batch(self, first: _Job) -> list[_Job]:
        """``first`` plus queued jobs while the batch stays within both budgets."""
        jobs = [first]
        n_texts = len(first.texts)
        longest = max(self._estimate(t) for t in first.texts)
        while not self._queue.empty():
            nxt = self._queue._queue[0]  # type: ignore[attr-defined]  # peek: asyncio.Queue has no API for it
            nxt_longest = max(longest, *(self._estimate(t) for t in nxt.texts))
            total = n_texts + len(nxt.texts)
            if total > self._max_batch_texts or nxt_longest * total > self._max_batch_tokens:
                break
            jobs.append(self._queue.get_nowait())
            n_texts, longest = total, nxt_longest
        return jobs

    def _estimate(self, text: str) -> int:
        """Padded-length estimate before tokenizing (about 4 characters a token)."""
        return min(self.manifest.max_tokens, len(text) // 4 + 2)

    async def _run(self) -> None:
        while True:
            first = await self._queue.get()
            jobs = self._take_batch(first)
            texts = [t for j in jobs for t in j.texts]
            started = time.perf_counter()
            try:
                output, tokens = await asyncio.to_thread(self._encode, texts)
            except Exception as error:  # a backend failure fails this batch, not the server
                log.exception("encoder failed on a batch of %d texts", len(texts))
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(
                            Unavailable("the embedding model failed on this batch")
                            if not isinstance(error, InvalidInput)
                            else error
                        )
                continue
            inference_ms = (time.perf_counter() - started) * 1e3
            offset = 0
            max_tokens = self.manifest.max_tokens
            for job in jobs:
                n = len(job.texts)
                rows = slice(offset, offset + n)
                offset += n
                if job.future.done():  # the caller went away
                    continue
                job.future.set_result(
                    EmbedResult(
                        output=EncoderOutput(
                            dense=output.dense[rows],
                            sparse=output.sparse[rows] if output.sparse is not None else None,
                            multi_vector=(
                                output.multi_vector[rows]
                                if output.multi_vector is not None
                                else None
                            ),
                        ),
                        tokens=tokens[rows],
                        truncated=[t >= max_tokens for t in tokens[rows]],
                        queue_ms=(started - job.enqueued) * 1e3,
                        inference_ms=inference_ms,
                    )
                )

    def _encode(self, texts: list[str]) -> tuple[EncoderOutput, list[int]]:
        batch = self._encoder.tokenize(texts)
        raw = self._encoder.infer(batch)
        return self._encoder.postprocess(batch, raw), list(batch.token_counts)
