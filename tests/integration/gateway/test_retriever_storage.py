"""A retriever whose data disk is under its free-space floor: /v1/health says
degraded (not down: searches go on) and, to an admin, names the data path, and a
write (an ingest job started) through the gateway is 507 Insufficient Storage with
the retriever's reason and a Retry-After."""

from __future__ import annotations

from typing import Any

import httpx

from tests.integration.gateway.conftest import ADMIN_KEY

WARNING = "LOW DISK: the data disk at /data/qdrant/collections has 3.0 MiB free"


def test_a_low_retriever_disk_is_degraded_health_and_507_on_writes(
    gateways: Any, fake_upstream: Any
) -> None:
    (gw,) = gateways.start(
        **fake_upstream.env(), ADMIN_API_KEYS=f"ops:{ADMIN_KEY}", HEALTH_CACHE_S="0"
    )
    auth = {"Authorization": f"Bearer {ADMIN_KEY}"}
    ingest = {"documents": [{"source_id": "a.md", "content": "# A\n\ntext"}]}
    body = httpx.get(f"{gw.url}/v1/health", timeout=10).json()
    assert body["status"] == "ok" and "retriever_storage" not in body["dependencies"]
    fake_upstream.retriever.storage_warning = WARNING
    try:
        reply = httpx.get(f"{gw.url}/v1/health", headers=auth, timeout=10)  # with details
        body = reply.json()
        assert reply.status_code == 200 and body["status"] == "degraded"
        storage = body["dependencies"]["retriever_storage"]
        assert (storage["status"], storage["target"]) == ("not_serving", "/data/qdrant")
        assert storage["message"] == WARNING
        assert body["dependencies"]["retriever"]["status"] == "serving"

        refused = httpx.post(
            f"{gw.url}/v1/admin/collections/docs/documents", json=ingest, headers=auth, timeout=10
        )
        assert refused.status_code == 507
        assert refused.headers["retry-after"] == "60"
        error = refused.json()["error"]
        assert (error["code"], error["message"]) == ("insufficient_storage", WARNING)
    finally:
        fake_upstream.retriever.storage_warning = ""
    assert httpx.get(f"{gw.url}/v1/health", timeout=10).json()["status"] == "ok"
    accepted = httpx.post(
        f"{gw.url}/v1/admin/collections/docs/documents", json=ingest, headers=auth, timeout=10
    )
    assert accepted.status_code == 202  # queued as a job
    job = httpx.get(f"{gw.url}{accepted.json()['url']}", headers=auth, timeout=10)
    assert job.status_code == 200 and job.json()["counts"]["ingested"] == 1
