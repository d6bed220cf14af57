"""`groundwire backup` then `groundwire restore` into an empty deployment: the same
sources, chunks, keys, jobs and search results (issue #29, acceptance 5).

A local cluster runs on SQLite (the embedded default), is given documents, a created
key and a finished job, and is stopped; its backup is restored twice — into a fresh data
folder with fresh SQLite files, and into a fresh data folder with a fresh PostgreSQL —
and each restored cluster answers as the original did.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from groundwire_cli.__main__ import main as groundwire
from groundwire_cli.cluster import LocalCluster
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.e2e

ADMIN = "ops-admin-key-0123456789"
DOCS = {
    "boil.md": "# Cooking pasta\n\nBring salted water to a rolling boil and cook the "
    "spaghetti for about nine minutes.",
    "prune.md": "# Pruning roses\n\nCut each cane above an outward-facing bud in late winter.",
    "taxes.md": "# Paying taxes\n\nKeep receipts for every deductible expense for five years.",
}


def _cluster(
    root: Path, minilm_dir: Path, data: Path, gateway_db: str, retriever_db: str
) -> LocalCluster:
    return LocalCluster.with_free_ports(
        root / "run",
        minilm_dir,
        data,
        extra_env={
            "GROUNDWIRE_GATEWAY_ADMIN_API_KEYS": f"ops:{ADMIN}",
            "GROUNDWIRE_GATEWAY_DATABASE_URL": gateway_db,
            "GROUNDWIRE_RETRIEVER_DATABASE_URL": retriever_db,
        },
    )


def _observe(http: httpx.Client, key: str, job_id: str) -> dict[str, Any]:
    """What a restored deployment must answer the same."""
    admin = {"authorization": f"Bearer {ADMIN}"}
    user = {"authorization": f"Bearer {key}"}
    search = http.post(
        "/v1/search", json={"query": "how long do noodles boil", "collection": "kb"}, headers=user
    )
    assert search.status_code == 200, search.text
    sources = http.get("/v1/admin/collections/kb/sources", headers=admin)
    assert sources.status_code == 200, sources.text
    job = http.get(f"/v1/admin/jobs/{job_id}", headers=admin)
    assert job.status_code == 200, job.text
    keys = http.get("/v1/admin/keys", headers=admin)
    assert keys.status_code == 200, keys.text
    return {
        "results": [(r["source_id"], r["chunk_id"]) for r in search.json()["results"]],
        "sources": sorted((s["source_id"], s["chunks"]) for s in sources.json()["sources"]),
        "job": (job.json()["state"], job.json()["counts"]["ingested"]),
        "keys": sorted(k["key_id"] for k in keys.json()["keys"]),
    }


def _populate(http: httpx.Client) -> tuple[str, str]:
    admin = {"authorization": f"Bearer {ADMIN}"}
    created = http.post(
        "/v1/admin/keys", json={"tenant": "ops", "role": "read", "name": "reader"}, headers=admin
    )
    assert created.status_code in (200, 201), created.text
    key = created.json()["key"]
    documents = [{"source_id": name, "content": text} for name, text in DOCS.items()]
    started = http.post(
        "/v1/admin/collections/kb/documents",
        json={"documents": documents, "create_collection": True},
        headers=admin,
    )
    assert started.status_code == 202, started.text
    job_id = started.json()["job"]["id"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = http.get(f"/v1/admin/jobs/{job_id}", headers=admin).json()["state"]
        if state not in ("queued", "running"):
            break
        time.sleep(0.2)
    assert state == "succeeded", state
    return key, job_id


@pytest.fixture(scope="module")
def backup(minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("original")
    urls = (f"sqlite:///{root / 'gateway.sqlite3'}", f"sqlite:///{root / 'retriever.sqlite3'}")
    cluster = _cluster(root, minilm_dir, root / "qdrant", *urls)
    with cluster:
        cluster.start()
        cluster.wait_ready(timeout_s=120)
        with httpx.Client(base_url=cluster.gateway_url, timeout=30) as http:
            key, job_id = _populate(http)
            seen = _observe(http, key, job_id)
    out = root / "backup"
    with pytest.raises(SystemExit) as done:
        groundwire(
            [
                "backup",
                "--out",
                str(out),
                "--data-path",
                str(root / "qdrant"),
                "--run-dir",
                str(root / "run"),
                "--model-dir",
                str(minilm_dir),
                "--gateway-db",
                urls[0],
                "--retriever-db",
                urls[1],
            ]
        )
    assert done.value.code == 0
    yield {"dir": out, "key": key, "job": job_id, "seen": seen}


def _restore_and_compare(
    backup: dict[str, Any], root: Path, minilm_dir: Path, gateway_db: str, retriever_db: str
) -> None:
    data = root / "qdrant"
    with pytest.raises(SystemExit) as done:
        groundwire(
            [
                "restore",
                "--from",
                str(backup["dir"]),
                "--data-path",
                str(data),
                "--run-dir",
                str(root / "run"),
                "--model-dir",
                str(minilm_dir),
                "--gateway-db",
                gateway_db,
                "--retriever-db",
                retriever_db,
            ]
        )
    assert done.value.code == 0
    cluster = _cluster(root, minilm_dir, data, gateway_db, retriever_db)
    with cluster:
        cluster.start()
        cluster.wait_ready(timeout_s=120)
        with httpx.Client(base_url=cluster.gateway_url, timeout=30) as http:
            assert _observe(http, backup["key"], backup["job"]) == backup["seen"]


def test_restore_into_fresh_sqlite_and_data_folder(
    backup: dict[str, Any], minilm_dir: Path, tmp_path: Path
) -> None:
    assert backup["seen"]["results"], "the original answered the search"
    _restore_and_compare(
        backup,
        tmp_path,
        minilm_dir,
        f"sqlite:///{tmp_path / 'g.sqlite3'}",
        f"sqlite:///{tmp_path / 'r.sqlite3'}",
    )


def test_restore_into_fresh_postgresql_and_data_folder(
    backup: dict[str, Any], minilm_dir: Path, tmp_path: Path, postgres_server: PostgresServer
) -> None:
    url = postgres_server.fresh_database()  # both services' tables in one database
    _restore_and_compare(backup, tmp_path, minilm_dir, url, url)


def test_restore_refuses_a_target_that_is_not_empty(
    backup: dict[str, Any], minilm_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "qdrant"
    (data / "collections").mkdir(parents=True)
    (data / "collections" / "x").mkdir()
    with pytest.raises(SystemExit) as done:
        groundwire(
            [
                "restore",
                "--from",
                str(backup["dir"]),
                "--data-path",
                str(data),
                "--run-dir",
                str(tmp_path / "run"),
                "--model-dir",
                str(minilm_dir),
                "--gateway-db",
                f"sqlite:///{tmp_path / 'g.sqlite3'}",
                "--retriever-db",
                f"sqlite:///{tmp_path / 'r.sqlite3'}",
            ]
        )
    assert done.value.code == 1
