"""`groundwire up` and `groundwire down`: the local cluster in the foreground, or in
the background until `down`.

A running `up` writes ``RUN_DIR/up.json`` (its pid, the gateway URL, every service's
port) once all five services are SERVING, and removes it when it stops. `up --detach`
starts the same command in the background, waits for that file and returns; `down`
reads it and stops that process (which stops its children); `ingest` and `chat` read
it to find a cluster started on free ports.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from groundwire_cli import config
from groundwire_cli.child_settings import user_environment
from groundwire_cli.cluster import ClusterError, LocalCluster
from groundwire_core.errors import Unavailable

STATE_NAME = "up.json"
DETACH_TIMEOUT_S = 300.0
DOWN_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RunningCluster:
    """What ``up.json`` says about a running `groundwire up`."""

    pid: int
    gateway_url: str
    ports: dict[str, int]

    def addr(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running(run_dir: Path) -> RunningCluster | None:
    """The cluster `groundwire up` runs with ``run_dir``, or None (no state file, or its
    process is gone: a stale file is removed)."""
    path = run_dir / STATE_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        state = RunningCluster(int(data["pid"]), str(data["gateway_url"]), dict(data["ports"]))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None
    if not _alive(state.pid):
        path.unlink(missing_ok=True)
        return None
    return state


DEFAULT_RETRIEVER = "127.0.0.1:50053"
"""Where a retriever listens when no `groundwire up` state says otherwise."""
DEFAULT_GATEWAY = "http://127.0.0.1:8080"
"""Where the gateway listens when no `groundwire up` state says otherwise."""


def running_addr(service: str, default: str) -> str:
    """The address of ``service`` in the cluster `groundwire up` runs (up.json in
    GROUNDWIRE_HOME's run/), else ``default``."""
    state = running(config.groundwire_home(user_environment()) / "run")
    if state is None:
        return default
    return state.gateway_url if service == "gateway" else state.addr(service)


def no_retriever_at(error: Unavailable, addr: str) -> Unavailable:
    """``error`` from a retriever call, saying where none answered and what to do."""
    return Unavailable(
        f"{error.message} ({addr}); if nothing runs there, start the services with "
        "`groundwire up` or point --retriever at a running retriever",
        dependency="retriever",
    )


@contextmanager
def retriever_at(addr: str) -> Iterator[None]:
    """Calls to the retriever at ``addr``: its Unavailable is raised again as
    ``no_retriever_at`` words it; any other error passes unchanged."""
    try:
        yield
    except Unavailable as error:
        if error.dependency != "retriever":
            raise
        raise no_retriever_at(error, addr) from None


def _write_state(run_dir: Path, cluster: LocalCluster) -> Path:
    path = run_dir / STATE_NAME
    tmp = path.with_suffix(".tmp")
    tmp.write_text(
        json.dumps(
            {"pid": os.getpid(), "gateway_url": cluster.gateway_url, "ports": cluster.ports}
        ),
        encoding="utf-8",
    )
    tmp.replace(path)  # readers never see half a file
    return path


def serve(cluster: LocalCluster, run_dir: Path) -> int:
    """Runs ``cluster`` until SIGINT/SIGTERM; the exit code (1 when a child crashed or
    never got ready)."""
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    for note in cluster.overridden():
        print(f"note: groundwire up assigns {note}", flush=True)
    print(f"starting {len(cluster.ports)} services; logs in {run_dir / 'logs'}", flush=True)
    cluster.start()
    try:
        cluster.wait_ready()
    except ClusterError as error:
        print(f"error: {error}", file=sys.stderr)
        cluster.stop()
        return 1
    for name, port in cluster.ports.items():
        print(f"  {name:<13} 127.0.0.1:{port}  SERVING")
    state = _write_state(run_dir, cluster)
    print(f"Groundwire is up: {cluster.gateway_url}  (Ctrl-C stops it)", flush=True)
    reported: set[str] = set()
    try:
        while not stop:
            for name, code in cluster.crashed():
                if name not in reported:
                    reported.add(name)
                    print(
                        f"error: {name} exited with code {code}; its log ends with:\n"
                        f"{cluster.children[name].log_tail()}",
                        file=sys.stderr,
                        flush=True,
                    )
            time.sleep(0.2)
    finally:
        print("stopping…", flush=True)
        state.unlink(missing_ok=True)
        cluster.stop()
    return 1 if reported else 0


def detach(argv: list[str], run_dir: Path, timeout_s: float = DETACH_TIMEOUT_S) -> int:
    """Starts ``groundwire ARGV`` (an `up` without ``--detach``) in the background,
    logging to ``RUN_DIR/logs/up.log``; returns once it is SERVING (0) or has failed
    (1, with the end of its log)."""
    existing = running(run_dir)
    if existing is not None:
        print(
            f"error: Groundwire is already running ({existing.gateway_url}, pid "
            f"{existing.pid}); stop it with `groundwire down`",
            file=sys.stderr,
        )
        return 1
    logs = run_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / "up.log"
    start = log_path.stat().st_size if log_path.exists() else 0
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "groundwire_cli", *argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives this shell's Ctrl-C and hang-up
        )
    print(f"starting Groundwire in the background (pid {process.pid}; log {log_path})…", flush=True)
    deadline = time.monotonic() + timeout_s
    while (state := running(run_dir)) is None or state.pid != process.pid:
        code = process.poll()
        if code is not None or time.monotonic() > deadline:
            if code is None:
                process.terminate()
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
            print(f"error: groundwire up did not start; {log_path} ends with:\n{tail}",
                  file=sys.stderr)  # fmt: skip
            return 1
        time.sleep(0.2)
    for note in notes_since(log_path, start):  # a setting of the user's it replaced
        print(note)
    for name, port in state.ports.items():
        print(f"  {name:<13} 127.0.0.1:{port}  SERVING")
    print(f"Groundwire is up: {state.gateway_url}  (`groundwire down` stops it)", flush=True)
    return 0


def notes_since(log_path: Path, offset: int) -> list[str]:
    """The ``note:`` lines `up` wrote to its log past ``offset``: in the background its
    output goes to the log, and a setting of the user's it replaced (a port in
    groundwire.toml, say) must still be said where the user looks."""
    with log_path.open("rb") as log:
        log.seek(offset)
        text = log.read().decode(errors="replace")
    return [line for line in text.splitlines() if line.startswith("note: ")]


def down(run_dir: Path, timeout_s: float = DOWN_TIMEOUT_S) -> int:
    """Stops the `groundwire up` that runs with ``run_dir``: SIGTERM, then waits until
    it has stopped its services. Exit code 1 when none runs or it does not stop."""
    state = running(run_dir)
    if state is None:
        print(f"Groundwire is not running (no {run_dir / STATE_NAME})", file=sys.stderr)
        return 1
    os.kill(state.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _alive(state.pid):
        if time.monotonic() > deadline:
            print(f"error: pid {state.pid} still runs after {timeout_s:.0f}s", file=sys.stderr)
            return 1
        time.sleep(0.2)
    print(f"stopped Groundwire ({state.gateway_url}, pid {state.pid})")
    return 0


def add_up_arguments(parser: argparse.ArgumentParser) -> None:
    """`up`'s own options (the cluster's folders and --config are added by the caller)."""
    parser.add_argument(
        "--free-ports", action="store_true", help="pick free ports instead of 50051-50054 and 8080"
    )
    parser.add_argument(
        "-d",
        "--detach",
        action="store_true",
        help="run in the background: return once every service is SERVING "
        "(`groundwire down` stops it)",
    )
