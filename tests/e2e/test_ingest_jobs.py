"""Ingest jobs over HTTP through the real cluster (processes, MiniLM, embedded Qdrant).

Issue #22's acceptance: a job of a few hundred documents is followed over SSE,
cancelled midway, the gateway restarted, and the job's final state (cancelled, its
counts and report) matches what ListSources and search return. And a retriever
killed with SIGKILL mid-job: its job is failed by the reaper (of the restarted
retriever here) once its heartbeat is older than the stale bound, with what it had
applied.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from groundwire_cli.cluster import LocalCluster

pytestmark = pytest.mark.e2e

ADMIN_KEY = "e2e-admin-key-jobs-1"
ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}
DOCS = 300
HEARTBEAT_S = 0.5
STALE_AFTER_S = 3.0


def documents(prefix: str) -> list[dict[str, str]]:
    """Small documents, each with a word no other one has (``q<prefix>w<i>``)."""
    return [
        {
            "source_id": f"{prefix}/note-{i:04d}.md",
            "content": f"# Kingfisher note {i}\n\nThe kingfisher q{prefix}w{i} dives from "
            f"the willow branch into the stream and comes back with a minnow, note {i}.",
        }
        for i in range(DOCS)
    ]


@pytest.fixture(scope="module")
def cluster(minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    run = tmp_path_factory.mktemp("jobs-cluster")
    with LocalCluster.with_free_ports(
        run,
        minilm_dir,
        run / "qdrant",
        extra_env={
            "GROUNDWIRE_GATEWAY_ADMIN_API_KEYS": f"ops:{ADMIN_KEY}",
            "GROUNDWIRE_RETRIEVER_JOB_HEARTBEAT_S": str(HEARTBEAT_S),
            "GROUNDWIRE_RETRIEVER_JOB_STALE_AFTER_S": str(STALE_AFTER_S),
        },
    ) as cluster:
        cluster.start()
        cluster.wait_ready(timeout_s=120)
        yield cluster


def start_job(http: httpx.Client, collection: str) -> str:
    body = {"documents": documents(collection), "create_collection": True}
    accepted = http.post(f"/v1/admin/collections/{collection}/documents", json=body, headers=ADMIN)
    assert accepted.status_code == 202, accepted.text
    job = accepted.json()["job"]
    assert job["state"] == "queued" and accepted.json()["url"] == f"/v1/admin/jobs/{job['id']}"
    return str(job["id"])


def follow(http: httpx.Client, job_id: str, until_done: int) -> list[tuple[str, dict[str, Any]]]:
    """The job's SSE events until one reports ``until_done`` documents done (or the
    stream ends)."""
    events: list[tuple[str, dict[str, Any]]] = []
    name = "message"
    with http.stream("GET", f"/v1/admin/jobs/{job_id}/events", headers=ADMIN) as stream:
        assert stream.status_code == 200
        for line in stream.iter_lines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                events.append((name, json.loads(line[5:])))
                if events[-1][1]["counts"]["done"] >= until_done or name != "progress":
                    break
    return events


def stored(http: httpx.Client, collection: str) -> set[str]:
    found: set[str] = set()
    token = ""
    while True:
        page = http.get(
            f"/v1/admin/collections/{collection}/sources",
            params={"page_token": token, "limit": 1000},
            headers=ADMIN,
        ).json()
        found |= {s["source_id"] for s in page["sources"]}
        token = page["next_page_token"]
        if not token:
            return found


def finds(http: httpx.Client, collection: str, word: str) -> list[str]:
    reply = http.post("/v1/search", json={"query": word, "collection": collection, "limit": 5})
    assert reply.status_code == 200, reply.text
    return [r["source_id"] for r in reply.json()["results"] if word in r["text"]]


def test_cancelled_job_survives_a_gateway_restart_and_matches_search(
    cluster: LocalCluster,
) -> None:
    with httpx.Client(base_url=cluster.gateway_url, timeout=60) as http:
        job_id = start_job(http, "cancel")
        events = follow(http, job_id, until_done=30)
        names = [n for n, _ in events]
        assert set(names) == {"progress"}, "still running at 30 documents"
        done = [e["counts"]["done"] for _, e in events]
        assert done == sorted(done) and done[-1] >= 30 and events[-1][1]["counts"]["total"] == DOCS
        assert all(e["documents"] == [] for _, e in events), "progress carries counts only"
        cancel = http.post(f"/v1/admin/jobs/{job_id}/cancel", headers=ADMIN)
        assert cancel.status_code in (200, 202), cancel.text
        rest = follow(http, job_id, until_done=DOCS + 1)
        assert rest[-1][0] == "done" and rest[-1][1]["state"] == "cancelled"

    cluster.stop(("gateway",))
    cluster.start(("gateway",))
    cluster.wait_ready(timeout_s=60, names=("gateway",))

    with httpx.Client(base_url=cluster.gateway_url, timeout=60) as http:
        job = http.get(f"/v1/admin/jobs/{job_id}", headers=ADMIN).json()
        assert job["state"] == "cancelled" and job["finished_at"] is not None
        counts = job["counts"]
        assert 30 <= counts["done"] < DOCS and counts["ingested"] == counts["done"]
        applied = {d["source_id"] for d in job["documents"] if d["outcome"] == "ingested"}
        assert len(applied) == counts["done"]
        assert stored(http, "cancel") == applied
        first, last = "cancel/note-0000.md", f"cancel/note-{DOCS - 1:04d}.md"
        assert finds(http, "cancel", "qcancelw0") == [first]
        assert last not in applied and finds(http, "cancel", f"qcancelw{DOCS - 1}") == []
        listed = http.get("/v1/admin/jobs", params={"collection": "cancel"}, headers=ADMIN)
        assert [j["id"] for j in listed.json()["jobs"]] == [job_id]


def test_a_job_under_a_killed_retriever_is_failed_after_its_restart(
    cluster: LocalCluster,
) -> None:
    with httpx.Client(base_url=cluster.gateway_url, timeout=60) as http:
        job_id = start_job(http, "killed")
        follow(http, job_id, until_done=10)
        cluster.kill("retriever")
        cluster.start(("retriever",))
        cluster.wait_ready(timeout_s=60, names=("retriever",))
        deadline = time.monotonic() + 60
        # the gateway's channel reconnects with a short backoff (503 until it has),
        # and the job reads running until its last beat is STALE_AFTER_S old
        while True:
            reply = http.get(f"/v1/admin/jobs/{job_id}", headers=ADMIN)
            if reply.status_code == 200 and reply.json()["state"] != "running":
                break
            assert reply.status_code in (200, 503) and time.monotonic() < deadline, reply.text
            time.sleep(0.3)
        job = reply.json()
        assert job["state"] == "failed" and "no heartbeat" in job["error"], job
        applied = {d["source_id"] for d in job["documents"] if d["outcome"] == "ingested"}
        assert len(applied) == job["counts"]["done"] >= 10
        held = stored(http, "killed")
        # each outcome is recorded right after its switch: a kill between the two
        # leaves at most that one source stored but unreported
        assert applied <= held and len(held - applied) <= 1
