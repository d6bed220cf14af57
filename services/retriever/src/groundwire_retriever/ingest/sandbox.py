"""Parsing and chunking under a time and memory budget per document, in worker processes.

Parsers are third-party code fed untrusted bytes: a pattern that backtracks, a YAML
alias bomb, a recursion through 3,000 nested tags or a PDF that loops were each
enough to hold the GIL for seconds to hours or to take the retriever's memory.
Fixing each one is not enough; the next one is not known yet. So every document is
parsed and chunked in a worker process (``sandbox_worker``) that:

- caps its own address space (RLIMIT_AS): an allocation past the budget is a
  MemoryError there, and the document is skipped;
- gets a deadline per document, counted over the time the worker works (waiting
  for a free worker and for the embedder's token counts is not counted): past it
  the process is killed and replaced, and the document is skipped;
- may crash (a C extension's stack overflow): the document is skipped, the process
  replaced.

Each of those is an InvalidInput with the reason, which the ingest turns into a
per-document ``skipped`` outcome; the batch goes on, and searches never waited (the
event loop only moves bytes). A thread cannot give that: Python cannot stop a
thread, and it shares the GIL and the heap.

Workers are plain ``python -m`` processes on pipes rather than a
``ProcessPoolExecutor``: an executor cannot kill the one worker that overran, and its
spawn/forkserver start methods re-import the retriever's ``__main__`` (the store,
gRPC) in every worker. Started lazily (or by ``start``), ``workers`` of them at
most, each ~70 MB resident when idle (the parsers of every format are imported
at start: measured 71 MB with DOCX, PPTX and reStructuredText, 2026-11-24); ``close``
stops them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from groundwire_core.errors import BackendFailure, InvalidInput
from groundwire_retriever.ingest.chunker import TextChunk
from groundwire_retriever.ingest.parsers import ParsedDocument

log = logging.getLogger("groundwire.retriever")

BatchCounter = Callable[[Sequence[str]], Awaitable[list[int]]]

_WORKER_MODULE = "groundwire_retriever.ingest.sandbox_worker"
_LENGTH_BYTES = 4
# Starting a worker (the interpreter and the parser imports) takes ~0.5 s on an idle
# 2-core machine; allow for a busy one. Not part of any document's budget.
_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 2.0


class _Overtime(Exception):
    """The worker used up the document's time budget."""


class _Worker:
    """One worker process and its pipes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    async def send(self, body: bytes) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(len(body).to_bytes(_LENGTH_BYTES, "big") + body)
        await stdin.drain()

    async def receive(self) -> dict[str, Any]:
        """The next message. Raises asyncio.IncompleteReadError when the worker died."""
        stdout = self.process.stdout
        assert stdout is not None
        size = int.from_bytes(await stdout.readexactly(_LENGTH_BYTES), "big")
        body = await stdout.readexactly(size)
        message: dict[str, Any] = json.loads(body)  # small: long lists come in parts
        return message

    async def stop(self) -> None:
        """Asks the worker to exit (end of its input); kills it if it does not."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), _STOP_TIMEOUT_S)
        except TimeoutError:
            await self.kill()

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        await self.process.wait()

    def exit_reason(self) -> str:
        code = self.process.returncode
        if code is not None and code < 0:
            with contextlib.suppress(ValueError):
                return f"signal {signal.Signals(-code).name}"
        return f"exit code {code}"


class ParseSandbox:
    """A small pool of parser processes; see the module docstring.

    ``workers`` documents are parsed at once (others wait for a worker);
    ``time_budget_s`` and ``memory_budget_bytes`` bound each document.
    """

    def __init__(
        self,
        *,
        workers: int = 1,
        time_budget_s: float = 10.0,
        memory_budget_bytes: int = 1 << 30,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self._workers = workers
        self._time_budget_s = time_budget_s
        self._memory_budget_bytes = memory_budget_bytes
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._slots: asyncio.Semaphore | None = None
        self._closed = False

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the running workers (idle and busy)."""
        return [w.process.pid for w in (*self._idle, *self._busy) if w.alive]

    async def start(self) -> None:
        """Starts the workers now instead of at the first document (warm-up)."""
        missing = self._workers - len(self._idle) - len(self._busy)
        started = [await self._spawn() for _ in range(missing)]
        self._idle.extend(started)

    async def close(self) -> None:
        """Stops every worker (one parsing a document exits after it); later calls of
        ``prepare`` raise RuntimeError."""
        self._closed = True
        workers = [*self._idle, *self._busy]
        self._idle.clear()
        await asyncio.gather(*(w.stop() for w in workers))

    async def prepare(
        self,
        content: bytes,
        fmt: str,
        *,
        title: str,
        filename: str,
        min_tokens: int,
        max_tokens: int,
        overlap_tokens: int,
        count_tokens: BatchCounter | None = None,
    ) -> tuple[ParsedDocument, list[TextChunk]]:
        """Parses and chunks one document in a worker (see ``parsers.parse`` and
        ``chunker.chunk_document``; ``count_tokens`` as in ``chunk_document_counted``).

        The ParsedDocument comes without its body (the chunks hold the text).
        Raises InvalidInput with the reason when the document is refused by its parser,
        a parser fails, or the document overruns the time or memory budget (the worker
        is replaced); BackendFailure when no worker can start; RuntimeError after
        ``close``. ``count_tokens``'s errors propagate.
        """
        if self._closed:
            raise RuntimeError("the parse sandbox is closed")
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._workers)
        header = json.dumps(
            {
                "format": fmt,
                "title": title,
                "filename": filename,
                "min_tokens": min_tokens,
                "max_tokens": max_tokens,
                "overlap_tokens": overlap_tokens,
                "counted": count_tokens is not None,
            }
        ).encode()
        async with self._slots:
            worker = await self._take()
            reusable = False
            try:
                reply, reusable = await self._job(worker, header, content, count_tokens)
            finally:
                self._busy.discard(worker)
                if reusable and worker.alive and not self._closed:
                    self._idle.append(worker)
                else:
                    # Killed, not asked: a worker that overran or whose job was
                    # cancelled may be in the middle of anything.
                    await worker.kill()
        return _result(reply, self._memory_budget_bytes >> 20)

    async def _job(
        self,
        worker: _Worker,
        header: bytes,
        content: bytes,
        count_tokens: BatchCounter | None,
    ) -> tuple[dict[str, Any], bool]:
        """The worker's final message and whether the worker can take another job."""
        loop = asyncio.get_running_loop()
        left = self._time_budget_s

        async def timed(step: Awaitable[Any]) -> Any:
            nonlocal left
            started = loop.time()
            try:
                return await asyncio.wait_for(step, max(left, 0.0))
            except TimeoutError:
                raise _Overtime from None
            finally:
                left -= loop.time() - started

        parts: dict[str, list[Any]] = {"count": [], "chunks": []}
        try:
            await timed(worker.send(header))
            await timed(worker.send(content))
            while True:
                message: dict[str, Any] = await timed(worker.receive())
                if "more" in message:  # a long list comes in parts (see sandbox_worker)
                    parts[message["more"]].extend(message["items"])
                    continue
                if "count" not in message:
                    message["chunks"] = parts["chunks"]
                    return message, "memory" not in message
                assert count_tokens is not None
                texts, parts["count"] = parts["count"], []
                counts = await count_tokens(texts)  # the embedder's time, not ours
                await timed(worker.send(json.dumps({"counts": list(counts)}).encode()))
        except _Overtime:
            raise InvalidInput(
                f"parsing and chunking took longer than the {self._time_budget_s:g} s "
                "budget per document"
            ) from None
        except (asyncio.IncompleteReadError, ConnectionError):
            # It closed its end: give it a moment to exit, so the reason is its own.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(worker.process.wait(), _STOP_TIMEOUT_S)
            await worker.kill()
            reason = worker.exit_reason()
            log.warning("a parser process stopped (%s); starting another", reason)
            raise InvalidInput(f"the parser process stopped ({reason})") from None

    async def _take(self) -> _Worker:
        """An idle live worker, or a new one."""
        while self._idle:
            worker = self._idle.pop()
            if worker.alive:
                self._busy.add(worker)
                return worker
            await worker.kill()  # reaps it
        worker = await self._spawn()
        self._busy.add(worker)
        return worker

    async def _spawn(self) -> _Worker:
        """A started worker. Raises BackendFailure when one cannot start (e.g. a
        memory budget too small for the interpreter and the parsers)."""
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            _WORKER_MODULE,
            str(self._memory_budget_bytes),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            # It reads untrusted bytes: none of this process's environment (API keys),
            # only where to import from, the same as here.
            env={"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        )
        worker = _Worker(process)
        try:
            await asyncio.wait_for(worker.receive(), _START_TIMEOUT_S)  # {"ready": true}
        except (asyncio.IncompleteReadError, TimeoutError):
            await worker.kill()
            raise BackendFailure(
                f"the parser process did not start ({worker.exit_reason()}); is the "
                f"memory budget of {self._memory_budget_bytes >> 20} MiB too small?",
                dependency="parse-sandbox",
            ) from None
        except BaseException:
            await worker.kill()
            raise
        return worker


def _result(reply: dict[str, Any], budget_mib: int) -> tuple[ParsedDocument, list[TextChunk]]:
    if "done" in reply:
        parsed = ParsedDocument(**reply["done"]["parsed"])
        chunks = [TextChunk(i, tuple(path), text) for i, path, text in reply["chunks"]]
        return parsed, chunks
    if "refused" in reply:
        raise InvalidInput(str(reply["refused"]))
    if "failed" in reply:
        raise InvalidInput(str(reply["failed"]))
    if "memory" in reply:
        raise InvalidInput(f"parsing needed more than the {budget_mib} MiB memory budget")
    raise InvalidInput("the parser process answered something unexpected")
