"""The Kubernetes manifests render offline, validate against the Kubernetes schemas,
and say what the README promises: native gRPC probes, hardened pods, autoscaled
model servers, network policies, settings keys that the services actually read,
secrets from Secrets only, Prometheus scrape annotations on the metrics ports, and
the opt-in Ingress (TLS) and OpenAI-compatible LLM components."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from pydantic import SecretStr

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


# Read by every service under one name, without its prefix (see ServiceSettings).
SHARED_ENV = {"GROUNDWIRE_SERVICE_TOKEN"}


def _env_names(cls: type) -> set[str]:
    prefix = cls.model_config["env_prefix"]  # type: ignore[attr-defined]
    own = {f"{prefix}{name}".upper() for name in cls.model_fields}  # type: ignore[attr-defined]
    return own | SHARED_ENV


def _kustomize(directory: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with kustomize) is needed to render the manifests"
    out = subprocess.run(
        [kubectl, "kustomize", str(directory)], check=True, capture_output=True, text=True
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def _render(repo_root: Path, overlay: str) -> list[dict[str, Any]]:
    return _kustomize(repo_root / "deploy/k8s/overlays" / overlay)


@pytest.fixture(scope="module", params=["dev", "prod"])
def rendered(request: pytest.FixtureRequest, repo_root: Path) -> list[dict[str, Any]]:
    return _render(repo_root, request.param)


@pytest.fixture(scope="module")
def prod(repo_root: Path) -> list[dict[str, Any]]:
    return _render(repo_root, "prod")


def readme_overlay(repo_root: Path) -> str:
    """The example overlay deploy/k8s/README.md tells users to write."""
    readme = (repo_root / "deploy/k8s/README.md").read_text(encoding="utf-8")
    match = re.search(
        r"```yaml\n# deploy/k8s/overlays/mine/kustomization.yaml\n(.*?)```", readme, re.S
    )
    assert match, "deploy/k8s/README.md lost its example overlay"
    return match[1]


@pytest.fixture(scope="module")
def public(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The README's example overlay (prod, the Ingress and the OpenAI-compatible LLM
    components, the user's host and endpoint), rendered where the README puts it."""
    k8s = tmp_path_factory.mktemp("deploy") / "k8s"
    shutil.copytree(repo_root / "deploy/k8s", k8s)
    mine = k8s / "overlays/mine"
    mine.mkdir()
    (mine / "kustomization.yaml").write_text(readme_overlay(repo_root), encoding="utf-8")
    return _kustomize(mine)


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
        if target:  # policies add up: a pod admits what any policy on it allows
            sources, before = _ingress_sources(p), allowed.get(target, set())
            allowed[target] = None if sources is None or before is None else before | sources
    assert allowed["gateway"] is None, "only the gateway is reachable from outside"
    # and the Qdrant cluster's nodes each other (p2p port; the qdrant-cluster component)
    assert allowed["qdrant"] == {"retriever", "qdrant"}
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


def test_every_object_lands_in_the_groundwire_namespace(rendered: list[dict[str, Any]]) -> None:
    # Objects a component adds do not get the base's namespace by themselves.
    for doc in rendered:
        if doc["kind"] != "Namespace":
            assert doc["metadata"].get("namespace") == "groundwire", doc["metadata"]["name"]


def _metrics_port(service: str, deployment: dict[str, Any], config: dict[str, Any]) -> int:
    """The port /metrics is served on: the `metrics` port, or the gateway's HTTP port."""
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    ports: dict[str, int] = {p["name"]: p["containerPort"] for p in container["ports"]}
    prefix = SETTINGS[service].model_config["env_prefix"]
    if "metrics" in ports:
        assert int(config["data"][f"{prefix}METRICS_PORT"]) == ports["metrics"], service
        return ports["metrics"]
    # The gateway serves /metrics on its own HTTP port (GET /metrics).
    assert service == "gateway", f"{service} has no metrics port"
    assert int(config["data"][f"{prefix}PORT"]) == ports["http"]
    return ports["http"]


def test_prometheus_scrape_annotations_match_the_metrics_ports(
    rendered: list[dict[str, Any]],
) -> None:
    deployments = _by_kind(rendered, "Deployment")
    configs = _by_kind(rendered, "ConfigMap")
    for service in SETTINGS:
        deployment = deployments[service]
        port = _metrics_port(service, deployment, configs[f"{service}-config"])
        annotations = deployment["spec"]["template"]["metadata"].get("annotations", {})
        assert annotations.get("prometheus.io/scrape") == "true", service
        assert annotations.get("prometheus.io/port") == str(port), service
        assert annotations.get("prometheus.io/path") == "/metrics", service
    # Every Deployment with a metrics port is annotated, not only the five above.
    for name, deployment in deployments.items():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            if any(p.get("name") == "metrics" for p in container.get("ports", [])):
                annotations = deployment["spec"]["template"]["metadata"]["annotations"]
                assert annotations["prometheus.io/scrape"] == "true", name


def test_the_scrape_policy_opens_only_the_metrics_port(prod: list[dict[str, Any]]) -> None:
    policy = _by_kind(prod, "NetworkPolicy")["metrics-from-monitoring"]
    (expression,) = policy["spec"]["podSelector"]["matchExpressions"]
    assert set(expression["values"]) == {"embedder", "reranker", "retriever", "orchestrator"}
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": "metrics"}]
    (peer,) = rule["from"]
    assert set(peer) == {"namespaceSelector"}, "a namespace, not the whole world"


def _secret_env_names(cls: type) -> set[str]:
    prefix = cls.model_config["env_prefix"]  # type: ignore[attr-defined]
    return {
        f"{prefix}{name}".upper()
        for name, info in cls.model_fields.items()  # type: ignore[attr-defined]
        if "SecretStr" in str(info.annotation)
    } | SHARED_ENV


def test_every_service_gets_the_service_token_from_one_required_secret(
    rendered: list[dict[str, Any]],
) -> None:
    """#24: all five services carry the same token, from a Secret (not optional: a
    pod without it would serve any caller that reaches its port)."""
    deployments = _by_kind(rendered, "Deployment")
    for service in SETTINGS:
        container = deployments[service]["spec"]["template"]["spec"]["containers"][0]
        refs = {e["name"]: e.get("valueFrom", {}) for e in container.get("env", [])}
        assert refs["GROUNDWIRE_SERVICE_TOKEN"] == {
            "secretKeyRef": {"name": "groundwire-service-token", "key": "token"}
        }, service


def test_secrets_come_from_secrets_only(public: list[dict[str, Any]]) -> None:
    configs = _by_kind(public, "ConfigMap")
    deployments = _by_kind(public, "Deployment")
    for service, cls in SETTINGS.items():
        secret_names = _secret_env_names(cls)
        leaked = secret_names & set(configs[f"{service}-config"]["data"])
        assert not leaked, f"{service}: secrets in a ConfigMap: {leaked}"
        container = deployments[service]["spec"]["template"]["spec"]["containers"][0]
        for env in container.get("env", []):
            if env["name"] in secret_names:
                assert "value" not in env and "secretKeyRef" in env["valueFrom"], env["name"]
    orchestrator = deployments["orchestrator"]["spec"]["template"]["spec"]["containers"][0]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in orchestrator["env"]}
    assert refs["GROUNDWIRE_ORCHESTRATOR_OPENAI_API_KEY"] == {
        "name": "groundwire-llm",
        "key": "openai-api-key",
        "optional": True,
    }
    assert refs["GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_API_KEY"]["name"] == "groundwire-llm"


def test_the_openai_component_configures_a_valid_orchestrator(
    public: list[dict[str, Any]], repo_root: Path
) -> None:
    data = _by_kind(public, "ConfigMap")["orchestrator-config"]["data"]
    prefix = OrchestratorSettings.model_config["env_prefix"]
    fields = {key.removeprefix(prefix).lower(): value for key, value in data.items()}
    # The Secret's key, as `kubectl create secret … --from-literal=openai-api-key=…` gives it.
    settings = OrchestratorSettings(**fields, openai_api_key=SecretStr("sk-test"))
    assert settings.openai_base_url == "http://vllm.llm.svc:8000/v1", "the README's patch"
    assert settings.openai_strong_model and settings.openai_fast_model
    assert settings.llm_order.split(",")[0] == "openai"
    # The base alone configures no LLM: extractive answers until a user opts in.
    base = _by_kind(_render(repo_root, "dev"), "ConfigMap")
    assert not any("OPENAI" in key for key in base["orchestrator-config"]["data"])


def test_the_ingress_component_serves_the_gateway_with_tls(public: list[dict[str, Any]]) -> None:
    for doc in public:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    ingress = _by_kind(public, "Ingress")["gateway"]
    assert ingress["metadata"]["namespace"] == "groundwire"
    spec = ingress["spec"]
    (tls,) = spec["tls"]
    (rule,) = spec["rules"]
    assert tls["secretName"] and tls["hosts"] == [rule["host"]]
    assert rule["host"] == "search.your-domain.org", "the README's patch applies"
    assert "cert-manager.io/cluster-issuer" in ingress["metadata"]["annotations"]
    (path,) = rule["http"]["paths"]
    backend = path["backend"]["service"]
    service = _by_kind(public, "Service")[backend["name"]]
    assert backend["name"] == "gateway"
    assert backend["port"]["name"] in {p["name"] for p in service["spec"]["ports"]}
    # The proxy must not cut what the gateway allows: its deadlines and upload size.
    annotations = ingress["metadata"]["annotations"]
    gateway = GatewaySettings()
    read_timeout = float(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"])
    assert read_timeout > max(gateway.chat_timeout_s, gateway.admin_timeout_s)
    assert annotations["nginx.ingress.kubernetes.io/proxy-buffering"] == "off", "SSE"
    body = re.fullmatch(r"(\d+)m", annotations["nginx.ingress.kubernetes.io/proxy-body-size"])
    assert body and int(body[1]) * 1_048_576 > gateway.max_upload_bytes
    # Behind the controller, per-client limits need the forwarded address.
    data = _by_kind(public, "ConfigMap")["gateway-config"]["data"]
    allowed = data["GROUNDWIRE_GATEWAY_FORWARDED_ALLOW_IPS"]
    assert allowed and allowed != "*"
    assert GatewaySettings(forwarded_allow_ips=allowed).forwarded_allow_ips == allowed
