"""The gateway against the real services (local cluster as processes, MiniLM, embedded
Qdrant, no LLM): admin ingest (JSON and upload) through the real retriever, filters
the collection declares, chat's SSE grammar from the real orchestrator, the OpenAI
route, delete by source and drop. The answer text itself is the chain's business."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from groundwire_cli.cluster import LocalCluster

pytestmark = pytest.mark.e2e

ADMIN_KEY = "e2e-admin-key-123456"
ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}
COLLECTION = "gateway-e2e"
PASTA = "# Cooking pasta\n\nBoil salted water, add the spaghetti and cook it for nine minutes."
ROSES = "# Pruning roses\n\nCut each cane above an outward-facing bud in late winter."


@pytest.fixture(scope="module")
def http(minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    run = tmp_path_factory.mktemp("gateway-cluster")
    cluster = LocalCluster.with_free_ports(
        run,
        minilm_dir,
        run / "qdrant",
        extra_env={"GROUNDWIRE_GATEWAY_ADMIN_API_KEYS": f"ops:{ADMIN_KEY}"},
    )
    with cluster:
        cluster.start()
        cluster.wait_ready(timeout_s=120)
        with httpx.Client(base_url=cluster.gateway_url, timeout=60) as client:
            yield client


def _events(text: str) -> list[tuple[str, dict[str, object]]]:
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln and not ln.startswith(":")]
        name = next((ln[6:].strip() for ln in lines if ln.startswith("event:")), "message")
        data = [ln[5:].strip() for ln in lines if ln.startswith("data:")]
        if data:
            out.append((name, json.loads("\n".join(data))))
    return out


def test_ingest_search_chat_delete_drop_through_the_gateway(http: httpx.Client) -> None:
    created = http.post(
        "/v1/admin/collections", json={"name": COLLECTION, "filterable": ["team"]}, headers=ADMIN
    )
    assert created.status_code == 201, created.text
    assert "team" in created.json()["filterable"]

    body = {
        "documents": [
            {
                "source_id": "kitchen.md",
                "content": PASTA,
                "url": "https://example.com/kitchen",
                "doc_type": "recipe",
                "metadata": {"team": "cooks"},
            }
        ]
    }
    ingested = http.post(
        f"/v1/admin/collections/{COLLECTION}/documents",
        json=body,
        headers=ADMIN,
        params={"wait": "true"},  # the report, not a job to follow
    )
    assert ingested.status_code == 200, ingested.text
    assert ingested.json()["ingested"] == 1 and ingested.json()["chunks_written"] >= 1
    uploaded = http.post(
        f"/v1/admin/collections/{COLLECTION}/files",
        files=[("files", ("garden.md", ROSES.encode(), "text/markdown"))],
        headers=ADMIN,
        params={"wait": "true"},  # the report, not a job to follow
    )
    assert uploaded.status_code == 200, uploaded.text
    assert uploaded.json()["documents"][0]["source_id"] == "garden.md"
    described = http.get(f"/v1/admin/collections/{COLLECTION}", headers=ADMIN).json()
    assert described["sources"] == 2

    found = http.post(
        "/v1/search", json={"query": "how long do noodles cook", "collection": COLLECTION}
    )
    assert found.status_code == 200, found.text
    assert found.json()["results"][0]["source_id"] == "kitchen.md"
    filtered = http.post(
        "/v1/search",
        json={
            "query": "how long do noodles cook",
            "collection": COLLECTION,
            "filters": [{"field": "doc_type", "any_of": ["none-such"]}],
        },
    )
    assert filtered.status_code == 200 and filtered.json()["results"] == []
    undeclared = http.post(
        "/v1/search",
        json={
            "query": "q",
            "collection": COLLECTION,
            "filters": [{"field": "colour", "any_of": ["red"]}],
        },
    )
    assert undeclared.status_code == 422

    chat = http.post(
        "/v1/chat",
        json={
            "messages": [{"role": "user", "content": "How long should spaghetti cook?"}],
            "collection": COLLECTION,
        },
    )
    assert chat.status_code == 200, chat.text
    events = _events(chat.text)
    names = [n for n, _ in events]
    assert names[0] == "retrieval" and names[-1] == "done" and names.count("done") == 1
    assert "error" not in names
    sources = events[0][1]["sources"]
    assert isinstance(sources, list) and sources[0]["source_id"] == "kitchen.md"
    done = events[-1][1]
    assert done["mode"] in ("extractive", "generated", "declined")

    completion = http.post(
        "/v1/chat/completions",
        json={
            "model": f"groundwire:{COLLECTION}",
            "messages": [{"role": "user", "content": "How do I prune roses?"}],
        },
    )
    assert completion.status_code == 200, completion.text
    assert completion.json()["choices"][0]["message"]["role"] == "assistant"

    deleted = http.delete(
        f"/v1/admin/collections/{COLLECTION}/documents",
        params={"source_id": "kitchen.md"},
        headers=ADMIN,
    )
    assert deleted.status_code == 200 and deleted.json()["deleted"] >= 1
    after = http.post("/v1/search", json={"query": "spaghetti", "collection": COLLECTION})
    assert all(r["source_id"] != "kitchen.md" for r in after.json()["results"])

    dropped = http.delete(f"/v1/admin/collections/{COLLECTION}", headers=ADMIN)
    assert dropped.status_code == 200
    gone = http.post("/v1/search", json={"query": "q", "collection": COLLECTION})
    assert gone.status_code == 404


def test_admin_routes_refuse_without_the_key(http: httpx.Client) -> None:
    assert http.get("/v1/admin/collections").status_code == 401
    listed = http.get("/v1/admin/collections", headers=ADMIN)
    assert listed.status_code == 200 and isinstance(listed.json()["collections"], list)
