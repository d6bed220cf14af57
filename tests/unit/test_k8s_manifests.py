"""The Kubernetes manifests render offline, validate against the Kubernetes schemas,
and say what the README promises: native gRPC probes, hardened pods, autoscaled
model servers, network policies, settings keys that the services actually read."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from groundwire_embedder.settings import EmbedderSettings
from groundwire_gateway.settings import GatewaySettings
from groundwire_orchestrator.settings import OrchestratorSettings
from groundwire_reranker.settings import RerankerSettings
from groundwire_retriever.settings import RetrieverSettings

K8S_VERSION = "1.32"
SETTINGS = {
    "embedder": EmbedderSettings,
    "reranker": RerankerSettings,
    "retriever": RetrieverSettings,
    "orchestrator": OrchestratorSettings,
    "gateway": GatewaySettings,
}


def _env_names(cls: type) -> set[str]:
    prefix = cls.model_config["env_prefix"]  # type: ignore[attr-defined]
    return {f"{prefix}{name}".upper() for name in cls.model_fields}  # type: ignore[attr-defined]


def _render(repo_root: Path, overlay: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with kustomize) is needed to render the manifests"
    out = subprocess.run(
        [kubectl, "kustomize", str(repo_root / "deploy/k8s/overlays" / overlay)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


@pytest.fixture(scope="module", params=["dev", "prod"])
def rendered(request: pytest.FixtureRequest, repo_root: Path) -> list[dict[str, Any]]:
    return _render(repo_root, request.param)


@pytest.fixture(scope="module")
def prod(repo_root: Path) -> list[dict[str, Any]]:
    return _render(repo_root, "prod")


def _by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def test_every_object_validates_against_the_kubernetes_schemas(
    rendered: list[dict[str, Any]],
) -> None:
    assert len(rendered) > 10
    for doc in rendered:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_a_broken_object_fails_validation() -> None:
    bad = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {"replicas": "two"},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def test_grpc_services_have_native_grpc_probes_and_hardened_pods(
    prod: list[dict[str, Any]],
) -> None:
    deployments = _by_kind(prod, "Deployment")
    for name in ("embedder", "reranker", "retriever", "orchestrator"):
        container = deployments[name]["spec"]["template"]["spec"]["containers"][0]
        port = container["ports"][0]["containerPort"]
        assert container["readinessProbe"]["grpc"]["port"] == port, name
        assert container["livenessProbe"]["grpc"]["port"] == port, name
    for name, dep in deployments.items():
        pod = dep["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        for container in pod["containers"] + pod.get("initContainers", []):
            assert container["securityContext"]["readOnlyRootFilesystem"] is True, name
            assert container["securityContext"]["allowPrivilegeEscalation"] is False, name
            assert {"requests", "limits"} <= container["resources"].keys(), name


def test_model_servers_are_autoscaled_and_headless(prod: list[dict[str, Any]]) -> None:
    hpas = _by_kind(prod, "HorizontalPodAutoscaler")
    assert {h["spec"]["scaleTargetRef"]["name"] for h in hpas.values()} == {"embedder", "reranker"}
    for hpa in hpas.values():
        assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    services = _by_kind(prod, "Service")
    assert services["embedder"]["spec"]["clusterIP"] == "None"
    assert services["reranker"]["spec"]["clusterIP"] == "None"
    configs = _by_kind(prod, "ConfigMap")
    # clients resolve every replica and spread calls round-robin
    assert configs["orchestrator-config"]["data"][
        "GROUNDWIRE_ORCHESTRATOR_EMBEDDER_ADDR"
    ].startswith("dns:///")
    assert _by_kind(prod, "PodDisruptionBudget")


def _ingress_sources(policy: dict[str, Any]) -> set[str] | None:
    """Pod names allowed in, or None when any source may connect."""
    sources: set[str] = set()
    for rule in policy["spec"]["ingress"]:
        if "from" not in rule:
            return None
        for peer in rule["from"]:
            sources.add(peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"])
    return sources


def test_network_policies_isolate_the_stores(prod: list[dict[str, Any]]) -> None:
    policies = list(_by_kind(prod, "NetworkPolicy").values())
    deny = [p for p in policies if p["spec"]["podSelector"] == {}]
    assert (
        deny and deny[0]["spec"]["policyTypes"] == ["Ingress"] and "ingress" not in deny[0]["spec"]
    )
    allowed: dict[str, set[str] | None] = {}
    for p in policies:
        target = p["spec"]["podSelector"].get("matchLabels", {}).get("app.kubernetes.io/name")
        if target:
            allowed[target] = _ingress_sources(p)
    assert allowed["gateway"] is None, "only the gateway is reachable from outside"
    assert allowed["qdrant"] == {"retriever"}
    assert allowed["redis"] == {"gateway"}
    assert allowed["orchestrator"] == {"gateway"}
    for name in ("embedder", "reranker", "retriever", "orchestrator", "qdrant", "redis"):
        assert allowed[name] is not None, f"{name} must not be open to the world"


def test_settings_keys_are_the_services_environment_variables(
    rendered: list[dict[str, Any]],
) -> None:
    configs = _by_kind(rendered, "ConfigMap")
    deployments = _by_kind(rendered, "Deployment")
    for service, cls in SETTINGS.items():
        known = _env_names(cls)
        keys = set(configs[f"{service}-config"]["data"])
        container = deployments[service]["spec"]["template"]["spec"]["containers"][0]
        keys |= {e["name"] for e in container.get("env", [])}
        assert keys <= known, f"{service}: keys no setting reads: {sorted(keys - known)}"
