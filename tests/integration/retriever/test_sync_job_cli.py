"""`groundwire sync` runs as a retriever job (the real retriever and MiniLM embedder):
its report comes from the finished job, the job is listed like an HTTP sync's, and
cancelling the command (what Ctrl-C does to ``asyncio.run``'s task) cancels the job,
keeping the sources already applied and nothing after them."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from groundwire.retriever.v1 import retriever_pb2
from groundwire_cli import sync as sync_cli
from groundwire_cli.__main__ import build_parser
from groundwire_core.grpc.server import serving
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from tests.integration.retriever.test_sync import COLLECTION, manual, retriever_at

MANY = 20


@pytest.fixture
async def embedder(minilm_dir: Path) -> AsyncIterator[str]:
    settings = EmbedderSettings(port=0, model_dir=minilm_dir)
    async with serving(EmbedderService(settings), settings) as port:
        yield f"127.0.0.1:{port}"


async def test_sync_is_a_job_and_cancelling_the_command_cancels_it(
    embedder: str, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("a", "b"):
        (docs / f"{name}.md").write_text(manual(name, 1, 2))
    async with retriever_at(embedder, tmp_path / "data") as (stub, addr):

        def run(*extra: str) -> tuple[int, str]:
            out = io.StringIO()
            args = build_parser().parse_args(
                ["sync", str(docs), "--collection", COLLECTION, "--retriever", addr, *extra]
            )
            return sync_cli.run_command(args, out), out.getvalue()

        code, text = await asyncio.to_thread(run)
        lines = text.splitlines()
        assert code == 0 and lines[0].startswith(f"sync {COLLECTION}: 2 new, 0 changed"), text
        assert {"  new      a.md", "  new      b.md"} <= set(lines)
        listed = await stub.ListJobs(retriever_pb2.ListJobsRequest(collection=COLLECTION))
        (job,) = listed.jobs
        assert job.kind == retriever_pb2.JOB_KIND_SYNC
        assert job.state == retriever_pb2.JOB_STATE_SUCCEEDED
        assert f"  job {job.id} (groundwire jobs show {job.id})" in lines

        # a rename and an edit, reported from the job as the Sync RPC names them
        (docs / "a.md").rename(docs / "moved.md")
        (docs / "b.md").write_text(manual("b", 2, 2))
        code, text = await asyncio.to_thread(run, "--json")
        (report,) = json.loads(text)
        assert report["delta"]["renamed"] == [{"from": "a.md", "to": "moved.md"}]
        assert report["delta"]["changed"] == ["b.md"] and not report["dry_run"]
        outcomes = {s["source_id"]: s["outcome"] for s in report["sources"]}
        # the old id is the rename's "from", as the Sync RPC lists it, not a deletion
        assert outcomes == {"moved.md": "renamed", "b.md": "changed"}
        assert report["complete"] and not report["cancelled"] and len(report["job"]) == 32

        # many new files; the command is cancelled once the first is applied (the two
        # unchanged sources are reported done by the scan, before it)
        for i in range(MANY):
            (docs / f"n{i:02}.md").write_text(manual(f"n{i}", 1, 2))
        first = asyncio.Event()
        task = asyncio.create_task(
            sync_cli.sync_job(
                addr,
                COLLECTION,
                sync_cli.definition({"source": str(docs)}),
                on_progress=lambda p: first.set() if p.done > 2 else None,
            )
        )
        await asyncio.wait_for(first.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        listed = await stub.ListJobs(retriever_pb2.ListJobsRequest(collection=COLLECTION))
        latest = listed.jobs[0]
        assert latest.id != job.id and latest.kind == retriever_pb2.JOB_KIND_SYNC
        async for update in stub.WatchJob(retriever_pb2.GetJobRequest(id=latest.id)):
            latest = update
        assert latest.state == retriever_pb2.JOB_STATE_CANCELLED, latest
        sources = await stub.ListSources(retriever_pb2.ListSourcesRequest(collection=COLLECTION))
        stored = {s.source_id for s in sources.sources}
        applied = {d.source_id for d in latest.documents if d.outcome == "ingested"}
        assert {"moved.md", "b.md"} <= stored and stored == {"moved.md", "b.md"} | applied
        assert 1 <= len(applied) < MANY, "stopped after the first, before the last"
