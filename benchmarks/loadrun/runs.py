"""The two runs of the load report: the concurrency sweep through the whole stack, and
the model services' throughput alone."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loadrun.capacity import format_capacity, sample, step_cpu, summarize, write_capacity_chart
from loadrun.fake_llm import start_fake_llm
from loadrun.inputs import CORPUS, build_tiny_reranker, ensure_minilm
from loadrun.locust_step import run_locust
from loadrun.machine import locust_version, machine
from loadrun.report import STAGE_ORDER, format_table, format_throughput, write_chart
from loadrun.throughput import measure_throughput
from loadrun.topology import Topology
from loadrun.warm_up import warm_up

COLLECTION = "docs"
FAST_MODEL = "fake-fast"
STRONG_MODEL = "fake-strong"

# The gateway's abuse and cost controls are off: the load comes from one address and
# would be refused after 60 searches a minute. Everything else keeps its defaults.
GATEWAY_LOAD_ENV = {
    "GROUNDWIRE_GATEWAY_RATE_LIMIT_PER_MIN": "0",
    "GROUNDWIRE_GATEWAY_SEARCH_RATE_LIMIT_PER_MIN": "0",
    "GROUNDWIRE_GATEWAY_DAILY_QUOTA": "0",
    "GROUNDWIRE_GATEWAY_ANONYMOUS_DAILY_QUOTA": "0",
    "GROUNDWIRE_GATEWAY_TOKEN_BUDGET_PER_DAY": "0",
    "GROUNDWIRE_GATEWAY_MAX_INFLIGHT_CHATS": "0",
}


@contextlib.contextmanager
def run_directory(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    path = Path(tempfile.mkdtemp(prefix="gw-load-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _model_label(model_dir: Path) -> str:
    """A served model's id (``cost-model:…`` for a random-weight cost model), int8 or
    fp32, from its manifest; the folder's name when it has none."""
    try:
        manifest = json.loads((model_dir / "groundwire-model.json").read_text())
    except (OSError, ValueError):
        return model_dir.name
    precision = "int8" if manifest.get("quantized") else "fp32"
    return f"{manifest.get('model_id', model_dir.name)} ({precision})"


def sweep(args: argparse.Namespace) -> int:
    import httpx

    from groundwire_cli.cluster import ClusterError, LocalCluster
    from groundwire_cli.ingest import find_documents, ingest_files
    from groundwire_core.errors import GroundwireError

    created = dt.datetime.now(dt.UTC)
    name = args.name or f"load-{created:%Y-%m-%d}"
    args.out.mkdir(parents=True, exist_ok=True)
    machine_at_start = machine()
    with run_directory(args.run_dir) as run_dir:
        model_dir = ensure_minilm(args.model_dir)
        env = {
            **GATEWAY_LOAD_ENV,
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_API_KEY": "fake",
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_FAST_MODEL": FAST_MODEL,
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_STRONG_MODEL": STRONG_MODEL,
            "GROUNDWIRE_ORCHESTRATOR_LLM_ORDER": "anthropic",
        }
        reranker_dir: Path | None = args.reranker_model_dir
        if reranker_dir is None and args.reranker == "tiny":
            print("building the tiny random cross-encoder (mechanics only)", flush=True)
            reranker_dir = build_tiny_reranker(run_dir)
        if reranker_dir is not None:
            env["GROUNDWIRE_RERANKER_MODEL_DIR"] = str(reranker_dir)
            # a random model's scores mean nothing: keep what it scores
            env["GROUNDWIRE_ORCHESTRATOR_RERANK_THRESHOLD"] = "0"
        fake = start_fake_llm(
            run_dir,
            args.ttft_s,
            args.token_delay_s,
            args.answer_words,
            args.answer_style == "quote",
        )
        env["GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_BASE_URL"] = fake.url
        env.update(args.settings)
        cluster = LocalCluster.with_free_ports(run_dir, model_dir, run_dir / "qdrant", env)
        topology = Topology.with_free_ports(args.gateways, args.orchestrators, cluster)
        cluster.extra_env = {**cluster.extra_env, **topology.cluster_env()}
        # one sweep of the mix, or (--per-type) one of searches only and one of chats only
        kinds = ["search", "chat"] if args.per_type else ["mix"]
        plan = [(kind, users) for kind in kinds for users in args.users]
        steps: list[dict[str, Any]] = []
        throughput: dict[str, Any] | None = None
        files: list[Path] = []
        chunks = 0
        ingest_s = 0.0
        warm: dict[str, Any] = {}
        try:
            with cluster:
                print(f"starting the cluster; logs in {run_dir / 'logs'}", flush=True)
                cluster.start()
                cluster.wait_ready(timeout_s=180)
                topology.start(cluster)
                topology.wait_ready(timeout_s=180)
                files = find_documents([CORPUS])[: args.max_documents]
                t0 = time.perf_counter()
                totals = asyncio.run(
                    ingest_files(cluster.addr("retriever"), COLLECTION, files, root=CORPUS)
                )
                ingest_s = time.perf_counter() - t0
                chunks = totals.chunks_written
                print(
                    f"ingested {totals.ingested} documents, {totals.chunks_written} chunks "
                    f"in {ingest_s:.1f} s",
                    flush=True,
                )
                for url in topology.gateway_urls:  # every gateway and, through them, orchestrator
                    warm = warm_up(httpx, url)
                print(
                    f"warm-up: search {warm['search_ms']:.0f} ms, chat {warm['chat_ms']:.0f} ms "
                    f"({warm['chat_mode']})",
                    flush=True,
                )
                pids = {
                    **{n: c.process.pid for n, c in cluster.children.items() if c.process},
                    **topology.pids(),
                }
                for i, (kind, users) in enumerate(plan):
                    if i:
                        time.sleep(args.cooldown_s)
                    print(
                        f"step {i + 1}/{len(plan)}: {kind}, {users} users "
                        f"for {args.duration_s:g} s",
                        flush=True,
                    )
                    weights = {
                        "mix": (args.search_weight, args.chat_weight),
                        "search": (1, 0),
                        "chat": (0, 1),
                    }[kind]
                    locust_env = {
                        "GW_LOAD_SEARCH_WEIGHT": str(weights[0]),
                        "GW_LOAD_CHAT_WEIGHT": str(weights[1]),
                        "GW_LOAD_WAIT_S": str(args.wait_s),
                        "GW_LOAD_LISTWISE_SHARE": str(args.listwise_share),
                        "GW_LOAD_COLLECTION": COLLECTION,
                        "GW_LOAD_HOSTS": ",".join(topology.gateway_urls),
                    }
                    before = sample(pids)
                    step = run_locust(
                        cluster.gateway_url,
                        users,
                        args.duration_s,
                        run_dir,
                        locust_env,
                        args.stop_timeout_s,
                        name=f"{kind}-u{users}",
                    )
                    step = {"kind": kind, **step}
                    step["requests_per_s_per_core"] = round(
                        step["requests_per_s"] / machine_at_start["cores"], 3
                    )
                    step["cpu"] = step_cpu(before, sample(pids), step["requests"])
                    crashed = cluster.crashed() + topology.crashed()
                    step["crashed_services"] = [n for n, _ in crashed]
                    steps.append(step)
                    print(
                        f"  {step['requests']} requests, {step['requests_per_s']:.1f}/s "
                        f"({step['requests_per_s_per_core']:.2f}/s per core, "
                        f"{step['cpu']['requests_per_cpu_s']} per stack CPU-second), "
                        f"{step['failures']} failed, {step['http_5xx']} 5xx, "
                        f"{step['cut_at_stop']} cut at stop",
                        flush=True,
                    )
                    if crashed:
                        for n, code in crashed:
                            tail = cluster.children[n].log_tail() if n in cluster.children else ""
                            print(f"error: {n} exited with code {code}:\n{tail}", file=sys.stderr)
                        break
                if args.throughput and not cluster.crashed():
                    print("measuring per-replica throughput of the model services", flush=True)
                    throughput = asyncio.run(
                        measure_throughput(
                            cluster.addr("embedder"),
                            cluster.addr("reranker") if reranker_dir else None,
                            args.throughput_s,
                            args.throughput_clients,
                        )
                    )
                topology.stop()
        except (
            ClusterError,
            GroundwireError,
            RuntimeError,
            OSError,
            subprocess.SubprocessError,
        ) as error:
            print(f"error: {error}", file=sys.stderr)
            if not steps:
                return 2
        finally:
            topology.stop()  # no-op when already stopped; before the cluster's own exit
            fake.stop()

    report: dict[str, Any] = {
        "name": name,
        "created": created.isoformat(timespec="seconds"),
        "machine": {
            **machine_at_start,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "note": args.note,
        "topology": topology.describe(),
        "config": {
            "users": args.users,
            "per_type": args.per_type,
            "duration_s": args.duration_s,
            "mix": {"search": args.search_weight, "chat": args.chat_weight},
            "wait_s": args.wait_s,
            "listwise_share": args.listwise_share,
            "fake_llm": {
                "ttft_s": args.ttft_s,
                "token_delay_s": args.token_delay_s,
                "answer_words": args.answer_words,
                "answer_style": args.answer_style,
            },
            "embedder_model": _model_label(model_dir),
            "reranker_model": _model_label(args.reranker_model_dir)
            if args.reranker_model_dir
            else "tiny random BERT cross-encoder (mechanics only)"
            if reranker_dir
            else "none (rerank falls back to the fused order)",
            "environment_overrides": {
                k: v for k, v in env.items() if "API_KEY" not in k and "BASE_URL" not in k
            },
            "corpus": {"documents": len(files), "chunks": chunks, "ingest_s": round(ingest_s, 1)},
            "warm_up": warm,
        },
        "stage_order": list(STAGE_ORDER),
        "steps": steps,
    }
    report["machine"]["locust"] = locust_version()
    if args.per_type:
        report["capacity"] = summarize(steps, kinds)
    if throughput is not None:
        report["throughput"] = throughput
    json_path = args.out / f"{name}.json"
    json_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if not args.no_chart and steps:
        chart = write_capacity_chart if args.per_type else write_chart
        chart(report, args.out / f"{name}.png")
    print()
    m = report["machine"]
    print(
        f"{m['cores']} cores ({m['cpu_model']}), {m['memory_gib']} GiB; load average at "
        f"start {m['load_average_at_start'][0]}, at end {m['load_average_at_end'][0]}"
    )
    print(format_table(report))
    print()
    print(format_capacity(report))
    if throughput:
        print()
        print(format_throughput(throughput))
    print(f"\nreport: {json_path}" + ("" if args.no_chart else f" and {name}.png"))
    clean = len(steps) == len(plan) and all(
        s["failures"] == 0
        and s["http_5xx"] == 0
        and s["cut_at_stop"] == 0
        and not s["crashed_services"]
        for s in steps
    )
    return 0 if clean else 1


def throughput_only(args: argparse.Namespace) -> int:
    """Only the model services (embedder, reranker) and their per-replica throughput."""
    from groundwire_cli.cluster import LocalCluster

    created = dt.datetime.now(dt.UTC)
    name = args.name or f"load-{created:%Y-%m-%d}-throughput"
    args.out.mkdir(parents=True, exist_ok=True)
    names = ("embedder", "reranker") if args.reranker == "tiny" else ("embedder",)
    with run_directory(args.run_dir) as run_dir:
        model_dir = ensure_minilm(args.model_dir)
        env: dict[str, str] = {}
        if args.reranker == "tiny":
            print("building the tiny random cross-encoder (mechanics only)", flush=True)
            env["GROUNDWIRE_RERANKER_MODEL_DIR"] = str(build_tiny_reranker(run_dir))
        env.update(args.settings)
        with LocalCluster.with_free_ports(run_dir, model_dir, run_dir / "qdrant", env) as cluster:
            cluster.start(names)
            cluster.wait_ready(timeout_s=180, names=names)
            machine_before = machine()
            throughput = asyncio.run(
                measure_throughput(
                    cluster.addr("embedder"),
                    cluster.addr("reranker") if "reranker" in names else None,
                    args.throughput_s,
                    args.throughput_clients,
                )
            )
    report = {
        "name": name,
        "created": created.isoformat(timespec="seconds"),
        "machine": {
            **machine_before,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "note": args.note,
        "config": {
            "embedder_model": model_dir.name,
            "reranker_model": (
                "tiny random BERT cross-encoder (mechanics only)" if "reranker" in names else "none"
            ),
            "services": list(names),
            "service_settings": "defaults",
        },
        "throughput": throughput,
    }
    path = args.out / f"{name}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    m = report["machine"]
    print(
        f"{m['cores']} cores ({m['cpu_model']}); load average at start "
        f"{m['load_average_at_start'][0]}, at end {m['load_average_at_end'][0]}"
    )
    print(format_throughput(throughput))
    print(f"\nreport: {path}")
    return 0
