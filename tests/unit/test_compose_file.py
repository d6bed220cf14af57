"""docker-compose.yml, checked offline: no Docker engine or compose plugin exists here.

The file is validated against the official Compose Specification JSON schema, which
check-jsonschema ships vendored (`check-jsonschema --builtin-schema vendor.compose-spec`
uses the same file, with compose-spec's Apache-2.0 licence beside it), so the test needs
no network. On top of the schema it checks the project's own rules: one env prefix per
service, a health check on every gRPC service, start-up order by health, and that the
compose file agrees with the service Dockerfiles it builds.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"

# Groundwire service -> its gRPC port (the gateway serves HTTP).
GRPC_PORTS = {"embedder": 50051, "reranker": 50052, "retriever": 50053, "orchestrator": 50054}
GROUNDWIRE_SERVICES = (*GRPC_PORTS, "gateway")


def env_prefix(service: str) -> str:
    return f"GROUNDWIRE_{service.upper()}_"


def load_compose_schema() -> dict[str, Any]:
    vendored = resources.files("check_jsonschema.builtin_schemas.vendor")
    schema: dict[str, Any] = json.loads(
        vendored.joinpath("compose-spec.json").read_text(encoding="utf-8")
    )
    return schema


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    return document


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = load_compose_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def env_keys(service: dict[str, Any]) -> list[str]:
    """Names of a service's `environment`, in either of the two forms Compose allows."""
    env = service.get("environment") or {}
    if isinstance(env, dict):
        return list(env)
    return [entry.split("=", 1)[0] for entry in env]


def dockerfile_of(service: dict[str, Any]) -> Path:
    build: dict[str, str] = service["build"]
    return (ROOT / build["context"] / build["dockerfile"]).resolve()


def dockerfile_instructions(path: Path) -> str:
    """The Dockerfile without its comment lines (they may mention what must not be run)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith("#"))


def test_compose_file_matches_the_compose_specification(
    compose: dict[str, Any], validator: jsonschema.protocols.Validator
) -> None:
    errors = sorted(validator.iter_errors(compose), key=lambda e: list(e.absolute_path))
    report = "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)
    assert not errors, report


def test_the_schema_rejects_a_broken_file(validator: jsonschema.protocols.Validator) -> None:
    # Guards against a vacuous pass (an empty or permissive schema).
    broken = {
        "services": {
            "web": {
                "image": "nginx",
                "healthcheck": {"test": ["CMD", "true"], "intervall": "5s"},
                "depends_on": {"db": {"condition": "service_awake"}},
            }
        }
    }
    assert not validator.is_valid(broken)


def test_every_groundwire_service_is_present(compose: dict[str, Any]) -> None:
    assert set(GROUNDWIRE_SERVICES) <= set(compose["services"])
    assert {"qdrant", "redis"} <= set(compose["services"])


@pytest.mark.parametrize("name", GROUNDWIRE_SERVICES)
def test_a_service_only_sets_its_own_prefix(compose: dict[str, Any], name: str) -> None:
    keys = env_keys(compose["services"][name])
    foreign = [key for key in keys if not key.startswith(env_prefix(name))]
    assert not foreign, f"{name} sets keys outside {env_prefix(name)}: {foreign}"


def test_no_other_service_sets_groundwire_keys(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        if name in GROUNDWIRE_SERVICES:
            continue
        assert not [key for key in env_keys(service) if key.startswith("GROUNDWIRE_")], name


@pytest.mark.parametrize(("name", "port"), GRPC_PORTS.items())
def test_every_grpc_service_has_a_grpc_health_check(
    compose: dict[str, Any], name: str, port: int
) -> None:
    check = compose["services"][name].get("healthcheck")
    assert check, f"{name} has no healthcheck"
    assert not check.get("disable", False)
    test = check["test"]
    assert isinstance(test, list) and test[0] == "CMD", test
    assert any("grpc_health.v1" in part for part in test), f"{name}: not a grpc.health.v1 check"
    assert test[-1] == str(port), f"{name}'s health check probes {test[-1]}, serves {port}"


def test_every_healthy_dependency_has_a_health_check(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, service in services.items():
        for target, spec in (service.get("depends_on") or {}).items():
            assert target in services, f"{name} depends on unknown {target}"
            if spec.get("condition") == "service_healthy":
                assert services[target].get("healthcheck"), f"{name} waits on {target}"


@pytest.mark.parametrize(
    ("name", "needs"),
    [
        ("retriever", {"qdrant", "embedder"}),
        ("orchestrator", {"embedder", "retriever", "reranker"}),
        ("gateway", {"orchestrator", "retriever", "redis"}),
    ],
)
def test_services_start_after_their_dependencies_are_healthy(
    compose: dict[str, Any], name: str, needs: set[str]
) -> None:
    depends_on = compose["services"][name].get("depends_on") or {}
    assert isinstance(depends_on, dict), "use the long form, with a condition"
    for target in needs:
        assert depends_on.get(target, {}).get("condition") == "service_healthy", target


def test_the_retriever_uses_the_qdrant_server(compose: dict[str, Any]) -> None:
    env = compose["services"]["retriever"]["environment"]
    assert env["GROUNDWIRE_RETRIEVER_QDRANT_URL"] == "http://qdrant:6333"
    assert compose["services"]["gateway"]["environment"]["GROUNDWIRE_GATEWAY_REDIS_URL"]


def test_models_are_mounted_read_only(compose: dict[str, Any]) -> None:
    for name in ("embedder", "reranker"):
        assert "./var/models:/models:ro" in compose["services"][name]["volumes"], name
    embedder_env = compose["services"]["embedder"]["environment"]
    assert embedder_env["GROUNDWIRE_EMBEDDER_MODEL_DIR"] == "/models/minilm"


def test_only_the_gateway_and_the_trace_viewer_are_published(compose: dict[str, Any]) -> None:
    published = {name for name, svc in compose["services"].items() if svc.get("ports")}
    assert published == {"gateway", "jaeger"}
    assert "8080:8080" in compose["services"]["gateway"]["ports"]


@pytest.mark.parametrize("name", GROUNDWIRE_SERVICES)
def test_the_image_is_built_from_the_service_dockerfile(compose: dict[str, Any], name: str) -> None:
    service = compose["services"][name]
    assert (ROOT / service["build"]["context"]).resolve() == ROOT, "context must be the root"
    dockerfile = dockerfile_of(service)
    assert dockerfile == ROOT / "services" / name / "Dockerfile"
    assert dockerfile.is_file()


@pytest.mark.parametrize("name", GROUNDWIRE_SERVICES)
def test_the_dockerfile_agrees_with_the_compose_file(compose: dict[str, Any], name: str) -> None:
    text = dockerfile_instructions(dockerfile_of(compose["services"][name]))
    port = GRPC_PORTS.get(name, 8080)
    assert f"{env_prefix(name)}HOST=0.0.0.0" in text
    assert f"{env_prefix(name)}PORT={port}" in text
    assert re.search(rf"^EXPOSE {port}$", text, re.MULTILINE)
    assert re.search(r"^USER 10001(:10001)?$", text, re.MULTILINE)
    assert f'CMD ["python", "-m", "groundwire_{name}"]' in text
    assert len(re.findall(r"^FROM python:3\.11-slim\b", text, re.MULTILINE)) == 2
    assert f"pip install -c constraints.txt ./libs/core ./services/{name}" in text
    # Build-time tools stay out of serving images: nothing installs them, nor the extra.
    installs = " ".join(re.findall(r"pip install[^\n]*", text))
    assert not re.search(r"torch|transformers|\[export\]", installs), installs


def test_compose_settings_are_the_services_settings(compose: dict[str, Any]) -> None:
    """Every GROUNDWIRE_* key in the compose file is a field of that service's settings."""
    from groundwire_embedder.settings import EmbedderSettings
    from groundwire_gateway.settings import GatewaySettings
    from groundwire_orchestrator.settings import OrchestratorSettings
    from groundwire_reranker.settings import RerankerSettings
    from groundwire_retriever.settings import RetrieverSettings

    classes = {
        "embedder": EmbedderSettings,
        "reranker": RerankerSettings,
        "retriever": RetrieverSettings,
        "orchestrator": OrchestratorSettings,
        "gateway": GatewaySettings,
    }
    for name, cls in classes.items():
        prefix = cls.model_config["env_prefix"]
        known = {f"{prefix}{field}".upper() for field in cls.model_fields}
        keys = set(compose["services"][name].get("environment", {}))
        assert keys, name
        assert keys <= known, f"{name}: keys no setting reads: {sorted(keys - known)}"


def test_traces_go_to_the_collector(compose: dict[str, Any]) -> None:
    for name in GROUNDWIRE_SERVICES:
        env = compose["services"][name]["environment"]
        prefix = f"GROUNDWIRE_{name.upper()}_"
        assert env[prefix + "OTEL_EXPORTER"] == "otlp", name
        assert env[prefix + "OTEL_ENDPOINT"] == "http://otel-collector:4317", name
