"""Every path a service writes to is on a writable volume, in every way it is deployed.

The images run with a read-only root (compose's ``read_only: true``, Kubernetes'
``readOnlyRootFilesystem``) as uid 10001. A setting whose default (or the value the
manifests pass) points at a folder of the image — the retriever's ``/data`` was one — makes
the service exit at start with EROFS, and no schema check notices. This test needs no
container: for each Groundwire service of docker-compose.yml and of the rendered dev and
prod overlays it builds the service's settings object from the image's ENV
(services/Dockerfile) plus the environment the manifest passes, derives every path those
settings make the process write (or read), and checks each lies on a declared mount: a
writable volume or tmpfs for writes, any mount for reads (models, sync roots). It also
checks that each health check asks the port the settings listen on.

A new path-like setting (a name ending in _path, _dir, _file, _roots or a Path type) fails
here until it is classified below as written, read or neither.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from pydantic_settings import BaseSettings

from groundwire_embedder.settings import EmbedderSettings
from groundwire_gateway.settings import GatewaySettings
from groundwire_orchestrator.settings import OrchestratorSettings
from groundwire_reranker.settings import RerankerSettings
from groundwire_retriever.settings import RetrieverSettings

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "services" / "Dockerfile"
COMPOSE_FILE = ROOT / "docker-compose.yml"
OVERLAYS = ("dev", "prod")

SETTINGS: dict[str, type[BaseSettings]] = {
    "embedder": EmbedderSettings,
    "reranker": RerankerSettings,
    "retriever": RetrieverSettings,
    "orchestrator": OrchestratorSettings,
    "gateway": GatewaySettings,
}
# The services' working directory in the image (services/Dockerfile sets no WORKDIR):
# relative defaults such as var/qdrant land under it.
WORKDIR = PurePosixPath("/")
TMPDIR = PurePosixPath("/tmp")  # tempfile's folder (no TMPDIR is set)

# Every path-like setting, classified. Written: derived in writes(); read: in reads().
WRITTEN = {
    "ready_file",
    "data_path",
    "jobs_path",
    "keys_path",
    "database_url",
}
READ = {"model_dir", "nli_model_dir", "sync_roots", "user_token_key_file"}
# Path-like by name but not a filesystem path of this process.
NOT_FILES: set[str] = set()
PATHLIKE = re.compile(r"(_path|_dir|_file|_roots|_url)$")


def _is_path_type(annotation: Any) -> bool:
    if annotation is Path:
        return True
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return any(_is_path_type(a) for a in typing.get_args(annotation))
    return any(_is_path_type(a) for a in typing.get_args(annotation))


def _pathlike_fields(cls: type[BaseSettings]) -> set[str]:
    names = set()
    for name, info in cls.model_fields.items():
        if _is_path_type(info.annotation) or (
            PATHLIKE.search(name) and not name.endswith(("_url", "_addr"))
        ):
            names.add(name)
    if "database_url" in cls.model_fields:
        names.add("database_url")
    return names


def _posix(value: object) -> PurePosixPath:
    path = PurePosixPath(str(value))
    return path if path.is_absolute() else WORKDIR / path


def _sqlite_file(url: str) -> PurePosixPath | None:
    """The file a sqlite:/// URL names (None for other databases and memory)."""
    if not url.startswith("sqlite"):
        return None
    rest = url.split(":///", 1)[1] if ":///" in url else ""
    if not rest or rest == ":memory:":
        return None
    return _posix(rest)


def writes(service: str, s: Any) -> dict[str, PurePosixPath]:
    """The folders a service's process creates or writes files in, from its settings."""
    out: dict[str, PurePosixPath] = {"tempfile": TMPDIR}
    if s.ready_file:
        out["ready_file"] = _posix(s.ready_file).parent
    if service == "retriever":
        data = _posix(s.data_path)
        if not s.qdrant_url:
            out["data_path"] = data
        jobs = _posix(s.jobs_path) if s.jobs_path else data / ".jobs"
        out["jobs_path"] = jobs
        url = s.database_url.get_secret_value()
        db = _sqlite_file(url) if url else jobs / "jobs.sqlite3"
        if db is not None:
            out["database_url"] = db.parent
    if service == "gateway":
        keys_path = getattr(s, "keys_path", "")  # gone once the keys live in the database
        if not s.redis_url and keys_path and keys_path != ":memory:":
            out["keys_path"] = _posix(keys_path).parent
        db = _sqlite_file(s.database_url.get_secret_value())
        if db is not None:
            out["database_url"] = db.parent
    return out


def reads(service: str, s: Any) -> dict[str, PurePosixPath]:
    """The folders a service reads that no image holds (models, sources, key files)."""
    out: dict[str, PurePosixPath] = {}
    for name in ("model_dir", "nli_model_dir"):
        value = getattr(s, name, None)
        if value:
            out[name] = _posix(value)
    for i, root in enumerate(getattr(s, "sync_roots", ())):
        out[f"sync_roots[{i}]"] = _posix(root)
    key_file = getattr(s, "user_token_key_file", "")
    if key_file:
        out["user_token_key_file"] = _posix(key_file)
    return out


# --- the deployments -------------------------------------------------------------------


@dataclass
class Container:
    where: str  # "compose:retriever", "prod:Deployment/retriever"
    service: str
    env: dict[str, str]
    read_only_root: bool
    writable: list[PurePosixPath] = field(default_factory=list)
    readable: list[PurePosixPath] = field(default_factory=list)
    probe_ports: list[int] = field(default_factory=list)


def image_env() -> dict[str, str]:
    """The runtime stage's ENV of services/Dockerfile (the last ENV instruction)."""
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    env_lines = [line for line in text.splitlines() if line.startswith("ENV ")]
    assert env_lines, "services/Dockerfile sets no ENV"
    pairs = re.findall(r'([A-Z_][A-Z0-9_]*)=("[^"]*"|\S+)', env_lines[-1])
    return {k: v.strip('"') for k, v in pairs if k.startswith("GROUNDWIRE_")}


def _interpolate(value: str) -> str:
    """Compose's ${VAR...}: the default when one is given, else a placeholder."""

    def one(m: re.Match[str]) -> str:
        body = m.group(1)
        for sep in (":-", "-"):
            if sep in body:
                return body.split(sep, 1)[1]
        return "tenant:placeholder"

    return re.sub(r"\$\{([^}]*)\}", one, value)


def compose_containers(path: Path = COMPOSE_FILE) -> list[Container]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    out = []
    for name, svc in doc["services"].items():
        image = str(svc.get("image", ""))
        match = re.match(r"groundwire/(\w+)", image)
        if not match or match.group(1) not in SETTINGS or svc.get("command"):
            continue  # not a serving container (models, migrate one-shots, stores)
        env: dict[str, str] = {}
        raw = svc.get("environment") or {}
        if isinstance(raw, list):
            raw = dict(item.split("=", 1) if "=" in item else (item, None) for item in raw)
        for key, value in raw.items():
            if value is not None:
                env[key] = _interpolate(str(value))
        writable: list[PurePosixPath] = []
        readable: list[PurePosixPath] = []
        for mount in svc.get("volumes") or []:
            if isinstance(mount, str):
                parts = _interpolate(mount).split(":")
                target, ro = parts[1], len(parts) > 2 and "ro" in parts[2].split(",")
            else:
                target, ro = mount["target"], bool(mount.get("read_only"))
            (readable if ro else writable).append(PurePosixPath(target))
        for tmpfs in svc.get("tmpfs") or []:
            writable.append(PurePosixPath(tmpfs.split(":")[0]))
        ports = [
            int(p)
            for p in re.findall(
                r"\b(\d{4,5})\b", " ".join(map(str, svc["healthcheck"]["test"][-1:]))
            )
        ]
        out.append(
            Container(
                f"compose:{name}",
                match.group(1),
                env,
                bool(svc.get("read_only")),
                writable,
                readable,
                ports,
            )
        )
    return out


def render(overlay: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with kustomize) is needed to render the manifests"
    done = subprocess.run(
        [kubectl, "kustomize", str(ROOT / "deploy/k8s/overlays" / overlay)],
        check=True,
        capture_output=True,
        text=True,
    )
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def _workloads(docs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for d in docs:
        if d["kind"] in ("Deployment", "StatefulSet"):
            yield d


def k8s_containers(overlay: str, docs: list[dict[str, Any]]) -> list[Container]:
    maps = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    out = []
    for wl in _workloads(docs):
        pod = wl["spec"]["template"]["spec"]
        claims = {t["metadata"]["name"] for t in wl["spec"].get("volumeClaimTemplates", [])}
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        pod_sc = pod.get("securityContext", {})
        for c in pod["containers"]:
            match = re.match(r"groundwire/(\w+)", c["image"])
            if not match or match.group(1) not in SETTINGS:
                continue
            env: dict[str, str] = {}
            for src in c.get("envFrom", []):
                env.update(maps[src["configMapRef"]["name"]])
            for item in c.get("env", []):
                if "value" in item:
                    env[item["name"]] = str(item["value"])
                elif "configMapKeyRef" in item.get("valueFrom", {}):
                    ref = item["valueFrom"]["configMapKeyRef"]
                    env[item["name"]] = maps[ref["name"]][ref["key"]]
                elif not item["valueFrom"].get("secretKeyRef", {}).get("optional"):
                    env[item["name"]] = "tenant:placeholder"  # a required Secret's value
            writable: list[PurePosixPath] = []
            readable: list[PurePosixPath] = []
            for m in c.get("volumeMounts", []):
                vol = volumes.get(m["name"], {})
                kind_ok = m["name"] in claims or any(
                    k in vol for k in ("emptyDir", "persistentVolumeClaim", "ephemeral")
                )
                target = PurePosixPath(m["mountPath"])
                if kind_ok and not m.get("readOnly"):
                    writable.append(target)
                else:
                    readable.append(target)
            sc = {**pod_sc, **c.get("securityContext", {})}
            named = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            ports = []
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                spec = c.get(probe) or {}
                for kind in ("grpc", "httpGet", "tcpSocket"):
                    if kind in spec:
                        port = spec[kind]["port"]
                        ports.append(named[port] if isinstance(port, str) else int(port))
            out.append(
                Container(
                    f"{overlay}:{wl['kind']}/{wl['metadata']['name']}/{c['name']}",
                    match.group(1),
                    env,
                    bool(sc.get("readOnlyRootFilesystem")),
                    writable,
                    readable,
                    ports,
                )
            )
    return out


# --- the checks ------------------------------------------------------------------------


def _settings(c: Container, monkeypatch: pytest.MonkeyPatch) -> Any:
    import os

    for key in list(os.environ):
        if key.startswith("GROUNDWIRE_"):
            monkeypatch.delenv(key)
    for key, value in {**image_env(), **c.env}.items():
        monkeypatch.setenv(key, value)
    return SETTINGS[c.service]()


def _under(path: PurePosixPath, mounts: list[PurePosixPath]) -> bool:
    return any(path == m or m in path.parents for m in mounts)


def problems(c: Container, s: Any) -> list[str]:
    found = []
    if not c.read_only_root:
        found.append(f"{c.where}: the root filesystem is not read-only")
    for setting, path in writes(c.service, s).items():
        if not _under(path, c.writable):
            found.append(
                f"{c.where}: {setting} writes in {path}, which is on no writable volume "
                f"or tmpfs (writable: {[str(m) for m in c.writable]})"
            )
    for setting, path in reads(c.service, s).items():
        if not _under(path, c.writable + c.readable):
            found.append(f"{c.where}: {setting} reads {path}, which is on no mounted volume")
    port = s.port
    if not c.probe_ports:
        found.append(f"{c.where}: no health check")
    for p in c.probe_ports:
        if p != port:
            found.append(f"{c.where}: a health check asks port {p}, the service listens on {port}")
    return found


def all_containers() -> list[Container]:
    containers = compose_containers()
    for overlay in OVERLAYS:
        containers += k8s_containers(overlay, render(overlay))
    return containers


@pytest.mark.parametrize("service", sorted(SETTINGS))
def test_every_path_like_setting_is_classified(service: str) -> None:
    unknown = _pathlike_fields(SETTINGS[service]) - WRITTEN - READ - NOT_FILES
    assert not unknown, f"classify {service}'s {sorted(unknown)} in writes()/reads() above"


def test_every_service_is_deployed_everywhere() -> None:
    where = {c.where.split(":")[0] for c in all_containers()}
    assert where == {"compose", *OVERLAYS}
    for place in where:
        services = {c.service for c in all_containers() if c.where.startswith(place + ":")}
        assert services == set(SETTINGS), f"{place} lacks {set(SETTINGS) - services}"


def test_every_written_path_is_on_a_writable_volume(monkeypatch: pytest.MonkeyPatch) -> None:
    found: list[str] = []
    for c in all_containers():
        with monkeypatch.context() as m:
            found += problems(c, _settings(c, m))
    assert not found, "\n".join(found)


def test_the_check_catches_an_unmounted_data_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The defect this file exists for: the retriever's /data, a folder of the image."""
    c = Container("example:retriever", "retriever", {}, True, [PurePosixPath("/tmp")], [], [50053])
    found = problems(c, _settings(c, monkeypatch))
    assert any("data_path writes in /data" in p for p in found), found
    assert any("jobs_path writes in /data/.jobs" in p for p in found), found


def test_the_check_catches_a_probe_on_the_wrong_port(monkeypatch: pytest.MonkeyPatch) -> None:
    c = Container("example:gateway", "gateway", {}, True, [TMPDIR], [], [8081])
    found = problems(c, _settings(c, monkeypatch))
    assert found == ["example:gateway: a health check asks port 8081, the service listens on 8080"]


def test_the_image_env_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    assert image_env()["GROUNDWIRE_RETRIEVER_DATA_PATH"] == "/data"
