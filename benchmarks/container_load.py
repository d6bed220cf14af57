"""Load against the containers, next to the same load on processes (issue #30).

One run on one machine, one part after the other:

1. **containers**: the images the README builds (``tests/deploy/run.sh`` with
   ``GROUNDWIRE_DEPLOY_STEPS=images``: cached layers, so a second run builds nothing),
   then ``docker-compose.yml`` through podman-compose with ``--orchestrators N`` and
   ``--embedders M`` containers: the extra ones are explicit services (``orchestrator-2``
   …, the compose file's own definition with the service's name as a network alias: the
   gRPC channels resolve every replica and round-robin across them), under the compose
   file's own read-only roots, users, volumes and health checks. An override file
   (``<work>/load.override.yml``, written here) adds them and sets only what the load
   needs, the same settings ``load_report.py`` gives its processes: the gateway's abuse
   and cost limits off (one client address would be refused after 60 searches a minute)
   and the orchestrator's LLM pointed at the fake LLM, which runs on this machine as its own
   process (reached as ``host.docker.internal``). ``samples/corpus`` is ingested
   through the gateway's admin API as a job; then locust (its own process,
   ``benchmarks/locustfile.py``) runs each ``--users`` step against the gateway
   container, and each container's CPU seconds are read from its main process;
2. **processes**: ``benchmarks/load_report.py`` with the same steps, mix, fake LLM and
   orchestrator count on ``groundwire up``'s local cluster (one embedder: the local
   cluster runs one of each model server), no reranker model in either (compose's
   reranker has none: rerank keeps the fused order).

Writes ``benchmarks/results/<name>.json`` (both parts: per step requests/s, end-to-end
and per-stage p50/p95, failures, CPU per container or process; the machine) and prints
one table with the two side by side.

    python benchmarks/container_load.py                          # 1, 8, 32 users, 30 s each
    python benchmarks/container_load.py --users 8 --duration-s 10 --skip-processes

Needs podman and podman-compose (``../shared/tools/containers-here.sh`` here, then
``make setup``). Exit status 0 when every step of both parts ran with no failed request,
1 otherwise (the report is written either way), 2 when a part could not be set up.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from load_report import parse_users
from loadrun.capacity import sample, step_cpu
from loadrun.fake_llm import start_fake_llm
from loadrun.inputs import CORPUS, ROOT
from loadrun.locust_step import run_locust
from loadrun.machine import locust_version, machine
from loadrun.report import STAGE_ORDER
from loadrun.runs import FAST_MODEL, GATEWAY_LOAD_ENV, STRONG_MODEL
from loadrun.warm_up import warm_up

RESULTS = ROOT / "benchmarks" / "results"
COMPOSE = ROOT / "docker-compose.yml"
PROJECT = "gwload"
COLLECTION = "docs"  # the gateway's default collection: warm-up and locust name none
ADMIN = "container-load-admin-key-0123456789"
TOKEN = "container-load-service-token-0123456789"


class SetupFailed(Exception):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def host_address() -> str:
    """An address of this machine that containers route to (their bridge's gateway
    forwards it to the host): the one the default route leaves from."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent
        return str(s.getsockname()[0])


# --- the containers ----------------------------------------------------------------------


class Compose:
    def __init__(self, work: Path, llm_url: str, host_ip: str, args: argparse.Namespace):
        self.work = work
        self.http_port = free_port()
        self.url = f"http://127.0.0.1:{self.http_port}"
        self.env_file = work / "compose.env"
        self.override = work / "load.override.yml"
        sources = work / "sources"
        sources.mkdir(parents=True, exist_ok=True)
        sources.chmod(0o755)
        self.env_file.write_text(
            "\n".join(
                [
                    # the admin's tenant is the anonymous callers' (public): locust and
                    # the warm-up search the collection it ingests without a key
                    f"GROUNDWIRE_GATEWAY_ADMIN_API_KEYS=public:{ADMIN}",
                    f"GROUNDWIRE_SERVICE_TOKEN={TOKEN}",
                    "GROUNDWIRE_POSTGRES_PASSWORD=container-load-postgres-password",
                    f"GROUNDWIRE_SOURCES={sources}",
                    f"GROUNDWIRE_GATEWAY_HOST_PORT={self.http_port}",
                    f"GROUNDWIRE_RETRIEVER_HOST_PORT={free_port()}",
                    f"GROUNDWIRE_HOST_GATEWAY={host_ip}",
                    "",
                ]
            ),
            encoding="utf-8",
        )
        # the API key is one of the compose file's pass-through variables (``KEY:``, no
        # value): podman-compose cannot merge a value over it, so it comes from
        # podman-compose's own environment, as a user's shell would give it (run())
        llm_env = {
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_BASE_URL": llm_url,
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_FAST_MODEL": FAST_MODEL,
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_STRONG_MODEL": STRONG_MODEL,
            "GROUNDWIRE_ORCHESTRATOR_LLM_ORDER": "anthropic",
        }
        services: dict[str, Any] = {
            "orchestrator": {"environment": llm_env},
            "gateway": {"environment": dict(GATEWAY_LOAD_ENV)},
        }
        replicas = {"orchestrator": args.orchestrators, "embedder": args.embedders}
        extra = replica_services(replicas, {"orchestrator": llm_env})
        services.update(extra)
        # the gateway resolves the orchestrators when it starts: every replica first
        services["gateway"]["depends_on"] = {
            n: {"condition": "service_healthy"} for n in extra if n.startswith("orchestrator-")
        }
        # JSON is YAML: the override compose merges into docker-compose.yml's services
        self.override.write_text(
            json.dumps({"services": services}, indent=2) + "\n", encoding="utf-8"
        )
        compose = shutil.which("podman-compose") or str(
            Path(sys.executable).parent / "podman-compose"
        )
        self.command = [
            compose,
            "-p",
            PROJECT,
            "--env-file",
            str(self.env_file),
            "-f",
            str(COMPOSE),
            "-f",
            str(self.override),
        ]
        self.scale = replicas

    def run(self, *args: str, check: bool = True, timeout: float = 900) -> str:
        done = subprocess.run(
            [*self.command, *args],
            cwd=ROOT,
            env={**os.environ, "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_API_KEY": "fake"},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise SetupFailed(
                f"podman-compose {' '.join(args)}: rc={done.returncode}\n"
                f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            )
        return done.stdout

    def up(self) -> None:
        self.run("up", "-d")

    def down(self) -> None:
        self.run("down", "-v", check=False)
        # podman-compose's down removes the containers of the services it knows: one
        # an earlier run created otherwise (a ``--scale``d replica) outlived it once
        label = f"label=io.podman.compose.project={PROJECT}"
        subprocess.run(
            ["podman", "rm", "-f", "--depend", "--filter", label],
            capture_output=True, timeout=120, check=False,
        )  # fmt: skip

    def containers(self) -> dict[str, int]:
        """Running containers of the project: name -> the host pid of its main process."""
        command = ["podman", "ps", "--filter", f"label=io.podman.compose.project={PROJECT}"]
        out = subprocess.run(
            [*command, "--format", "{{.Names}} {{.Pid}}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stdout
        pids = {}
        for line in out.splitlines():
            name, _, pid = line.partition(" ")
            if pid.strip().isdigit() and int(pid) > 0:
                pids[name.removeprefix(f"{PROJECT}_")] = int(pid)
        return pids

    def wait_serving(self, timeout_s: float) -> float:
        import httpx

        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            try:
                r = httpx.get(f"{self.url}/v1/health", timeout=5)
                if r.status_code == 200:
                    return time.monotonic() - started
            except httpx.HTTPError:
                pass
            time.sleep(2)
        raise SetupFailed(f"{self.url}/v1/health not 200 after {timeout_s:.0f} s")


def replica_services(
    replicas: dict[str, int], environment: dict[str, dict[str, str]]
) -> dict[str, Any]:
    """Explicit services ``<name>-2`` … for each service's extra replicas.

    Each is the compose file's own definition (its image, read-only root, user, volumes,
    health check, dependencies), with the service's name as a network alias so that the
    ``dns:///<name>:port`` channels resolve every replica and round-robin across them.
    Explicit services rather than ``--scale``: podman-compose 1.6 scaled the embedder
    but started one orchestrator (and a scaled container once outlived ``down``).
    """
    import yaml

    defined = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]
    extra: dict[str, Any] = {}
    for name, count in replicas.items():
        for i in range(2, count + 1):
            service = {k: v for k, v in defined[name].items() if k not in ("build", "ports")}
            # a new service: nothing to merge over, so the load's settings replace the
            # compose file's pass-through variables (``KEY:``) here
            service["environment"] = {
                **service.get("environment", {}), **environment.get(name, {})
            }  # fmt: skip
            service["networks"] = {"default": {"aliases": [name]}}
            extra[f"{name}-{i}"] = service
    return extra


def ingest_corpus(url: str, max_documents: int | None) -> dict[str, Any]:
    """samples/corpus through the admin API as one job; its counts and time."""
    import httpx

    files = sorted(CORPUS.rglob("*.md"))[:max_documents]
    docs = [
        {"source_id": str(p.relative_to(CORPUS)), "content": p.read_text(encoding="utf-8")}
        for p in files
    ]
    headers = {"authorization": f"Bearer {ADMIN}"}
    started = time.perf_counter()
    with httpx.Client(base_url=url, timeout=120) as http:
        r = http.post(
            f"/v1/admin/collections/{COLLECTION}/documents",
            json={"documents": docs, "create_collection": True},
            headers=headers,
        )
        if r.status_code != 202:
            raise SetupFailed(f"ingest: {r.status_code} {r.text[:300]}")
        job_id = r.json()["job"]["id"]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            job = http.get(f"/v1/admin/jobs/{job_id}", headers=headers).json()
            if job.get("state") not in ("queued", "running"):
                break
            time.sleep(0.5)
    if job.get("state") != "succeeded":
        raise SetupFailed(f"ingest job: {job}")
    return {
        "documents": len(docs),
        "chunks": job["counts"].get("chunks_written"),
        "ingest_s": round(time.perf_counter() - started, 1),
    }


def run_containers(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import httpx

    built = subprocess.run(
        ["bash", "tests/deploy/run.sh"],
        cwd=ROOT,
        env={**os.environ, "GROUNDWIRE_DEPLOY_STEPS": "images"},
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        raise SetupFailed(f"building the images failed:\n{built.stdout[-2000:]}{built.stderr}")
    host_ip = host_address()
    fake = start_fake_llm(
        work, args.ttft_s, args.token_delay_s, args.answer_words, False, host="0.0.0.0"
    )
    stack = Compose(work, f"http://host.docker.internal:{fake.port}", host_ip, args)
    steps: list[dict[str, Any]] = []
    try:
        stack.down()  # what an interrupted run left
        t0 = time.monotonic()
        stack.up()
        stack.wait_serving(600)
        up_s = time.monotonic() - t0
        pids = stack.containers()
        print(f"containers up in {up_s:.0f} s: {', '.join(sorted(pids))}", flush=True)
        corpus = ingest_corpus(stack.url, args.max_documents)
        print(f"ingested {corpus['documents']} documents in {corpus['ingest_s']} s", flush=True)
        warm = warm_up(httpx, stack.url)
        print(f"warm-up: search {warm['search_ms']:.0f} ms, chat {warm['chat_ms']:.0f} ms "
              f"({warm['chat_mode']})", flush=True)  # fmt: skip
        for i, users in enumerate(args.users):
            if i:
                time.sleep(args.cooldown_s)
            before = sample(pids)
            step = run_locust(
                stack.url, users, args.duration_s, work, locust_env(args),
                args.stop_timeout_s, name=f"containers-u{users}",
            )  # fmt: skip
            step["cpu"] = step_cpu(before, sample(pids), step["requests"])
            step["stopped_containers"] = sorted(set(pids) - set(stack.containers()))
            steps.append(step)
            print_step("containers", step)
        return {
            "topology": {"containers": sorted(pids), **stack.scale},
            "up_s": round(up_s, 1),
            "corpus": corpus,
            "warm_up": warm,
            "steps": steps,
        }
    finally:
        stack.down()
        fake.stop()


def locust_env(args: argparse.Namespace) -> dict[str, str]:
    return {
        "GW_LOAD_SEARCH_WEIGHT": str(args.search_weight),
        "GW_LOAD_CHAT_WEIGHT": str(args.chat_weight),
        "GW_LOAD_WAIT_S": "0",
        "GW_LOAD_COLLECTION": COLLECTION,
    }


def print_step(part: str, step: dict[str, Any]) -> None:
    print(
        f"  {part}, {step['users']} users: {step['requests']} requests, "
        f"{step['requests_per_s']:.1f}/s, {step['failures']} failed, {step['http_5xx']} 5xx",
        flush=True,
    )


# --- the processes -----------------------------------------------------------------------


def run_processes(args: argparse.Namespace, work: Path, name: str) -> dict[str, Any]:
    """load_report.py's sweep on the local cluster, same steps and fake LLM."""
    command = [
        sys.executable, str(ROOT / "benchmarks" / "load_report.py"),
        "--users", ",".join(str(u) for u in args.users),
        "--duration-s", f"{args.duration_s:g}",
        "--search-weight", str(args.search_weight),
        "--chat-weight", str(args.chat_weight),
        "--ttft-s", f"{args.ttft_s:g}",
        "--token-delay-s", f"{args.token_delay_s:g}",
        "--answer-words", str(args.answer_words),
        "--orchestrators", str(args.orchestrators),
        "--reranker", "none",
        "--cooldown-s", f"{args.cooldown_s:g}",
        "--stop-timeout-s", f"{args.stop_timeout_s:g}",
        "--out", str(work), "--name", f"{name}-processes", "--no-chart",
        *(["--max-documents", str(args.max_documents)] if args.max_documents else []),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, text=True, check=False)
    path = work / f"{name}-processes.json"
    if not path.exists():
        raise SetupFailed(f"load_report.py wrote no report (exit {done.returncode})")
    report = json.loads(path.read_text(encoding="utf-8"))
    for step in report["steps"]:
        print_step("processes", step)
    return {
        "topology": report["topology"],
        "corpus": report["config"]["corpus"],
        "warm_up": report["config"]["warm_up"],
        "steps": report["steps"],
        "exit_code": done.returncode,
    }


# --- the report --------------------------------------------------------------------------


def _p(step: dict[str, Any], key: str, name: str) -> str:
    row = step.get(key, {}).get(name)
    return f"{row['p50_ms']:.0f}/{row['p95_ms']:.0f}" if row else "-"


def format_comparison(report: dict[str, Any]) -> str:
    parts = [p for p in ("containers", "processes") if report.get(p)]
    by_users = {p: {s["users"]: s for s in report[p]["steps"]} for p in parts}
    stages = [
        n for n in STAGE_ORDER if any(n in s["stages"] for p in parts for s in report[p]["steps"])
    ]
    rows = [["users", "part", "req/s", "failed", "search p50/p95", "chat p50/p95", *stages]]
    for users in report["config"]["users"]:
        for p in parts:
            s = by_users[p].get(users)
            if s is None:
                continue
            rows.append(
                [
                    str(users), p, f"{s['requests_per_s']:.1f}", str(s["failures"]),
                    _p(s, "end_to_end", "search"), _p(s, "end_to_end", "chat"),
                    *[_p(s, "stages", n) for n in stages],
                ]
            )  # fmt: skip
        if len(parts) == 2 and all(users in by_users[p] for p in parts):
            c, q = (by_users[p][users]["requests_per_s"] for p in parts)
            rows.append(["", "ratio", f"{c / q:.2f}" if q else "-", *[""] * (len(rows[0]) - 3)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "ms as p50/p95; ratio = containers / processes requests/s\n" + "\n".join(lines)


def clean(part: dict[str, Any] | None, users: list[int]) -> bool:
    if not part or len(part["steps"]) != len(users) or part.get("exit_code", 0) not in (0,):
        return False
    return all(
        s["failures"] == 0 and s["http_5xx"] == 0 and not s.get("stopped_containers")
        for s in part["steps"]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=parse_users, default=[1, 8, 32])
    parser.add_argument("--duration-s", type=float, default=30.0, help="seconds per step")
    parser.add_argument("--orchestrators", type=int, default=2)
    parser.add_argument("--embedders", type=int, default=2, help="containers only")
    parser.add_argument("--search-weight", type=int, default=3)
    parser.add_argument("--chat-weight", type=int, default=1)
    parser.add_argument("--ttft-s", type=float, default=0.3, help="fake LLM time to first token")
    parser.add_argument("--token-delay-s", type=float, default=0.02)
    parser.add_argument("--answer-words", type=int, default=80)
    parser.add_argument("--max-documents", type=int, default=None)
    parser.add_argument("--cooldown-s", type=float, default=5.0)
    parser.add_argument("--stop-timeout-s", type=float, default=30.0)
    parser.add_argument("--skip-processes", action="store_true")
    parser.add_argument("--work", type=Path, default=ROOT / "var" / "container-load")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--name", default=None, help="file stem (containers-vs-processes-<date>)")
    parser.add_argument("--note", default="", help="recorded in the report")
    args = parser.parse_args(argv)

    created = dt.datetime.now(dt.UTC)
    name = args.name or f"containers-vs-processes-{created:%Y-%m-%d}"
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "name": name,
        "created": created.isoformat(timespec="seconds"),
        "machine": {
            **machine(),
            "locust": locust_version(),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        },
        "note": args.note,
        "config": {
            "users": args.users,
            "duration_s": args.duration_s,
            "mix": {"search": args.search_weight, "chat": args.chat_weight},
            "fake_llm": {
                "ttft_s": args.ttft_s,
                "token_delay_s": args.token_delay_s,
                "answer_words": args.answer_words,
            },
            "embedder_model": "minilm (the compose models image's; the local cluster's)",
            "reranker_model": "none in either (compose's reranker has none: fused order)",
            "environment_overrides": dict(GATEWAY_LOAD_ENV),
        },
        "containers": None,
        "processes": None,
    }
    status = 0
    try:
        print("part 1: containers", flush=True)
        report["containers"] = run_containers(args, args.work)
    except (SetupFailed, RuntimeError, OSError, subprocess.SubprocessError) as error:
        print(f"error: containers: {error}", file=sys.stderr)
        status = 2
    if not args.skip_processes:
        try:
            print("part 2: processes (groundwire up's local cluster)", flush=True)
            report["processes"] = run_processes(args, args.work, name)
        except (SetupFailed, OSError, subprocess.SubprocessError) as error:
            print(f"error: processes: {error}", file=sys.stderr)
            status = 2
    report["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    path = args.out / f"{name}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print()
    print(format_comparison(report))
    print(f"\nreport: {path}")
    if status:
        return status
    parts = [report["containers"], *([] if args.skip_processes else [report["processes"]])]
    return 0 if all(clean(p, args.users) for p in parts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
