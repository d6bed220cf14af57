"""Qdrant as a cluster (issue 23, acceptance 2): the retriever creates collections
with the shard, replication and write-consistency settings it is given and reads
with its read consistency (seen on the wire, through an httpx mock transport given
to qdrant-client: there is no Qdrant server here), and the prod overlay's Qdrant
StatefulSet runs in cluster mode as the docs say."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from qdrant_client import QdrantClient

from groundwire_retriever.domain import CollectionSpec, SearchPath, SearchQuery
from groundwire_retriever.settings import RetrieverSettings
from groundwire_retriever.store_wiring import qdrant_store

URL = "http://qdrant.test:6333"


class FakeQdrantWire:
    """Answers the REST calls a collection's creation and a search make, recording
    each request (method, path, query, JSON body)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        path = request.url.path
        self.requests.append((request.method, path, dict(request.url.params), body))
        result: Any = True
        if path == "/collections" and request.method == "GET":
            result = {"collections": []}
        elif path == "/aliases":
            result = {"aliases": []}
        elif path.endswith("/exists"):
            result = {"exists": False}
        elif path.endswith("/index"):
            result = {"operation_id": 1, "status": "completed"}
        elif path.endswith("/points/query"):
            result = {"points": []}
        return httpx.Response(200, json={"result": result, "status": "ok", "time": 0.0})

    def bodies(self, method: str, suffix: str = "") -> list[tuple[str, dict[str, str], Any]]:
        return [(p, q, b) for m, p, q, b in self.requests if m == method and p.endswith(suffix)]


def _client(wire: FakeQdrantWire) -> QdrantClient:
    return QdrantClient(url=URL, transport=httpx.MockTransport(wire), check_compatibility=False)


@pytest.mark.parametrize(
    ("env", "expected", "consistency"),
    [
        ({}, (1, 1, 1), "1"),
        (
            {
                "qdrant_shards": 6,
                "qdrant_replication_factor": 2,
                "qdrant_write_consistency": 2,
                "qdrant_read_consistency": "majority",
            },
            (6, 2, 2),
            "majority",
        ),
    ],
)
def test_collections_are_created_and_read_with_the_settings_layout(
    env: dict[str, Any], expected: tuple[int, int, int], consistency: str
) -> None:
    wire = FakeQdrantWire()
    settings = RetrieverSettings(qdrant_url=URL, **env)
    store = qdrant_store(settings, URL, client=_client(wire))
    store.open()
    try:
        store.create_collection(CollectionSpec(name="docs", dense_dims=4))
        creates = [
            b for p, _, b in wire.bodies("PUT") if re.fullmatch(r"/collections/docs\.\w+", p)
        ]
        assert len(creates) == 1
        body = creates[0]
        got = (body["shard_number"], body["replication_factor"], body["write_consistency_factor"])
        assert got == expected
        store.search("docs", SearchQuery(text="zebra crossing", paths=frozenset({SearchPath.BM25})))
        queries = wire.bodies("POST", "/points/query")
        assert queries and all(q.get("consistency") == consistency for _, q, _ in queries)
    finally:
        store.close()


def _prod(repo_root: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with kustomize) is needed to render the manifests"
    out = subprocess.run(
        [kubectl, "kustomize", str(repo_root / "deploy/k8s/overlays/prod")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_the_prod_qdrant_is_a_three_node_cluster_the_retriever_shards_over(
    repo_root: Path,
) -> None:
    docs = _prod(repo_root)
    named = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    sts = named[("StatefulSet", "qdrant")]["spec"]
    assert sts["replicas"] == 3
    pod = sts["template"]["spec"]
    container = pod["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["QDRANT__CLUSTER__ENABLED"] == "true"
    assert env["QDRANT__CLUSTER__P2P__PORT"] == "6335"
    assert {"name": "p2p", "containerPort": 6335} in container["ports"]
    script = container["args"][0]
    assert '--bootstrap "http://qdrant-0.qdrant-headless:6335"' in script
    assert '--uri "$peer"' in script and "qdrant-headless:6335" in script
    (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == {"app.kubernetes.io/name": "qdrant"}
    headless = named[("Service", "qdrant-headless")]["spec"]
    assert headless["publishNotReadyAddresses"] is True
    assert {"name": "p2p", "port": 6335, "targetPort": "p2p"} in headless["ports"]
    pdb = named[("PodDisruptionBudget", "qdrant")]["spec"]
    assert pdb["maxUnavailable"] == 1
    peers = named[("NetworkPolicy", "qdrant-peers")]["spec"]
    assert peers["ingress"][0]["ports"] == [{"port": 6335}]

    config = named[("ConfigMap", "retriever-config")]["data"]
    prefix = "GROUNDWIRE_RETRIEVER_"
    settings = RetrieverSettings(
        **{k[len(prefix) :].lower(): v for k, v in config.items() if k.startswith(prefix)}
    )
    # one node down: every shard still has a live copy, and writes need only one
    assert settings.qdrant_replication_factor == 2
    assert settings.qdrant_write_consistency <= settings.qdrant_replication_factor - 1
    assert settings.qdrant_shards >= sts["replicas"]
    assert settings.replicas is True
    assert named[("Deployment", "retriever")]["spec"]["replicas"] == 2


@pytest.mark.parametrize(
    "env",
    [
        {"replicas": True, "replica_stale_after_s": 8.0},  # stale-after above grace
        {"replicas": True, "replica_refresh_s": 6.0},  # refresh above stale-after
        {"qdrant_replication_factor": 2, "qdrant_write_consistency": 3},
    ],
)
def test_inconsistent_replica_or_cluster_settings_are_refused(env: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"REPLICA_|QDRANT_WRITE_CONSISTENCY"):
        RetrieverSettings(**env)
