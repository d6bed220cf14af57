"""The local cluster: all five services as child processes on loopback ports.

Used by `groundwire up`, `groundwire demo` and the end-to-end tests. Each child gets
its settings as environment variables (the same names as in docker-compose and
Kubernetes), writes a ready file once it is SERVING, and logs to its own file.

A child's settings are the user's (``child_settings``: the environment over the
settings file) with what the cluster must assign on top: host, port, peer addresses,
the ready file, the embedder's model folder and the retriever's data folder.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from groundwire_cli.child_settings import child_environment, user_environment
from groundwire_cli.config import SERVICES, FileSettings, prefix, user_settings

__all__ = ["SERVICES", "ClusterError", "LocalCluster", "free_port"]
DEFAULT_PORTS = {
    "embedder": 50051,
    "reranker": 50052,
    "retriever": 50053,
    "orchestrator": 50054,
    "gateway": 8080,
}


class ClusterError(RuntimeError):
    """A child failed to start or died; the message names it and quotes its log."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _taken(port: int) -> bool:
    """Whether something listens on ``port`` (a closed socket's TIME_WAIT does not count,
    as the services bind with SO_REUSEADDR too)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


@dataclass
class Child:
    name: str
    port: int
    log_path: Path
    ready_path: Path
    process: subprocess.Popen[bytes] | None = None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text[-lines:])


@dataclass
class LocalCluster:
    run_dir: Path
    """Holds logs/ and ready files."""
    model_dir: Path
    data_path: Path
    ports: dict[str, int] = field(default_factory=dict)
    extra_env: Mapping[str, str] = field(default_factory=dict)
    """Settings over everything else (full names); each child gets only its own."""
    children: dict[str, Child] = field(default_factory=dict)
    file: FileSettings = field(default_factory=FileSettings)
    """The settings file's values, under the environment's."""

    @classmethod
    def with_free_ports(
        cls,
        run_dir: Path,
        model_dir: Path,
        data_path: Path,
        extra_env: Mapping[str, str] | None = None,
        file: FileSettings | None = None,
    ) -> LocalCluster:
        return cls(
            run_dir,
            model_dir,
            data_path,
            {s: free_port() for s in SERVICES},
            dict(extra_env or {}),
            file=file or FileSettings(),
        )

    def __post_init__(self) -> None:
        for name in SERVICES:
            self.ports.setdefault(name, DEFAULT_PORTS[name])

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['gateway']}"

    def addr(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"

    def assigned(self, name: str) -> dict[str, str]:
        """What the cluster sets for one child (names without the prefix), over the
        user's settings: where it listens, where its peers are, and its folders."""
        settings = {
            "PORT": str(self.ports[name]),
            "READY_FILE": str(self.run_dir / f"{name}.ready"),
            "HOST": "127.0.0.1",
        }
        if name == "embedder":
            settings["MODEL_DIR"] = str(self.model_dir)
        if name == "retriever":
            settings["DATA_PATH"] = str(self.data_path)
            settings["EMBEDDER_ADDR"] = self.addr("embedder")
        if name == "orchestrator":
            settings["EMBEDDER_ADDR"] = self.addr("embedder")
            settings["RETRIEVER_ADDR"] = self.addr("retriever")
            settings["RERANKER_ADDR"] = self.addr("reranker")
        if name == "gateway":
            settings["ORCHESTRATOR_ADDR"] = self.addr("orchestrator")
            settings["RETRIEVER_ADDR"] = self.addr("retriever")
        return settings

    def user_settings(self, name: str) -> dict[str, str]:
        """The user's settings of one child: the environment's over the file's."""
        return user_settings(name, user_environment(), self.file)

    def overridden(self) -> list[str]:
        """``service NAME`` for each user setting the cluster replaces with its own
        value (`groundwire up` says so rather than ignore it silently)."""
        return [
            f"{name} {prefix(name)}{key}={value} (uses {self.assigned(name)[key]})"
            for name in SERVICES
            for key, value in sorted(self.user_settings(name).items())
            if key in self.assigned(name) and self.assigned(name)[key] != value
        ]

    def env_for(self, name: str) -> dict[str, str]:
        """The environment one child runs with: its own settings and no other
        service's (see ``child_settings``)."""
        return child_environment(
            name,
            user_environment(),
            self.user_settings(name),
            self.assigned(name),
            self.extra_env,
        )

    def start(self, names: tuple[str, ...] = SERVICES) -> None:
        """Starts the children (without waiting for them). Raises ClusterError, before
        starting any, when one's port is taken."""
        busy = [f"{name} {self.ports[name]}" for name in names if _taken(self.ports[name])]
        if busy:
            raise ClusterError(
                f"ports in use: {', '.join(busy)}. Is Groundwire already running? Stop it, "
                "or start this one on free ports (groundwire up --free-ports)"
            )
        logs = self.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for name in names:
            child = self.children.get(name) or Child(
                name, self.ports[name], logs / f"{name}.log", self.run_dir / f"{name}.ready"
            )
            self.children[name] = child
            child.ready_path.unlink(missing_ok=True)
            with child.log_path.open("ab") as log:
                child.process = subprocess.Popen(
                    [sys.executable, "-m", f"groundwire_{name}"],
                    env=self.env_for(name),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # Ctrl-C reaches us; we stop children in order
                )

    def wait_ready(self, timeout_s: float = 180.0, names: tuple[str, ...] | None = None) -> None:
        """Waits until every child is SERVING; raises ClusterError naming one that died."""
        pending = set(names or self.children)
        deadline = time.monotonic() + timeout_s
        while pending:
            for name in sorted(pending):
                child = self.children[name]
                if child.ready_path.exists():
                    pending.discard(name)
                    continue
                assert child.process is not None
                code = child.process.poll()
                if code is not None:
                    raise ClusterError(
                        f"{name} exited with code {code} before it was ready; "
                        f"its log ({child.log_path}) ends with:\n{child.log_tail()}"
                    )
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"not ready after {timeout_s:.0f}s: {', '.join(sorted(pending))}"
                )
            time.sleep(0.1)

    def crashed(self) -> list[tuple[str, int]]:
        """Children that have exited, with their exit codes."""
        return [
            (name, code)
            for name, child in self.children.items()
            if child.process is not None and (code := child.process.poll()) is not None
        ]

    def stop(
        self, names: tuple[str, ...] | None = None, grace_s: float = 10.0, sig: int = signal.SIGTERM
    ) -> None:
        """Stops children (gateway first), escalating to SIGKILL after ``grace_s``."""
        order = [n for n in reversed(SERVICES) if n in (names or tuple(self.children))]
        for name in order:
            proc = self.children[name].process
            if proc is not None and proc.poll() is None:
                proc.send_signal(sig)
        deadline = time.monotonic() + grace_s
        for name in order:
            proc = self.children[name].process
            if proc is None:
                continue
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            self.children[name].ready_path.unlink(missing_ok=True)

    def kill(self, name: str) -> None:
        """SIGKILLs one child (fault tests)."""
        self.stop((name,), grace_s=0.1, sig=signal.SIGKILL)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
