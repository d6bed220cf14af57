"""The whole local cluster as separate processes, driven over HTTP at the gateway."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from groundwire_cli.cluster import LocalCluster
from groundwire_cli.ingest import ingest_files

pytestmark = pytest.mark.e2e

# The query shares these documents' meaning, not their words.
DOCS = {
    "kitchen.md": "# Cooking pasta\n\nBring salted water to a rolling boil, add the spaghetti "
    "and stir. Drain it when it is al dente, after about nine minutes.",
    "garden.md": "# Pruning roses\n\nCut each cane just above an outward-facing bud in late "
    "winter, removing dead and crossing stems first.",
    "finance.md": "# Paying taxes\n\nFile your return before the deadline and keep receipts "
    "for every deductible expense for at least five years.",
}
QUERY = "how long should noodles be boiled"
TIMEOUT_S = 4.0


@pytest.fixture(scope="module")
def cluster(minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    run = tmp_path_factory.mktemp("cluster")
    c = LocalCluster.with_free_ports(
        run,
        minilm_dir,
        run / "qdrant",
        extra_env={"GROUNDWIRE_GATEWAY_REQUEST_TIMEOUT_S": str(TIMEOUT_S)},
    )
    with c:
        c.start()
        c.wait_ready(timeout_s=120)
        docs = run / "docs"
        docs.mkdir()
        for name, text in DOCS.items():
            (docs / name).write_text(text)
        totals = asyncio.run(
            ingest_files(c.addr("retriever"), "e2e", sorted(docs.iterdir()), root=docs)
        )
        assert totals.ingested == len(DOCS)
        yield c


@pytest.fixture
def http(cluster: LocalCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster.gateway_url, timeout=30) as client:
        yield client


def test_search_ranks_by_meaning(http: httpx.Client) -> None:
    reply = http.post("/v1/search", json={"query": QUERY, "collection": "e2e", "limit": 3})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["results"][0]["source_id"] == "kitchen.md"
    assert body["results"][0]["heading_path"] == ["Cooking pasta"]
    stages = {s["name"]: s for s in body["stages"]}
    assert stages["retrieval"]["fallback"] is False
    assert stages["rerank"]["fallback"] is True, "no reranker model: fused order, reported"


def test_one_request_id_and_trace_across_all_services(
    http: httpx.Client, cluster: LocalCluster
) -> None:
    rid = "e2e-trace-7f3a9c"
    reply = http.post(
        "/v1/search", json={"query": QUERY, "collection": "e2e"}, headers={"x-request-id": rid}
    )
    assert reply.status_code == 200
    assert reply.headers["x-request-id"] == rid and reply.json()["request_id"] == rid
    traces: dict[str, set[str]] = {}
    for name in ("gateway", "orchestrator", "embedder", "retriever"):
        deadline = time.monotonic() + 5
        lines: list[str] = []
        while time.monotonic() < deadline and not lines:
            lines = [
                ln
                for ln in cluster.children[name].log_path.read_text().splitlines()
                if f"rid={rid}" in ln
            ]
            time.sleep(0.1)
        assert lines, f"{name} logged nothing for request {rid}"
        traces[name] = {m.group(1) for ln in lines if (m := re.search(r"trace=([0-9a-f]{32})", ln))}
    common = set.intersection(*traces.values())
    assert len(common) == 1, f"one trace id in all four services, got {traces}"


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"query": "", "collection": "e2e"}, 422),
        ({"query": "   ", "collection": "e2e"}, 422),
        ({"query": "x" * 100_000, "collection": "e2e"}, 422),
        ({"query": 42, "collection": "e2e"}, 422),
        ({"query": "ok", "limit": "ten"}, 422),
        ({"query": "ok", "collection": "no-such-collection"}, 404),
        ({"query": "ok", "collection": "Bad Name!"}, 422),
    ],
)
def test_bad_input_gets_a_4xx_json_error(http: httpx.Client, body: object, status: int) -> None:
    reply = http.post("/v1/search", json=body)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["code"] in ("invalid_input", "not_found") and error["message"]
    assert "Traceback" not in reply.text and len(reply.content) < 5000


def test_health_reports_every_dependency(http: httpx.Client) -> None:
    reply = http.get("/v1/health")
    assert reply.status_code == 200
    deps = reply.json()["dependencies"]
    assert {deps[n]["status"] for n in ("orchestrator", "retriever", "embedder")} == {"serving"}
    assert deps["llm"]["status"] == "disabled"


def test_stopped_embedder_degrades_to_bm25_naming_it_then_recovers(
    http: httpx.Client, cluster: LocalCluster
) -> None:
    cluster.stop(("embedder",))
    reply = http.post("/v1/search", json={"query": QUERY, "collection": "e2e"})
    # BM25 needs no embedder: the search answers from it and says so
    assert reply.status_code == 200, reply.text
    retrieval = next(s for s in reply.json()["stages"] if s["name"] == "retrieval")
    assert retrieval["fallback"] and "embedder" in retrieval["reason"], retrieval
    assert reply.json()["results"][0]["source_id"] == "kitchen.md"
    # a hang is what this guards against: the client's own timeout (30 s) fails it
    # health answers from a result at most HEALTH_CACHE_S (1 s) old: degraded, not down
    deadline = time.monotonic() + 3
    while (health := http.get("/v1/health")).json().get("status") != "degraded":
        assert time.monotonic() < deadline, health.text
        time.sleep(0.2)
    assert health.status_code == 200
    assert health.json()["dependencies"]["embedder"]["status"] == "not_serving"

    cluster.start(("embedder",))
    cluster.wait_ready(names=("embedder",), timeout_s=60)
    deadline = time.monotonic() + 15
    while True:  # channels reconnect with a short backoff; the outage pause expires
        reply = http.post("/v1/search", json={"query": QUERY, "collection": "e2e"})
        retrieval = next(s for s in reply.json()["stages"] if s["name"] == "retrieval")
        if not retrieval["fallback"] or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert reply.status_code == 200 and not retrieval["fallback"], retrieval
    assert reply.json()["results"][0]["source_id"] == "kitchen.md"
