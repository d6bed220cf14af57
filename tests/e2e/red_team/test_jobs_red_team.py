"""Red team, round two (issue 31): the job defects, each as it was reproduced, over HTTP
through the real gateway app on a real retriever (MiniLM embedder, embedded engine,
the jobs' system of record in SQLite), with two tenants' created keys and the operator.

5. Job reports crossed tenants when a collection name was reused (matched by name).
6. Jobs of a ``public`` collection revealed hidden documents' ids to other tenants.
8. Another tenant's write key cancelled the operator's jobs (visibility, not ownership).
18. A ``?wait=true`` ingest answered 507 after writing some documents, without saying
    which (here the store refuses writes after the fifth document, as a disk passing
    its floor does).
21. No cap on queued jobs or their bytes per tenant.

(17, a worker exception leaving a job ``running`` forever, is in
``tests/integration/retriever/test_jobs_disk_full.py``: it needs the job store's disk.)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from qdrant_client import QdrantClient

from groundwire_core.errors import InsufficientStorage
from groundwire_core.grpc.server import serving
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_gateway.app import create_app
from groundwire_gateway.settings import GatewaySettings
from groundwire_retriever.domain import Chunk, ChunkVectors
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings
from groundwire_retriever.store import QdrantServerStore, VectorStore
from groundwire_retriever.store.base import StagedSource

OPERATOR = "red-team-operator-key-1"
FINAL = ("succeeded", "failed", "cancelled")
MAX_JOBS = 3
MAX_BYTES = 20_000


@dataclass
class Cluster:
    http: httpx.AsyncClient
    keys: dict[str, dict[str, str]]
    """label ("acme write", "globex admin", "operator") -> its Authorization header."""

    async def call(self, who: str, method: str, url: str, **kw: Any) -> httpx.Response:
        return await self.http.request(method, url, headers=self.keys[who], **kw)

    async def job(self, who: str, name: str, docs: list[dict[str, Any]]) -> str:
        body = {"documents": docs}
        reply = await self.call(who, "POST", f"/v1/admin/collections/{name}/documents", json=body)
        assert reply.status_code == 202, reply.text
        return str(reply.json()["job"]["id"])

    async def finished(self, who: str, job_id: str) -> dict[str, Any]:
        for _ in range(1200):
            reply = await self.call(who, "GET", f"/v1/admin/jobs/{job_id}")
            assert reply.status_code == 200, reply.text
            if reply.json()["state"] in FINAL:
                return dict(reply.json())
            await asyncio.sleep(0.1)
        raise AssertionError(f"job {job_id} never ended")

    async def collection(self, who: str, name: str, tenant: str | None = None) -> None:
        body: dict[str, Any] = {"name": name}
        if tenant is not None:
            body["tenant"] = tenant
        reply = await self.call(who, "POST", "/v1/admin/collections", json=body)
        assert reply.status_code == 201, reply.text


def docs(prefix: str, count: int, access: list[str] | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(count):
        doc: dict[str, Any] = {
            "source_id": f"{prefix}-{i:03d}.md",
            "content": f"# Note {i}\n\nThe heron {prefix} {i} waits by the reed bed at dawn.",
        }
        if access:
            doc["access"] = access
        out.append(doc)
    return out


class FillingStore(QdrantServerStore):
    """qdrant-client's local mode whose disk "fills" after ``room`` sources: each later
    write is refused with insufficient_storage, as the embedded engine's floor does."""

    def __init__(self, room: int) -> None:
        super().__init__(":memory:", client=QdrantClient(location=":memory:"))
        self.room = room

    def stage_source(
        self,
        name: str,
        source_id: str,
        chunks: Sequence[tuple[Chunk, ChunkVectors]],
        *,
        generation: str | None = None,
    ) -> StagedSource:
        if self.room <= 0:
            raise InsufficientStorage("the data disk is full (test)", retry_after_s=60)
        self.room -= 1
        return super().stage_source(name, source_id, chunks, generation=generation)


@pytest.fixture
async def store() -> VectorStore | None:
    return None  # the embedded engine


@pytest.fixture
async def cluster(
    minilm_dir: Path, tmp_path: Path, store: VectorStore | None
) -> AsyncIterator[Cluster]:
    async with AsyncExitStack() as stack:
        embedder = EmbedderSettings(port=0, model_dir=minilm_dir)
        e_port = await stack.enter_async_context(serving(EmbedderService(embedder), embedder))
        retriever = RetrieverSettings(
            port=0,
            data_path=tmp_path / "data",
            embedder_addr=f"127.0.0.1:{e_port}",
            job_poll_s=0.1,
            max_queued_jobs_per_tenant=MAX_JOBS,
            max_queued_job_bytes_per_tenant=MAX_BYTES,
        )
        service = RetrieverService(retriever, store=store)
        r_port = await stack.enter_async_context(serving(service, retriever))
        settings = GatewaySettings(
            retriever_addr=f"127.0.0.1:{r_port}", admin_api_keys=f"ops:{OPERATOR}"
        )
        app = create_app(settings)
        await stack.enter_async_context(app.router.lifespan_context(app))
        http = await stack.enter_async_context(
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw")
        )
        keys = {"operator": {"authorization": f"Bearer {OPERATOR}"}}
        for tenant in ("acme", "globex"):
            for role in ("write", "admin"):
                made = await http.post(
                    "/v1/admin/keys",
                    json={"tenant": tenant, "role": role},
                    headers=keys["operator"],
                )
                assert made.status_code == 201, made.text
                keys[f"{tenant} {role}"] = {"authorization": f"Bearer {made.json()['key']}"}
        yield Cluster(http, keys)


async def test_5_a_reused_collection_name_does_not_carry_another_tenants_jobs(
    cluster: Cluster,
) -> None:
    # a tenant's admin names its collections under its prefix (defect 11): the name is
    # reused by the operator, who may give any name to any tenant
    await cluster.collection("acme admin", "acme-board")
    secret = [{"source_id": "acme/board-minutes-q3-layoffs.md", "content": "# Q3\n\nLayoffs."}]
    acme_job = await cluster.job("acme write", "acme-board", secret)
    assert (await cluster.finished("acme write", acme_job))["state"] == "succeeded"
    dropped = await cluster.call("acme admin", "DELETE", "/v1/admin/collections/acme-board")
    assert dropped.status_code == 200, dropped.text
    await cluster.collection("operator", "acme-board", tenant="globex")  # the name, reused

    for who in ("globex write", "globex admin"):
        listed = await cluster.call(
            who, "GET", "/v1/admin/jobs", params={"collection": "acme-board"}
        )
        assert listed.status_code == 200 and listed.json()["jobs"] == [], listed.text
        everything = await cluster.call(who, "GET", "/v1/admin/jobs")
        assert "board-minutes" not in everything.text and acme_job not in everything.text
        for url in (f"/v1/admin/jobs/{acme_job}", f"/v1/admin/jobs/{acme_job}/events"):
            assert (await cluster.call(who, "GET", url)).status_code == 404
    kept = await cluster.call("acme write", "GET", f"/v1/admin/jobs/{acme_job}")
    assert kept.status_code == 200, "the owner still reads its job"


async def test_6_jobs_of_a_public_collection_reveal_nothing_to_other_tenants(
    cluster: Cluster,
) -> None:
    await cluster.collection("operator", "handbook", tenant="public")
    hidden = [
        {"source_id": "hr/layoffs.md", "content": "# Layoffs\n\nList.", "access": ["group:hr"]},
        {"source_id": "welcome.md", "content": "# Welcome\n\nHello."},
    ]
    job_id = await cluster.job("operator", "handbook", hidden)
    assert (await cluster.finished("operator", job_id))["counts"]["ingested"] == 2
    for who in ("globex write", "globex admin", "acme write"):
        for params in ({"collection": "handbook"}, {}):
            listed = await cluster.call(who, "GET", "/v1/admin/jobs", params=params)
            assert listed.status_code == 200 and listed.json()["jobs"] == [], listed.text
        for url in (f"/v1/admin/jobs/{job_id}", f"/v1/admin/jobs/{job_id}/events"):
            reply = await cluster.call(who, "GET", url)
            assert reply.status_code == 404 and "layoffs" not in reply.text


async def test_8_only_the_owner_cancels_a_job(cluster: Cluster) -> None:
    await cluster.collection("operator", "manual", tenant="public")
    running = await cluster.job("operator", "manual", docs("run", 40))
    queued = await cluster.job("operator", "manual", docs("next", 3))
    for job_id in (queued, running):  # the queued one first: still queued now
        reply = await cluster.call("globex write", "POST", f"/v1/admin/jobs/{job_id}/cancel")
        assert reply.status_code == 404, reply.text
    first = await cluster.finished("operator", running)
    second = await cluster.finished("operator", queued)
    assert (first["state"], first["counts"]["done"]) == ("succeeded", 40)
    assert (second["state"], second["counts"]["done"]) == ("succeeded", 3)
    # the owner may: a tenant's own job, cancelled by its own write key
    await cluster.collection("acme admin", "acme-notes")
    mine = await cluster.job("acme write", "acme-notes", docs("mine", 40))
    asked = await cluster.call("acme write", "POST", f"/v1/admin/jobs/{mine}/cancel")
    assert asked.status_code in (200, 202), asked.text
    assert (await cluster.finished("acme write", mine))["state"] == "cancelled"


async def test_21_queued_jobs_and_their_bytes_are_capped_per_tenant(cluster: Cluster) -> None:
    await cluster.collection("acme admin", "acme-many")
    accepted = [
        await cluster.job("acme write", "acme-many", docs(f"j{i}", 20)) for i in range(MAX_JOBS)
    ]
    refused = await cluster.call(
        "acme write",
        "POST",
        "/v1/admin/collections/acme-many/documents",
        json={"documents": docs("x", 1)},
    )
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["code"] == "overloaded" and "Retry-After" in refused.headers
    # another tenant's queue is its own; and its bytes are capped too
    await cluster.collection("globex admin", "globex-big")
    big = [{"source_id": "big.md", "content": "# Big\n\n" + "heron reed " * 1500}]  # 16.5 kB
    first = await cluster.job("globex write", "globex-big", big)
    too_much = await cluster.call(
        "globex write",
        "POST",
        "/v1/admin/collections/globex-big/documents",
        json={"documents": [{**big[0], "source_id": "big-2.md"}]},
    )
    assert too_much.status_code == 429 and "cap" in too_much.json()["error"]["message"]
    for job_id in accepted:  # once they end, the tenant may queue again
        assert (await cluster.finished("acme write", job_id))["state"] == "succeeded"
    assert (await cluster.finished("globex write", first))["state"] == "succeeded"
    again = await cluster.job("acme write", "acme-many", docs("later", 1))
    assert (await cluster.finished("acme write", again))["state"] == "succeeded"


@pytest.mark.parametrize("store", [FillingStore(room=5)], ids=["disk-fills-after-5"])
async def test_18_a_wait_ingest_that_fails_midway_reports_what_it_wrote(
    cluster: Cluster,
) -> None:
    body = {"documents": docs("w", 12), "create_collection": True}
    url = "/v1/admin/collections/waited/documents"
    reply = await cluster.call("operator", "POST", url, params={"wait": "true"}, json=body)
    assert reply.status_code == 507, reply.text
    error = reply.json()["error"]
    assert error["code"] == "insufficient_storage"
    report = error["details"]
    written = [d["source_id"] for d in report["documents"] if d["status"] == "ingested"]
    assert written == [f"w-{i:03d}.md" for i in range(5)] and report["ingested"] == 5
    sources = await cluster.call("operator", "GET", "/v1/admin/collections/waited/sources")
    assert {s["source_id"] for s in sources.json()["sources"]} == set(written)
