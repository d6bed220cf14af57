"""A multi-process topology for the load report: more gateways and orchestrators beside
the local cluster's one of each, as separate processes.

The local cluster (``groundwire_cli.cluster.LocalCluster``) starts one process per
service. The extra replicas here run the same command with the same settings as that
service's first replica (``LocalCluster.env_for``), only with their own port and ready
file, so the figures measure the code that ships, spread across processes. Every
gateway reaches every orchestrator through one gRPC target naming all of them
(``ipv4:127.0.0.1:P1,127.0.0.1:P2``) with the channels' round-robin policy, as a
headless Kubernetes Service spreads them; the load generator spreads its users over the
gateways (``GW_LOAD_HOSTS``). The model servers and the retriever (embedded engine) stay
one process each, as the issue's topology has them.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPLICATED = ("orchestrator", "gateway")


@dataclass
class Replica:
    """One extra process of a replicated service (``index`` ≥ 1; 0 is the cluster's)."""

    service: str
    index: int
    port: int
    log_path: Path
    ready_path: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def label(self) -> str:
        return f"{self.service}-{self.index}"


@dataclass
class Topology:
    """How many gateways and orchestrators run; ports are taken when it is built."""

    gateways: int = 1
    orchestrators: int = 1
    ports: dict[str, list[int]] = field(default_factory=dict)
    replicas: list[Replica] = field(default_factory=list)

    @classmethod
    def with_free_ports(cls, gateways: int, orchestrators: int, cluster: Any) -> Topology:
        """Replica 0 of each service keeps the cluster's port; the others get free ones."""
        from groundwire_cli.cluster import free_port

        if gateways < 1 or orchestrators < 1:
            raise ValueError("a topology needs at least one gateway and one orchestrator")
        counts = {"gateway": gateways, "orchestrator": orchestrators}
        ports = {
            name: [cluster.ports[name], *(free_port() for _ in range(counts[name] - 1))]
            for name in REPLICATED
        }
        return cls(gateways, orchestrators, ports)

    @property
    def orchestrator_target(self) -> str:
        """One gRPC target naming every orchestrator (round-robin across them)."""
        addrs = [f"127.0.0.1:{p}" for p in self.ports["orchestrator"]]
        return addrs[0] if len(addrs) == 1 else "ipv4:" + ",".join(addrs)

    @property
    def gateway_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{p}" for p in self.ports["gateway"]]

    def cluster_env(self) -> dict[str, str]:
        """What the cluster's own gateway needs to reach every orchestrator."""
        return {"GROUNDWIRE_GATEWAY_ORCHESTRATOR_ADDR": self.orchestrator_target}

    def describe(self) -> dict[str, Any]:
        return {
            "processes": {
                "gateway": self.gateways,
                "orchestrator": self.orchestrators,
                "embedder": 1,
                "reranker": 1,
                "retriever": 1,
            },
            "retriever_engine": "embedded (qdrant-edge)",
            "orchestrator_target": self.orchestrator_target,
            "load_spread": "each locust user sticks to one gateway, users dealt round-robin",
        }

    def start(self, cluster: Any) -> None:
        """Starts the extra replicas (orchestrators first), without waiting."""
        logs = cluster.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for service in ("orchestrator", "gateway"):
            base = cluster.env_for(service)
            # calls between the services carry the cluster's token (docs/security.md),
            # which the cluster adds when it starts its own children
            if token := getattr(cluster, "service_token", ""):
                base["GROUNDWIRE_SERVICE_TOKEN"] = token
            key = f"GROUNDWIRE_{service.upper()}_"
            for index, port in enumerate(self.ports[service][1:], start=1):
                replica = Replica(
                    service,
                    index,
                    port,
                    logs / f"{service}-{index}.log",
                    cluster.run_dir / f"{service}-{index}.ready",
                )
                replica.ready_path.unlink(missing_ok=True)
                env = {**base, key + "PORT": str(port), key + "READY_FILE": str(replica.ready_path)}
                with replica.log_path.open("ab") as log:
                    replica.process = subprocess.Popen(
                        [sys.executable, "-m", f"groundwire_{service}"],
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                self.replicas.append(replica)

    def wait_ready(self, timeout_s: float) -> None:
        """Raises RuntimeError naming a replica that died or was not SERVING in time."""
        deadline = time.monotonic() + timeout_s
        for replica in self.replicas:
            assert replica.process is not None
            while not replica.ready_path.exists():
                code = replica.process.poll()
                if code is not None:
                    raise RuntimeError(
                        f"{replica.label} exited with code {code}; see {replica.log_path}"
                    )
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{replica.label} not ready after {timeout_s:.0f} s")
                time.sleep(0.1)

    def pids(self) -> dict[str, int]:
        return {r.label: r.process.pid for r in self.replicas if r.process is not None}

    def crashed(self) -> list[tuple[str, int]]:
        return [
            (r.label, code)
            for r in self.replicas
            if r.process is not None and (code := r.process.poll()) is not None
        ]

    def stop(self, grace_s: float = 10.0) -> None:
        """Gateways first, then orchestrators; SIGKILL after ``grace_s``."""
        order = sorted(self.replicas, key=lambda r: REPLICATED.index(r.service), reverse=True)
        for replica in order:
            if replica.process is not None and replica.process.poll() is None:
                replica.process.terminate()
        deadline = time.monotonic() + grace_s
        for replica in order:
            if replica.process is None:
                continue
            try:
                replica.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                replica.process.kill()
                replica.process.wait()
            replica.ready_path.unlink(missing_ok=True)
