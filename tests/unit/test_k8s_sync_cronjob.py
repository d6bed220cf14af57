"""The sync CronJob component renders offline on top of prod, validates against the
Kubernetes schemas, and holds together: its body is a valid sync body for the
gateway's route, the route it calls exists, the folder it names is under the
retriever's sync roots and mounted there, and its pods are hardened."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from groundwire_gateway.app import create_app
from groundwire_gateway.settings import GatewaySettings
from groundwire_gateway.sync_models import SyncBody
from groundwire_retriever.settings import RetrieverSettings

K8S_VERSION = "1.32"
OVERLAY = """apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: groundwire
resources:
  - ../prod
components:
  - ../../components/sync-cronjob
"""


@pytest.fixture(scope="module")
def rendered(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    k8s = tmp_path_factory.mktemp("deploy") / "k8s"
    shutil.copytree(repo_root / "deploy/k8s", k8s)
    (k8s / "overlays/mine").mkdir()
    (k8s / "overlays/mine/kustomization.yaml").write_text(OVERLAY, encoding="utf-8")
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with kustomize) is needed to render the manifests"
    out = subprocess.run(
        [kubectl, "kustomize", str(k8s / "overlays/mine")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def test_every_object_validates(rendered: list[dict[str, Any]]) -> None:
    for doc in rendered:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_cronjob_posts_a_valid_body_to_the_sync_route(rendered: list[dict[str, Any]]) -> None:
    cron = one(rendered, "CronJob", "sync-docs")
    assert cron["metadata"]["namespace"] == "groundwire"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    script = " ".join(container["args"])
    assert "/v1/admin/collections/docs/sync" in script and "--fail-with-body" in script
    paths = create_app(GatewaySettings()).openapi()["paths"]
    assert "post" in paths["/v1/admin/collections/{name}/sync"]

    definition = one(rendered, "ConfigMap", "sync-definition")["data"]["docs.json"]
    body = SyncBody.model_validate(json.loads(definition))
    retriever = one(rendered, "ConfigMap", "retriever-config")["data"]
    roots = RetrieverSettings.model_validate(
        {"sync_roots": json.loads(retriever["GROUNDWIRE_RETRIEVER_SYNC_ROOTS"])}
    ).sync_roots
    assert any(Path(body.source).is_relative_to(root) for root in roots)


def test_the_retriever_mounts_the_checkout_read_only(rendered: list[dict[str, Any]]) -> None:
    pod = one(rendered, "Deployment", "retriever")["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    mounts = {m["mountPath"]: m for m in containers["retriever"]["volumeMounts"]}
    assert mounts["/sources"]["readOnly"] is True
    sidecar = containers["git-sync"]
    env = {e["name"]: e["value"] for e in sidecar["env"]}
    assert env["GITSYNC_ROOT"] == "/sources" and env["GITSYNC_LINK"] == "docs"
    assert sidecar["securityContext"]["readOnlyRootFilesystem"] is True
    assert containers["retriever"]["readinessProbe"]["grpc"]["port"] == 50053, "base kept"
