"""Ingest jobs through the real retriever over gRPC, with the real MiniLM embedder.

Jobs of one collection run one after the other in the order they were started, a
search answers while one runs, a cancel keeps the sources already switched and
nothing else, and a job the retriever stopped under is reported failed with exactly
what ListSources holds, after a restart on the same data folder.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import grpc
import httpx
import pytest

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.server import serving
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_gateway.app import create_app
from groundwire_gateway.settings import GatewaySettings
from groundwire_gateway.upstream import Upstream
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings

COLLECTION = "jobs"
Stub = retriever_pb2_grpc.RetrieverServiceStub
FINAL = (
    retriever_pb2.JOB_STATE_SUCCEEDED,
    retriever_pb2.JOB_STATE_FAILED,
    retriever_pb2.JOB_STATE_CANCELLED,
)


def documents(count: int, edition: int = 1, prefix: str = "doc") -> list[retriever_pb2.Document]:
    return [
        retriever_pb2.Document(
            source_id=f"{prefix}-{i:04d}.md",
            filename=f"{prefix}-{i:04d}.md",
            content=(
                f"# Heron note {i}\n\nThe grey heron number {i} waits by the reed bed in "
                f"edition {edition}; it fishes at dawn and roosts in the alder trees.\n"
            ).encode(),
        )
        for i in range(count)
    ]


def start(stub: Stub, docs: list[retriever_pb2.Document]) -> object:
    return stub.StartJob(
        retriever_pb2.StartJobRequest(
            collection=COLLECTION,
            ingest=retriever_pb2.IngestJob(documents=docs, create_collection=True),
        )
    )


async def finished(stub: Stub, job_id: str) -> retriever_pb2.Job:
    updates = [j async for j in stub.WatchJob(retriever_pb2.GetJobRequest(id=job_id))]
    assert updates[-1].state in FINAL and all(u.state not in FINAL for u in updates[:-1])
    assert all(not u.documents for u in updates[:-1]), "progress carries counts only"
    return updates[-1]


async def stored_sources(stub: Stub) -> set[str]:
    found: set[str] = set()
    token = ""
    while True:
        page = await stub.ListSources(
            retriever_pb2.ListSourcesRequest(collection=COLLECTION, page_token=token, limit=1000)
        )
        found |= {s.source_id for s in page.sources}
        token = page.next_page_token
        if not token:
            return found


@pytest.fixture
async def embedder(minilm_dir: Path) -> AsyncIterator[str]:
    settings = EmbedderSettings(port=0, model_dir=minilm_dir)
    async with serving(EmbedderService(settings), settings) as port:
        yield f"127.0.0.1:{port}"


@asynccontextmanager
async def retriever_at(embedder: str, data_path: Path) -> AsyncIterator[tuple[Stub, str]]:
    """A retriever on a free port: a stub on it, and its address."""
    settings = RetrieverSettings(port=0, data_path=data_path, embedder_addr=embedder)
    async with AsyncExitStack() as stack:
        port = await stack.enter_async_context(serving(RetrieverService(settings), settings))
        channel = await stack.enter_async_context(create_channel(f"127.0.0.1:{port}"))
        yield Stub(channel), f"127.0.0.1:{port}"


@asynccontextmanager
async def retriever(embedder: str, data_path: Path) -> AsyncIterator[Stub]:
    async with retriever_at(embedder, data_path) as (stub, _):
        yield stub


async def test_jobs_of_a_collection_run_in_order_while_searches_answer(
    embedder: str, tmp_path: Path
) -> None:
    async with retriever(embedder, tmp_path / "data") as stub:
        first = await start(stub, documents(60))  # type: ignore[misc]
        second = await start(stub, documents(5, edition=2))  # type: ignore[misc]
        assert (first.state, second.state) == (retriever_pb2.JOB_STATE_QUEUED,) * 2
        # a search while the first job runs answers (BM25 needs no query vector)
        async for update in stub.WatchJob(retriever_pb2.GetJobRequest(id=first.id)):
            if update.counts.done >= 5:
                break
        began = time.perf_counter()
        reply = await stub.Search(
            retriever_pb2.SearchRequest(
                collection=COLLECTION, text="heron", paths=[retriever_pb2.SEARCH_PATH_BM25]
            )
        )
        assert reply.hits and time.perf_counter() - began < 1.0
        queued = await stub.GetJob(retriever_pb2.GetJobRequest(id=second.id))
        assert queued.state == retriever_pb2.JOB_STATE_QUEUED, "waits for the first job"

        done_first = await finished(stub, first.id)
        done_second = await finished(stub, second.id)
        assert done_first.state == done_second.state == retriever_pb2.JOB_STATE_SUCCEEDED
        assert done_first.finished_at <= done_second.started_at, "one at a time, in order"
        assert done_first.counts.ingested == 60 and done_first.counts.done == 60
        assert (done_second.counts.updated, done_second.counts.ingested) == (5, 0)
        assert [d.outcome for d in done_second.documents] == ["updated"] * 5
        assert len(await stored_sources(stub)) == 60
        listed = await stub.ListJobs(retriever_pb2.ListJobsRequest(collection=COLLECTION))
        assert [j.id for j in listed.jobs] == [second.id, first.id], "newest first"


async def test_cancel_keeps_what_was_switched_and_nothing_else(
    embedder: str, tmp_path: Path
) -> None:
    async with retriever(embedder, tmp_path / "data") as stub:
        job = await start(stub, documents(300))  # type: ignore[misc]
        async for update in stub.WatchJob(retriever_pb2.GetJobRequest(id=job.id)):
            if update.counts.done >= 20:
                break
        asked = await stub.CancelJob(retriever_pb2.CancelJobRequest(id=job.id))
        assert asked.state in (retriever_pb2.JOB_STATE_RUNNING, retriever_pb2.JOB_STATE_CANCELLED)
        final = await finished(stub, job.id)
        assert final.state == retriever_pb2.JOB_STATE_CANCELLED, final.error
        assert 20 <= final.counts.done < 300
        applied = {d.source_id for d in final.documents if d.outcome == "ingested"}
        assert len(applied) == final.counts.ingested == final.counts.done
        assert await stored_sources(stub) == applied


async def test_a_job_the_retriever_stopped_under_is_failed_after_restart(
    embedder: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    async with retriever(embedder, data) as stub:
        job = await start(stub, documents(300))  # type: ignore[misc]
        queued = await start(stub, documents(3, prefix="later"))  # type: ignore[misc]
        async for update in stub.WatchJob(retriever_pb2.GetJobRequest(id=job.id)):
            if update.counts.done >= 10:
                break
    async with retriever(embedder, data) as stub:
        failed = await stub.GetJob(retriever_pb2.GetJobRequest(id=job.id))
        assert failed.state == retriever_pb2.JOB_STATE_FAILED
        assert "interrupted" in failed.error
        applied = {d.source_id for d in failed.documents if d.outcome == "ingested"}
        assert len(applied) == failed.counts.done >= 10
        resumed = await finished(stub, queued.id)  # queued jobs run after a restart
        assert resumed.state == retriever_pb2.JOB_STATE_SUCCEEDED
        assert await stored_sources(stub) == applied | {f"later-{i:04d}.md" for i in range(3)}
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await stub.GetJob(retriever_pb2.GetJobRequest(id="0" * 32))
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert not [p for p in (data / ".jobs").iterdir() if p.is_dir()], "no documents left"


async def test_a_sync_job_applies_the_delta_and_reports_it(embedder: str, tmp_path: Path) -> None:
    folder = tmp_path / "site"
    folder.mkdir()
    for name in ("a", "b", "c"):
        (folder / f"{name}.md").write_text(f"# Page {name}\n\nThe otter {name} floats.\n")
    definition = retriever_pb2.SyncDefinition(
        kind=retriever_pb2.SYNC_SOURCE_KIND_FOLDER, location=str(folder)
    )
    request = retriever_pb2.StartJobRequest(collection=COLLECTION, sync=definition)
    async with retriever(embedder, tmp_path / "data") as stub:
        first = await finished(stub, (await stub.StartJob(request)).id)
        assert first.kind == retriever_pb2.JOB_KIND_SYNC
        assert first.state == retriever_pb2.JOB_STATE_SUCCEEDED, first.error
        assert sorted(first.delta.new) == ["a.md", "b.md", "c.md"]
        assert (first.counts.ingested, first.counts.done, first.counts.total) == (3, 3, 3)

        (folder / "a.md").unlink()
        (folder / "b.md").write_text("# Page b\n\nThe otter b dives now.\n")
        second = await finished(stub, (await stub.StartJob(request)).id)
        assert second.state == retriever_pb2.JOB_STATE_SUCCEEDED, second.error
        assert (list(second.delta.changed), list(second.delta.deleted)) == (["b.md"], ["a.md"])
        outcomes = {d.source_id: d.outcome for d in second.documents}
        assert outcomes == {"a.md": "deleted", "b.md": "updated", "c.md": "unchanged"}
        c = second.counts
        assert (c.deleted, c.updated, c.unchanged, c.done, c.total) == (1, 1, 1, 3, 3)
        assert await stored_sources(stub) == {"b.md", "c.md"}

        bad = retriever_pb2.StartJobRequest(
            collection=COLLECTION,
            sync=retriever_pb2.SyncDefinition(
                kind=retriever_pb2.SYNC_SOURCE_KIND_FOLDER, location="relative/path"
            ),
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.StartJob(bad)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, "checked up front"


async def test_a_sync_through_the_gateway_is_a_job_followed_over_sse(
    embedder: str, tmp_path: Path
) -> None:
    """The real gateway app (in process) on the real retriever: the sync route answers
    202 with the job, its /events stream ends with `done`, and GET reads it back."""
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "a.md").write_text("# Page a\n\nThe otter a floats.\n")
    async with retriever_at(embedder, tmp_path / "data") as (stub, addr):
        settings = GatewaySettings(retriever_addr=addr, admin_api_keys="ops:admin-secret-1")
        upstream = Upstream(settings)
        await upstream.start()
        transport = httpx.ASGITransport(app=create_app(settings, upstream))
        admin = {"authorization": "Bearer admin-secret-1"}
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
                url = f"/v1/admin/collections/{COLLECTION}/sync"
                accepted = await client.post(url, json={"source": str(folder)}, headers=admin)
                assert accepted.status_code == 202, accepted.text
                job_url = accepted.json()["url"]
                assert accepted.json()["job"]["kind"] == "sync"
                events = await client.get(f"{job_url}/events", headers=admin)
                names = [
                    ln[6:].strip() for ln in events.text.splitlines() if ln.startswith("event:")
                ]
                assert names[-1] == "done" and set(names[:-1]) <= {"progress"}
                job = (await client.get(job_url, headers=admin)).json()
                assert job["state"] == "succeeded" and job["delta"]["new"] == ["a.md"]
                assert job["documents"] == [
                    {"source_id": "a.md", "outcome": "ingested", "chunks": 1, "error": ""}
                ]
        finally:
            await upstream.stop()
        assert await stored_sources(stub) == {"a.md"}
