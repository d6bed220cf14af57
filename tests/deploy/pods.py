"""The Kubernetes workloads of the rendered dev and prod overlays, run as podman containers
under their own pod specs, each to its readiness probe (no cluster can run here).

For every Deployment, StatefulSet and Job of `kubectl kustomize deploy/k8s/overlays/<o>`
whose images exist here, one replica runs as a podman pod (one network namespace, as in
Kubernetes) on a network where the pod answers to its Service's name:

- the pod spec's own image (groundwire/<svc>:<tag> -> the :dev image built here), command,
  args and env (envFrom ConfigMaps, env values, Secrets filled with test values);
- its securityContext: runAsUser/runAsGroup (--user), readOnlyRootFilesystem (--read-only),
  capabilities drop ALL (--cap-drop), allowPrivilegeEscalation false (no-new-privileges);
- its volumes: an emptyDir is a fresh named volume made 0777 (what the kubelet creates), a
  claim (volumeClaimTemplates, persistentVolumeClaim) a named volume given to the pod's
  fsGroup (what the kubelet does with fsGroup); readOnly mounts are :ro;
- its init containers first, in order, each to a zero exit (the models volume filled by
  the models image's own command);
- readiness: the probe itself (grpc with its service name, httpGet, exec, tcpSocket) run
  in the container with its own Python (`podman exec`), every periodSeconds, until it
  passes or a generous deadline.

`podman kube play` (4.3 here) was not used: it drops runAsGroup and initContainers'
ordering guarantees differ, gives emptyDir no 0777 and has no Service names. Differences
from a cluster that remain: one replica per workload, no resource limits (this VM cannot
enforce them), no NetworkPolicies, no HPA/PDB.
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
# Secrets the manifests' comments tell the operator to create, with test values.
SECRETS = {
    ("groundwire-service-token", "token"): "pods-service-token-0123456789",
    ("groundwire-gateway", "admin-api-keys"): "ops:pods-admin-key-0123456789",
    ("groundwire-postgres", "password"): "pods-postgres-password",
    (
        "groundwire-database",
        "url",
    ): "postgresql://groundwire:pods-postgres-password@postgres:5432/groundwire",
}
# Images no registry can serve here and no Debian package replaces.
UNAVAILABLE = {
    "qdrant/qdrant": "no Qdrant server image or binary package can be had here (no registry);"
    " the server path stays covered by qdrant-client's local mode and the congruence tests",
    "otel/opentelemetry-collector-contrib": "no OpenTelemetry Collector image can be had here",
}
# The official Redis image, replaced by Debian's redis-server built from the base
# (deploy/redis/Dockerfile: an entrypoint that takes the same redis-server arguments).
SUBSTITUTES = {"redis": "groundwire/redis:dev"}
# Workloads run in dependency order (those not listed run last).
ORDER = [
    "qdrant",
    "postgres",
    "groundwire-migrate",
    "redis",
    "embedder",
    "reranker",
    "retriever",
    "orchestrator",
    "gateway",
]

GRPC_PROBE = (
    "import sys, grpc; from grpc_health.v1 import health_pb2 as h, health_pb2_grpc as hg; "
    "c = grpc.insecure_channel('127.0.0.1:' + sys.argv[1]); "
    "r = hg.HealthStub(c).Check(h.HealthCheckRequest(service=sys.argv[2]), timeout=3); "
    "sys.exit(r.status != h.HealthCheckResponse.SERVING)"
)
HTTP_PROBE = (
    "import sys, urllib.request; "
    "urllib.request.urlopen('http://127.0.0.1:' + sys.argv[1] + sys.argv[2], timeout=3)"
)
TCP_PROBE = (
    "import sys, socket; socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3)"
)


def log(message: str) -> None:
    print(f"[pods {time.strftime('%H:%M:%S')}] {message}", flush=True)


def podman(
    *args: str, check: bool = True, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args[:3])}…: {done.stderr.strip()[-800:]}")
    return done


def image_exists(image: str) -> bool:
    return podman("image", "exists", image, check=False).returncode == 0


def local_image(image: str) -> tuple[str | None, str]:
    """The image to run here, or None and the reason none can."""
    name = image.split(":")[0]
    for prefix, reason in UNAVAILABLE.items():
        if name == prefix:
            return None, reason
    if name in SUBSTITUTES:
        return SUBSTITUTES[name], f"{image} -> {SUBSTITUTES[name]}"
    if name.startswith("groundwire/"):
        local = f"{name}:dev"
        return (local, "") if image_exists(local) else (None, f"{local} was not built")
    return (image, "") if image_exists(image) else (None, f"{image} is not here")


def render(overlay: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if not kubectl:
        raise RuntimeError("kubectl is needed to render the overlays")
    out = subprocess.run(
        [kubectl, "kustomize", str(ROOT / "deploy/k8s/overlays" / overlay)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


class Overlay:
    def __init__(self, name: str, docs: list[dict[str, Any]]) -> None:
        self.name = name
        self.docs = docs
        self.prefix = f"gwpods-{name}"
        self.network = self.prefix
        self.maps = {
            d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"
        }
        secrets = {}
        for d in docs:
            if d["kind"] == "Secret":
                for k, v in (d.get("data") or {}).items():
                    secrets[(d["metadata"]["name"], k)] = base64.b64decode(v).decode()
                for k, v in (d.get("stringData") or {}).items():
                    secrets[(d["metadata"]["name"], k)] = v
        self.secrets = {**SECRETS, **secrets}
        # Service name -> the workload whose pods it selects
        self.aliases: dict[str, list[str]] = {}
        for d in docs:
            if d["kind"] == "Service":
                selector = d["spec"].get("selector", {}).get("app.kubernetes.io/name")
                if selector:
                    self.aliases.setdefault(selector, []).append(d["metadata"]["name"])
        self.made: list[tuple[str, str]] = []  # (kind, name) to remove at the end
        # settings naming a workload that cannot run here, left out (said in the report)
        self.dropped_env: dict[str, str] = {}

    def workloads(self) -> list[dict[str, Any]]:
        items = [d for d in self.docs if d["kind"] in ("Deployment", "StatefulSet", "Job")]
        rank = {n: i for i, n in enumerate(ORDER)}
        return sorted(items, key=lambda d: rank.get(d["metadata"]["name"], len(ORDER)))

    def env(self, c: dict[str, Any]) -> dict[str, str]:
        env: dict[str, str] = {}
        for src in c.get("envFrom", []):
            if "configMapRef" in src:
                env.update({k: str(v) for k, v in self.maps[src["configMapRef"]["name"]].items()})
        for item in c.get("env", []):
            if "value" in item:
                env[item["name"]] = str(item["value"])
                continue
            ref = item["valueFrom"]
            if "secretKeyRef" in ref:
                key = (ref["secretKeyRef"]["name"], ref["secretKeyRef"]["key"])
                if key in self.secrets:
                    env[item["name"]] = self.secrets[key]
                elif not ref["secretKeyRef"].get("optional"):
                    raise RuntimeError(f"no value for the required Secret {key}")
            elif "configMapKeyRef" in ref:
                r = ref["configMapKeyRef"]
                env[item["name"]] = str(self.maps[r["name"]][r["key"]])
        return env

    def volume(self, pod: str, vol: str, fs_group: int | None, claim: bool) -> str:
        name = f"{pod}-{vol}"
        podman("volume", "rm", "-f", name, check=False)
        podman("volume", "create", name)
        self.made.append(("volume", name))
        mount = podman("volume", "inspect", "--format", "{{.Mountpoint}}", name).stdout.strip()
        if claim and fs_group is not None:
            subprocess.run(["chown", f"0:{fs_group}", mount], check=True)
            subprocess.run(["chmod", "2775", mount], check=True)
        else:
            subprocess.run(["chmod", "0777", mount], check=True)  # an emptyDir's mode
        return name

    def missing_model(self, c: dict[str, Any], image: str) -> str:
        """The model folder an init container copies that its image does not hold."""
        text = " ".join(c.get("command", []) + c.get("args", []))
        if not image.startswith("groundwire/models") or "/models/" not in text:
            return ""
        have = podman(
            "run", "--rm", "--entrypoint", "ls", image, "/models", check=False
        ).stdout.split()
        wanted = [
            w.split("/models/", 1)[1].strip("/") for w in text.split() if w.startswith("/models/")
        ]
        return next((w for w in wanted if w and w not in have), "")

    def run_args(
        self,
        pod: str,
        c: dict[str, Any],
        pod_sc: dict[str, Any],
        volumes: dict[str, str],
        image: str,
    ) -> list[str]:
        sc = {**pod_sc, **c.get("securityContext", {})}
        args = ["--pod", pod]
        user = sc.get("runAsUser")
        if user is not None:
            args += ["--user", f"{user}:{sc.get('runAsGroup', user)}"]
        if pod_sc.get("fsGroup") is not None:
            args += ["--group-add", str(pod_sc["fsGroup"])]
        if sc.get("readOnlyRootFilesystem"):
            args += ["--read-only", "--read-only-tmpfs=false"]
        for cap in sc.get("capabilities", {}).get("drop", []):
            args += ["--cap-drop", cap]
        if sc.get("allowPrivilegeEscalation") is False:
            args += ["--security-opt", "no-new-privileges"]
        for k, v in self.env(c).items():
            if k in self.dropped_env:
                continue
            args += ["--env", f"{k}={v}"]
        for m in c.get("volumeMounts", []):
            args += [
                "--volume",
                f"{volumes[m['name']]}:{m['mountPath']}" + (":ro" if m.get("readOnly") else ""),
            ]
        if "command" in c:
            args += ["--entrypoint", json.dumps(c["command"])]
        args.append(image)
        args += [str(a) for a in c.get("args", [])]
        return args

    def probe_ok(self, ctr: str, c: dict[str, Any]) -> bool:
        probe = c.get("readinessProbe") or c.get("startupProbe") or c.get("livenessProbe")
        if not probe:
            return (
                podman(
                    "container", "inspect", "--format", "{{.State.Running}}", ctr, check=False
                ).stdout.strip()
                == "true"
            )
        named = {p["name"]: p["containerPort"] for p in c.get("ports", [])}

        def port(p: Any) -> str:
            return str(named[p] if isinstance(p, str) else p)

        if "grpc" in probe:
            cmd = [
                "python",
                "-c",
                GRPC_PROBE,
                port(probe["grpc"]["port"]),
                probe["grpc"].get("service", ""),
            ]
        elif "httpGet" in probe:
            cmd = [
                "python",
                "-c",
                HTTP_PROBE,
                port(probe["httpGet"]["port"]),
                probe["httpGet"]["path"],
            ]
        elif "tcpSocket" in probe:
            cmd = ["python", "-c", TCP_PROBE, port(probe["tcpSocket"]["port"])]
        else:
            cmd = list(probe["exec"]["command"])
        return podman("exec", ctr, *cmd, check=False, timeout=60).returncode == 0

    def run(self, wl: dict[str, Any], timeout: float) -> tuple[str, str]:
        name = wl["metadata"]["name"]
        spec = wl["spec"]["template"]["spec"]
        containers = spec.get("initContainers", []) + spec["containers"]
        images = {}
        for c in containers:
            local, why = local_image(c["image"])
            if local is None:
                return "cannot run here", why
            images[c["name"]] = local
        for c in spec.get("initContainers", []):
            missing = self.missing_model(c, images[c["name"]])
            if missing:
                return "cannot run here", (
                    f"the models image built here lacks /models/{missing} (a Hugging Face "
                    "hub download at image build time; no hub here)"
                )
        pod = f"{self.prefix}-{name}"
        podman("pod", "rm", "-f", pod, check=False)
        aliases = self.aliases.get(
            wl["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/name", name), []
        )
        create = ["pod", "create", "--name", pod, "--network", self.network]
        for alias in aliases:
            create += ["--network-alias", alias]
        podman(*create)
        self.made.append(("pod", pod))
        pod_sc = spec.get("securityContext", {})
        claims = {t["metadata"]["name"] for t in wl["spec"].get("volumeClaimTemplates", [])}
        volumes = {}
        for v in spec.get("volumes", []):
            volumes[v["name"]] = self.volume(
                pod, v["name"], pod_sc.get("fsGroup"), "persistentVolumeClaim" in v
            )
        for claim in claims:
            volumes[claim] = self.volume(pod, claim, pod_sc.get("fsGroup"), True)
        for c in spec.get("initContainers", []):
            ctr = f"{pod}-{c['name']}"
            done = podman(
                "run",
                "--name",
                ctr,
                *self.run_args(pod, c, pod_sc, volumes, images[c["name"]]),
                check=False,
                timeout=600,
            )
            if done.returncode != 0:
                return (
                    "failed",
                    f"init container {c['name']} exited {done.returncode}: "
                    f"{done.stderr.strip()[-300:]}",
                )
        started = time.monotonic()
        for c in spec["containers"]:
            ctr = f"{pod}-{c['name']}"
            if wl["kind"] == "Job":
                done = podman(
                    "run",
                    "--name",
                    ctr,
                    *self.run_args(pod, c, pod_sc, volumes, images[c["name"]]),
                    check=False,
                    timeout=600,
                )
                if done.returncode != 0:
                    return (
                        "failed",
                        f"{c['name']} exited {done.returncode}: "
                        f"{(done.stdout + done.stderr).strip()[-300:]}",
                    )
                return "completed", (done.stdout.strip().splitlines() or [""])[-1]
            podman(
                "run",
                "-d",
                "--name",
                ctr,
                *self.run_args(pod, c, pod_sc, volumes, images[c["name"]]),
            )
        deadline = started + timeout
        pending = list(spec["containers"])
        while pending and time.monotonic() < deadline:
            pending = [c for c in pending if not self.probe_ok(f"{pod}-{c['name']}", c)]
            for c in pending:
                state = podman(
                    "container",
                    "inspect",
                    "--format",
                    "{{.State.Status}} {{.State.ExitCode}}",
                    f"{pod}-{c['name']}",
                    check=False,
                ).stdout.strip()
                if state.startswith("exited"):
                    logs = podman("logs", "--tail", "5", f"{pod}-{c['name']}", check=False)
                    return (
                        "failed",
                        f"{c['name']} {state}: {(logs.stdout + logs.stderr).strip()[-400:]}",
                    )
            if pending:
                time.sleep(2)
        if pending:
            logs = podman("logs", "--tail", "5", f"{pod}-{pending[0]['name']}", check=False)
            return (
                "not ready",
                f"{[c['name'] for c in pending]} after {timeout:.0f}s: "
                f"{(logs.stdout + logs.stderr).strip()[-400:]}",
            )
        took = time.monotonic() - started
        shown = podman(
            "container",
            "inspect",
            "--format",
            "user {{.Config.User}}, read-only root {{.HostConfig.ReadonlyRootfs}}, "
            "cap-drop {{.HostConfig.CapDrop}}",
            f"{pod}-{spec['containers'][0]['name']}",
            check=False,
        ).stdout.strip()
        return "ready", f"in {took:.0f}s ({shown})"

    def cleanup(self) -> None:
        for kind, name in reversed(self.made):
            if kind == "pod":
                podman("pod", "rm", "-f", "-t", "2", name, check=False)
        for kind, name in reversed(self.made):
            if kind == "volume":
                podman("volume", "rm", "-f", name, check=False)
        podman("network", "rm", "-f", self.network, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--overlays", nargs="+", default=["dev", "prod"])
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    failures = 0
    for name in args.overlays:
        overlay = Overlay(name, render(name))
        podman("network", "rm", "-f", overlay.network, check=False)
        podman("network", "create", overlay.network)
        try:
            for wl in overlay.workloads():
                status, detail = overlay.run(wl, args.timeout)
                if wl["metadata"]["name"] == "qdrant" and status == "cannot run here":
                    # the retriever then runs its embedded engine on its /data volume
                    overlay.dropped_env["GROUNDWIRE_RETRIEVER_QDRANT_URL"] = "qdrant"
                if wl["metadata"]["name"] == "retriever" and overlay.dropped_env:
                    detail += " (QDRANT_URL left out: the embedded engine on its /data emptyDir)"
                label = f"{name}: {wl['kind']}/{wl['metadata']['name']}"
                log(f"{label}: {status} {detail}")
                if status in ("failed", "not ready"):
                    failures += 1
        finally:
            if not args.keep:
                overlay.cleanup()
    print(
        f"pods: {'PASSED' if not failures else 'FAILED'} ({failures} workload(s) failed)",
        flush=True,
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
