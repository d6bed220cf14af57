"""The parse sandbox: documents parsed and chunked in worker processes, each under a
time and a memory budget; a worker that overruns, runs out of memory or dies is
replaced and only its document is skipped. Real worker processes throughout."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace

import psutil
import pytest

from groundwire_core.errors import InvalidInput, Unavailable
from groundwire_retriever.ingest.chunker import (
    approx_tokens,
    chunk_document,
    chunk_document_counted,
)
from groundwire_retriever.ingest.parsers import guess_format, parse
from groundwire_retriever.ingest.sandbox import ParseSandbox
from tests.fixtures.hostile import HOSTILE

GUIDE = b"""---
title: Guide
summary: How to install it.
---
# Install

Download the agent. Unpack it.

## Configure

| key | value |
| --- | --- |
| port | 8080 |
"""
LIMITS = {"min_tokens": 20, "max_tokens": 60, "overlap_tokens": 5}
# ~1-2 s of chunking in a worker on a 2-core machine: longer than the small budgets below
SLOW = b"word " * 1_500_000


@asynccontextmanager
async def sandbox(**budgets: float) -> AsyncIterator[ParseSandbox]:
    box = ParseSandbox(
        workers=1,
        time_budget_s=budgets.get("time_budget_s", 10.0),
        memory_budget_bytes=int(budgets.get("memory_budget_bytes", 1 << 30)),
    )
    try:
        yield box
    finally:
        await box.close()


async def _prepare(box: ParseSandbox, content: bytes, fmt: str = "markdown", **kw: object):  # type: ignore[no-untyped-def]
    return await box.prepare(content, fmt, title="", filename=f"doc.{fmt}", **LIMITS, **kw)  # type: ignore[arg-type]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_same_result_as_in_process() -> None:
    async with sandbox() as box:
        parsed, chunks = await _prepare(box, GUIDE)
    here = parse(GUIDE, "markdown", filename="doc.markdown")
    assert parsed == replace(here, body="")  # the body stays in the worker
    assert chunks == chunk_document(
        here.title, here.body, summary=here.summary, markdown=here.markdown, **LIMITS
    )


async def test_token_counts_come_from_the_parent() -> None:
    asked: list[int] = []

    async def count(texts: Sequence[str]) -> list[int]:  # the embedder's Tokenize, locally
        asked.append(len(texts))
        return [approx_tokens(t) * 2 + 2 for t in texts]

    # large enough that the texts to count and the chunks come in several frames
    doc = GUIDE + b"".join(b"\nParagraph %d has a few words.\n" % i for i in range(8000))
    async with sandbox() as box:
        parsed, chunks = await _prepare(box, doc, count_tokens=count)
    assert asked  # the worker asked this process, which answered
    here = parse(doc, "markdown", filename="doc.markdown")
    expected = await chunk_document_counted(
        here.title, here.body, count_tokens=count, summary=here.summary, **LIMITS
    )
    assert chunks == expected and parsed.title == here.title == "Guide"


async def test_counter_errors_propagate_and_the_next_document_goes_in() -> None:
    async def down(texts: Sequence[str]) -> list[int]:
        raise Unavailable("embedder is down", dependency="embedder")

    async with sandbox() as box:
        with pytest.raises(Unavailable):
            await _prepare(box, GUIDE, count_tokens=down)
        _, chunks = await _prepare(box, GUIDE)
        assert chunks


async def test_overrunning_the_time_budget_skips_the_document_and_replaces_the_worker() -> None:
    async with sandbox(time_budget_s=0.3) as box:
        await box.start()
        (pid,) = box.worker_pids
        started = time.perf_counter()
        with pytest.raises(InvalidInput, match=r"took longer than the 0.3 s budget"):
            await _prepare(box, SLOW, "text")
        assert time.perf_counter() - started < 2.0
        assert _gone(pid)
        _, chunks = await _prepare(box, GUIDE)  # a fresh worker
        assert chunks and box.worker_pids != [pid]


async def test_overrunning_the_memory_budget_skips_the_document() -> None:
    # ~60 MiB of address space is the interpreter and parsers; the tree of 1.6 MB of
    # HTML needs far more than the rest.
    async with sandbox(memory_budget_bytes=100 << 20) as box:
        with pytest.raises(InvalidInput, match=r"more than the 100 MiB memory budget"):
            await _prepare(box, b"<b>x</b>" * 200_000, "html")
        _, chunks = await _prepare(box, GUIDE)
        assert chunks


async def test_a_worker_that_dies_skips_only_its_document() -> None:
    async with sandbox() as box:
        await box.start()
        (pid,) = box.worker_pids
        job = asyncio.create_task(_prepare(box, SLOW, "text"))
        await asyncio.sleep(0.3)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(InvalidInput, match=r"parser process stopped \(signal SIGKILL\)"):
            await job
        _, chunks = await _prepare(box, GUIDE)
        assert chunks


async def test_a_cancelled_document_stops_its_worker() -> None:
    async with sandbox() as box:
        await box.start()
        (pid,) = box.worker_pids
        job = asyncio.create_task(_prepare(box, SLOW, "text"))
        await asyncio.sleep(0.3)
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job
        assert _gone(pid) and box.worker_pids == []


async def test_close_stops_the_workers() -> None:
    box = ParseSandbox(workers=2)
    await box.start()
    pids = box.worker_pids
    assert len(pids) == 2
    await box.close()
    assert all(_gone(pid) for pid in pids)
    with pytest.raises(RuntimeError, match="closed"):
        await _prepare(box, GUIDE)


async def test_the_event_loop_keeps_serving_while_a_worker_parses() -> None:
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    async with sandbox() as box:
        await box.start()
        ticks = asyncio.create_task(ticker())
        _, chunks = await _prepare(box, SLOW, "text")
        ticks.cancel()
    assert len(chunks) > 1000
    # The loop only moves bytes and builds the chunk objects: it ticked all along
    # (parsing on the loop would let it tick once before and once after). Counted, not
    # timed: ci13 saw one 2.2 s pause in a 3.8 s parse on a loaded machine.
    assert len(gaps) > 20, gaps


async def test_hostile_documents_in_the_sandbox() -> None:
    async with sandbox(time_budget_s=5.0) as box:
        for doc in HOSTILE:
            started = time.perf_counter()
            try:
                await box.prepare(
                    doc.content,
                    guess_format("", doc.filename),
                    title="",
                    filename=doc.filename,
                    **LIMITS,
                )
                outcome, reason = "ingested", ""
            except InvalidInput as error:
                outcome, reason = "skipped", error.message
            assert time.perf_counter() - started < 2.0, doc.name
            assert outcome in doc.outcomes and doc.reason in reason, (doc.name, reason)


async def test_workers_get_none_of_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUNDWIRE_RETRIEVER_QDRANT_API_KEY", "not-for-parsers")
    async with sandbox() as box:
        await box.start()
        (pid,) = box.worker_pids
        environ = psutil.Process(pid).environ()
    assert "GROUNDWIRE_RETRIEVER_QDRANT_API_KEY" not in environ
    assert set(environ) <= {"PYTHONPATH", "LC_CTYPE"}  # Python may set LC_CTYPE itself


async def test_two_workers_parse_two_documents_at_once() -> None:
    box = ParseSandbox(workers=2)
    try:
        first, second = await asyncio.gather(
            _prepare(box, SLOW, "text"), _prepare(box, SLOW, "text")
        )
        # a second worker starts only while the first is busy; both stay for later
        assert len(box.worker_pids) == 2
    finally:
        await box.close()
    assert first[1] == second[1]
