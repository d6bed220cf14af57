"""docker-compose.yml, checked offline: no Docker engine or compose plugin exists here.

The file is validated against the official Compose Specification JSON schema, which
check-jsonschema ships vendored (`check-jsonschema --builtin-schema vendor.compose-spec`
uses the same file, with compose-spec's Apache-2.0 licence beside it), so the test needs
no network. On top of the schema it checks the project's own rules: one env prefix per
service, a health check on every gRPC service, start-up order by health, and that the
compose file agrees with the service Dockerfiles it builds.

Compose interpolates `${VAR}` from the shell and the `.env` file before anything else;
the tests do the same with the documented `.env` (a copy of `.env.example`), with the
interpolation rules of the Compose Specification implemented below (a small subset:
the forms the file uses, and an error for any other).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
MODELS_DOCKERFILE = ROOT / "deploy" / "models" / "Dockerfile"

# Groundwire service -> its gRPC port (the gateway serves HTTP).
GRPC_PORTS = {"embedder": 50051, "reranker": 50052, "retriever": 50053, "orchestrator": 50054}
GROUNDWIRE_SERVICES = (*GRPC_PORTS, "gateway")


# Settings every Groundwire service reads under one name, without its prefix.
SHARED_KEYS = frozenset({"GROUNDWIRE_SERVICE_TOKEN"})


def env_prefix(service: str) -> str:
    return f"GROUNDWIRE_{service.upper()}_"


def load_compose_schema() -> dict[str, Any]:
    vendored = resources.files("check_jsonschema.builtin_schemas.vendor")
    schema: dict[str, Any] = json.loads(
        vendored.joinpath("compose-spec.json").read_text(encoding="utf-8")
    )
    return schema


class MissingVariable(Exception):
    """A `${VAR:?message}` (or `${VAR?message}`) whose variable is missing."""


# `$$`, `${...}` or `$NAME` (Compose Specification, "Interpolation").
_REFERENCE = re.compile(r"\$(?:\$|\{(?P<braced>[^}]*)\}|(?P<named>[A-Za-z_][A-Za-z0-9_]*))")
_BRACED = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>.*))?", re.S)


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """One string interpolated as Compose does; MissingVariable for a required one."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        if match["named"]:
            return env.get(match["named"], "")
        braced = _BRACED.fullmatch(match["braced"])
        if braced is None:
            raise ValueError(f"invalid interpolation {match.group(0)!r}")
        name, op, arg = braced["name"], braced["op"], braced["arg"]
        current = env.get(name)
        if op is None:
            return current or ""
        missing = current is None or (op.startswith(":") and current == "")
        if op.endswith("-"):
            return arg if missing else str(current)
        if op.endswith("?"):
            if missing:
                raise MissingVariable(f"required variable {name} is missing a value: {arg}")
            return str(current)
        return "" if missing else arg  # "+": the alternative when set

    return _REFERENCE.sub(substitute, value)


def interpolated(node: Any, env: Mapping[str, str]) -> Any:
    """The document with every string value interpolated (keys are left as they are)."""
    if isinstance(node, dict):
        return {key: interpolated(value, env) for key, value in node.items()}
    if isinstance(node, list):
        return [interpolated(value, env) for value in node]
    if isinstance(node, str):
        return interpolate(node, env)
    return node


def read_dotenv(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of an env file; blank lines and `#` comments skipped."""
    values: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: not KEY=VALUE: {line!r}"
        # Quotes would be part of the value for a shell but not for Compose: avoid both.
        assert not value.startswith(("'", '"')), f"{path.name}: quoted value for {key}"
        values[key.strip()] = value.strip()
    return values


def documented_names(path: Path) -> set[str]:
    """Every variable .env.example names, set or commented out (`# NAME=`)."""
    pattern = re.compile(r"^#?\s*(GROUNDWIRE_[A-Z0-9_]+)=", re.MULTILINE)
    return set(pattern.findall(path.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def raw_compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    return document


@pytest.fixture(scope="module")
def dotenv() -> dict[str, str]:
    """The documented .env: `cp .env.example .env`, as the user does."""
    return read_dotenv(ENV_EXAMPLE)


@pytest.fixture(scope="module")
def compose(raw_compose: dict[str, Any], dotenv: dict[str, str]) -> dict[str, Any]:
    """The file as Compose sees it with the documented .env and nothing else set."""
    document: dict[str, Any] = interpolated(raw_compose, dotenv)
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
    foreign = [
        key for key in keys if not key.startswith(env_prefix(name)) and key not in SHARED_KEYS
    ]
    assert not foreign, f"{name} sets keys outside {env_prefix(name)}: {foreign}"


# The one-shot migrations run a service's image with that service's database URL.
MIGRATE_SERVICES = {"migrate": "gateway", "migrate-retriever": "retriever"}


def test_no_other_service_sets_groundwire_keys(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        if name in GROUNDWIRE_SERVICES:
            continue
        keys = [key for key in env_keys(service) if key.startswith("GROUNDWIRE_")]
        if name in MIGRATE_SERVICES:
            owner = MIGRATE_SERVICES[name]
            assert keys == [f"{env_prefix(owner)}DATABASE_URL"], name
            assert service["image"] == compose["services"][owner]["image"], name
            continue
        assert not keys, name


def test_migrations_run_before_the_services_against_their_database(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    for name, owner in MIGRATE_SERVICES.items():
        env = services[owner]["environment"]
        assert env[f"{env_prefix(owner)}MIGRATE_ON_START"] == "false"
        url = env[f"{env_prefix(owner)}DATABASE_URL"]
        assert url.startswith("postgresql://") and "@postgres:5432/" in url
        assert services[name]["environment"][f"{env_prefix(owner)}DATABASE_URL"] == url
        # it retries until the database answers: no depends_on (podman 4.3 cannot start a
        # service whose exited dependency has dependencies of its own)
        assert "depends_on" not in services[name] and "seq 60" in services[name]["command"][-1]
        waits = services[owner]["depends_on"]
        assert waits[name]["condition"] == "service_completed_successfully"


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
        ("retriever", {"embedder"}),
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


def test_the_retriever_runs_its_engine_on_a_volume_and_the_server_is_a_profile(
    compose: dict[str, Any],
) -> None:
    retriever = compose["services"]["retriever"]
    env = retriever["environment"]
    assert env["GROUNDWIRE_RETRIEVER_QDRANT_URL"] == "", "embedded by default"
    assert "retriever-data:/data" in retriever["volumes"]
    assert env["GROUNDWIRE_RETRIEVER_DATA_PATH"] == "/data"
    assert compose["services"]["qdrant"]["profiles"] == ["qdrant"]
    for name in ("otel-collector", "jaeger"):
        assert compose["services"][name]["profiles"] == ["telemetry"]
    assert compose["services"]["gateway"]["environment"]["GROUNDWIRE_GATEWAY_REDIS_URL"]
    assert "redis-data:/data" in compose["services"]["redis"]["volumes"]


def test_models_are_mounted_read_only(compose: dict[str, Any]) -> None:
    for name in ("embedder", "reranker"):
        assert "models:/models:ro" in compose["services"][name]["volumes"], name
    embedder_env = compose["services"]["embedder"]["environment"]
    assert embedder_env["GROUNDWIRE_EMBEDDER_MODEL_DIR"] == "/models/minilm"


def test_the_models_volume_is_filled_by_the_one_shot_models_service(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    models = services["models"]
    assert (ROOT / models["build"]["context"]).resolve() == ROOT, "context must be the root"
    assert dockerfile_of(models) == MODELS_DOCKERFILE
    assert models["image"].startswith("groundwire/models:")
    assert models["restart"] == "no", "a one-shot job: restarting it would loop"
    assert models["volumes"] == ["models:/target"]
    assert "models" in compose["volumes"]
    # It replaces the volume's contents with the image's /models folders.
    assert models["command"][-1].startswith("rm -rf /target/* && cp -r /models/. /target/")
    built = set(models["build"]["args"]["PROFILES"].split())
    for name in ("embedder", "reranker"):
        depends_on = services[name]["depends_on"]
        assert depends_on["models"] == {"condition": "service_completed_successfully"}, name
    for name in ("embedder", "reranker"):
        prefix = env_prefix(name)
        model_dir = services[name]["environment"].get(f"{prefix}MODEL_DIR")
        if model_dir is not None:
            assert model_dir.startswith("/models/"), name
            profile = model_dir.removeprefix("/models/")
            assert profile in built, f"{name} serves {profile}; the models service builds {built}"


def test_the_documented_env_sets_the_admin_key_the_gateway_accepts(
    raw_compose: dict[str, Any], compose: dict[str, Any], dotenv: dict[str, str]
) -> None:
    from groundwire_gateway.settings import GatewaySettings, parse_tenant_keys

    raw = raw_compose["services"]["gateway"]["environment"]["GROUNDWIRE_GATEWAY_ADMIN_API_KEYS"]
    assert raw.startswith("${GROUNDWIRE_GATEWAY_ADMIN_API_KEYS:?"), "required, from .env"
    value = compose["services"]["gateway"]["environment"]["GROUNDWIRE_GATEWAY_ADMIN_API_KEYS"]
    assert value == dotenv["GROUNDWIRE_GATEWAY_ADMIN_API_KEYS"]
    pairs = parse_tenant_keys(value)
    assert pairs, "the example must switch the admin routes on"
    settings = GatewaySettings(admin_api_keys=value)
    assert settings.admin_api_keys.get_secret_value() == value
    # A placeholder the user is told to change, not a key that looks real.
    assert all("change-me" in key for _, key in pairs)
    assert "CHANGE THIS VALUE" in ENV_EXAMPLE.read_text(encoding="utf-8")


def test_every_service_gets_the_service_token_from_the_dotenv(
    raw_compose: dict[str, Any], compose: dict[str, Any], dotenv: dict[str, str]
) -> None:
    """#24: all five services share one token (required: compose stops without it),
    and each one's settings read it."""
    from groundwire_core.settings import ServiceSettings

    for name in GROUNDWIRE_SERVICES:
        raw = raw_compose["services"][name]["environment"]["GROUNDWIRE_SERVICE_TOKEN"]
        assert raw.startswith("${GROUNDWIRE_SERVICE_TOKEN:?"), name
        value = compose["services"][name]["environment"]["GROUNDWIRE_SERVICE_TOKEN"]
        assert value == dotenv["GROUNDWIRE_SERVICE_TOKEN"] and "change-me" in value
    token = ServiceSettings(GROUNDWIRE_SERVICE_TOKEN=dotenv["GROUNDWIRE_SERVICE_TOKEN"])
    assert token.service_token is not None
    with pytest.raises(MissingVariable, match="GROUNDWIRE_SERVICE_TOKEN"):
        interpolated(raw_compose, {k: v for k, v in dotenv.items() if "SERVICE_TOKEN" not in k})


def test_without_a_dotenv_compose_stops_and_says_what_to_do(raw_compose: dict[str, Any]) -> None:
    with pytest.raises(MissingVariable, match=r"copy \.env\.example to \.env"):
        interpolated(raw_compose, {})


def test_interpolation_follows_the_compose_rules() -> None:
    env = {"SET": "v", "EMPTY": ""}
    assert interpolate("$$HOME ${SET} $SET ${UNSET}", env) == "$HOME v v "
    assert interpolate("${EMPTY:-d} ${EMPTY-d} ${UNSET-d}", env) == "d  d"
    assert interpolate("${SET:+alt} ${EMPTY:+alt} ${EMPTY+alt}", env) == "alt  alt"
    assert interpolate("${EMPTY?fine}", env) == ""
    with pytest.raises(MissingVariable, match="EMPTY"):
        interpolate("${EMPTY:?needed}", env)
    with pytest.raises(ValueError, match="invalid"):
        interpolate("${9LIVES}", env)


def test_env_example_and_compose_name_the_same_variables(raw_compose: dict[str, Any]) -> None:
    """What .env.example documents reaches a service, and what compose reads is documented."""
    text = COMPOSE_FILE.read_text(encoding="utf-8")
    referenced = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", text))
    passed_through = {
        key
        for service in raw_compose["services"].values()
        for key, value in (service.get("environment") or {}).items()
        if value is None
    }
    assert referenced | passed_through, "nothing comes from .env"
    assert documented_names(ENV_EXAMPLE) == referenced | passed_through
    # A pass-through name reaches only the service whose prefix it carries.
    for name, service in raw_compose["services"].items():
        for key, value in (service.get("environment") or {}).items():
            if value is None:
                assert key.startswith(env_prefix(name)), (name, key)


def test_dotenv_is_ignored_by_git_and_docker_but_the_example_is_not(repo_root: Path) -> None:
    git = shutil.which("git")
    assert git, "git is needed to ask what it ignores"

    def ignored(path: str) -> bool:
        # --no-index: the answer from the ignore rules alone, tracked or not.
        run = subprocess.run(
            [git, "check-ignore", "--no-index", "-q", path], cwd=repo_root, check=False
        )
        assert run.returncode in (0, 1), run
        return run.returncode == 0

    assert ignored(".env")
    assert not ignored(".env.example")
    dockerignore = (repo_root / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert ".env" in dockerignore


def test_published_ports_are_the_gateway_the_trace_viewer_and_a_loopback_retriever(
    compose: dict[str, Any],
) -> None:
    published = {name for name, svc in compose["services"].items() if svc.get("ports")}
    assert published == {"gateway", "jaeger", "retriever"}
    assert "8080:8080" in compose["services"]["gateway"]["ports"]
    # The retriever has no authentication: this machine only, for
    # `groundwire ingest --retriever 127.0.0.1:50053 PATH…`.
    assert compose["services"]["retriever"]["ports"] == [
        f"127.0.0.1:{GRPC_PORTS['retriever']}:{GRPC_PORTS['retriever']}"
    ]


SERVICE_DOCKERFILE = ROOT / "services" / "Dockerfile"


@pytest.mark.parametrize("name", GROUNDWIRE_SERVICES)
def test_the_image_is_built_from_the_service_dockerfile(compose: dict[str, Any], name: str) -> None:
    service = compose["services"][name]
    assert (ROOT / service["build"]["context"]).resolve() == ROOT, "context must be the root"
    assert dockerfile_of(service) == SERVICE_DOCKERFILE and SERVICE_DOCKERFILE.is_file()
    port = GRPC_PORTS.get(name, 8080)
    assert service["build"]["args"] == {"SERVICE": name, "PORT": str(port)}


def _default_port(name: str) -> int:
    import importlib

    module = importlib.import_module(f"groundwire_{name}.settings")
    classes = [
        cls
        for cls in vars(module).values()
        if isinstance(cls, type) and cls.__name__.lower() == f"{name}settings"
    ]
    assert len(classes) == 1, name
    return int(classes[0].model_fields["port"].default)


@pytest.mark.parametrize("name", GROUNDWIRE_SERVICES)
def test_the_service_listens_where_the_image_says(name: str) -> None:
    # The image sets no PORT: the service's own default is the port it exposes.
    assert _default_port(name) == GRPC_PORTS.get(name, 8080)
    text = dockerfile_instructions(SERVICE_DOCKERFILE)
    assert f"{env_prefix(name)}HOST=0.0.0.0" in text


def test_the_service_dockerfile_builds_one_service_without_build_tools() -> None:
    text = dockerfile_instructions(SERVICE_DOCKERFILE)
    assert re.search(r"^EXPOSE \$\{PORT\}$", text, re.MULTILINE)
    assert re.search(r"^USER 10001(:10001)?$", text, re.MULTILINE)
    assert "GROUNDWIRE_SERVICE_MODULE=groundwire_${SERVICE}" in text
    assert 'exec python -m \\"$GROUNDWIRE_SERVICE_MODULE\\"' in text
    assert len(re.findall(r"^FROM python:3\.11-slim\b", text, re.MULTILINE)) == 2
    core = text.index("pip install -c constraints.txt ./libs/core\n")
    service = text.index("pip install -c constraints.txt ./services/${SERVICE}")
    # the core layer comes before the builder declares SERVICE: one layer for all five
    builder = text[text.index("AS builder") : text.index("AS runtime")]
    assert core < builder.index("ARG SERVICE") + text.index("AS builder") < service
    assert "COPY services/${SERVICE} ./services/${SERVICE}" in text
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
        known = {f"{prefix}{field}".upper() for field in cls.model_fields} | SHARED_KEYS
        keys = set(compose["services"][name].get("environment", {}))
        assert keys, name
        assert keys <= known, f"{name}: keys no setting reads: {sorted(keys - known)}"


def test_traces_go_to_the_collector_of_the_telemetry_profile(
    compose: dict[str, Any], raw_compose: dict[str, Any]
) -> None:
    for name in GROUNDWIRE_SERVICES:
        env = compose["services"][name]["environment"]
        prefix = f"GROUNDWIRE_{name.upper()}_"
        # off unless .env turns it on, with the collector's profile
        assert env[prefix + "OTEL_EXPORTER"] == "none", name
        raw = raw_compose["services"][name]["environment"][prefix + "OTEL_EXPORTER"]
        assert raw == "${GROUNDWIRE_OTEL_EXPORTER:-none}", name
        assert env[prefix + "OTEL_ENDPOINT"] == "http://otel-collector:4317", name
