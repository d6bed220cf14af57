"""Sizing: what a search, a chat and an ingest cost with a given pair of models.

For one profile (an embedder model folder and a reranker model folder: MiniLM with the
tiny reranker, or the full-size BGE-M3 / bge-reranker-v2-m3 cost models in int8 or fp32
from `groundwire models build PROFILE --random-weights`), this runs
``load_report.py --per-type`` — the five services as processes, a fake LLM, locust
against the gateway with searches only, then chats only — and reduces its report to
the sizing table's row:

* p50/p95 of one search and one chat with one user (an idle stack);
* the saturation requests/s of each (the fastest step at full quality: no stage shedding
  work) and the CPU seconds each service process spent per request there;
* ingest: documents/s and chunks/s of ``samples/corpus`` through the retriever.

Results go to ``benchmarks/results/sizing-<label>.json``; ``--table`` prints the
markdown table of every ``sizing-*.json`` (docs/sizing.md quotes it).

    python benchmarks/sizing.py --label minilm                      # MiniLM + tiny reranker
    python benchmarks/sizing.py --label full-int8 \\
        --embedder-model var/models/cost/bge-m3 --reranker-model var/models/cost/bge-reranker-v2-m3
    python benchmarks/sizing.py --table
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def _row(report: dict[str, Any], label: str) -> dict[str, Any]:
    """The sizing row of one ``load_report --per-type`` report."""
    row: dict[str, Any] = {
        "label": label,
        "embedder_model": report["config"]["embedder_model"],
        "reranker_model": report["config"]["reranker_model"],
        "machine": report["machine"],
        "load_report": report["name"],
    }
    for kind in ("search", "chat"):
        steps = sorted((s for s in report["steps"] if s["kind"] == kind), key=lambda s: s["users"])
        if not steps:
            continue
        idle = steps[0]
        e2e = idle["end_to_end"].get(kind, {})
        sat = report.get("capacity", {}).get(kind, {}).get("full_quality") or {}
        at = next((s for s in steps if s["users"] == sat.get("users")), steps[-1])
        per_request = {
            name: round(cpu / at["requests"], 4)
            for name, cpu in at["cpu"]["service_cpu_s"].items()
            if at["requests"]
        }
        row[kind] = {
            "idle_users": idle["users"],
            "idle_p50_ms": e2e.get("p50_ms"),
            "idle_p95_ms": e2e.get("p95_ms"),
            "idle_stages_p50_ms": {n: st["p50_ms"] for n, st in idle["stages"].items()},
            "saturation_users": sat.get("users"),
            "saturation_requests_per_s": sat.get("requests_per_s"),
            "requests_per_stack_cpu_s": sat.get("requests_per_cpu_s"),
            "cpu_s_per_request": per_request,
            "fallbacks_at_saturation": sat.get("stage_fallbacks"),
        }
    corpus = report["config"]["corpus"]
    if corpus.get("ingest_s"):
        row["ingest"] = {
            **corpus,
            "documents_per_s": round(corpus["documents"] / corpus["ingest_s"], 2),
            "chunks_per_s": round(corpus["chunks"] / corpus["ingest_s"], 2),
        }
    return row


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="groundwire-sizing-") as scratch:
        command = [
            sys.executable,
            str(ROOT / "benchmarks" / "load_report.py"),
            "--per-type",
            "--users", args.users,
            "--duration-s", str(args.duration_s),
            "--out", scratch,
            "--name", f"load-sizing-{args.label}",
            "--no-chart",
            "--note", args.note,
            "--set", "GROUNDWIRE_EMBEDDER_SERVE_COST_MODEL=true",
            "--set", "GROUNDWIRE_RERANKER_SERVE_COST_MODEL=true",
            *(["--model-dir", str(args.embedder_model)] if args.embedder_model else []),
            *(["--reranker-model-dir", str(args.reranker_model)] if args.reranker_model else []),
            *[x for s in args.set for x in ("--set", s)],
        ]  # fmt: skip
        print(" ".join(command), flush=True)
        done = subprocess.run(command, cwd=ROOT)
        reports = sorted(Path(scratch).glob("load-sizing-*.json"))
        if not reports:
            print("the load report wrote nothing", file=sys.stderr)
            return 2
        report = json.loads(reports[0].read_text())
    row = _row(report, args.label)
    row["command"] = " ".join(["python benchmarks/sizing.py", *sys.argv[1:]])
    row["load_report_exit"] = done.returncode
    row["steps"] = report["steps"]
    path = RESULTS / f"sizing-{args.label}.json"
    path.write_text(json.dumps(row, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)}")
    print(table([row]))
    return 0


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value:,.0f}"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| profile | search p50 / p95 ms (1 user) | search sat. req/s | CPU-s per search "
        "(embedder / reranker / rest) | chat p50 / p95 ms | chat sat. req/s | ingest docs/s "
        "(chunks/s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        search = row.get("search", {})
        chat = row.get("chat", {})
        cpu = search.get("cpu_s_per_request", {})
        rest = sum(v for k, v in cpu.items() if k not in ("embedder", "reranker"))
        ingest = row.get("ingest", {})
        lines.append(
            f"| {row['label']} | {_ms(search.get('idle_p50_ms'))} / "
            f"{_ms(search.get('idle_p95_ms'))} | {search.get('saturation_requests_per_s', '-')} | "
            f"{cpu.get('embedder', 0):.3f} / {cpu.get('reranker', 0):.3f} / {rest:.3f} | "
            f"{_ms(chat.get('idle_p50_ms'))} / {_ms(chat.get('idle_p95_ms'))} | "
            f"{chat.get('saturation_requests_per_s', '-')} | "
            f"{ingest.get('documents_per_s', '-')} ({ingest.get('chunks_per_s', '-')}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", help="the profile's name (sizing-<label>.json)")
    parser.add_argument("--embedder-model", type=Path, default=None, help="default: MiniLM")
    parser.add_argument(
        "--reranker-model", type=Path, default=None, help="default: the tiny random one"
    )
    parser.add_argument("--users", default="1,4", help="load steps per request type")
    parser.add_argument("--duration-s", type=float, default=30.0, help="seconds per step")
    parser.add_argument("--note", default="", help="recorded in the report")
    parser.add_argument(
        "--set", action="append", default=[], help="a service setting NAME=VALUE for the run"
    )
    parser.add_argument("--table", action="store_true", help="print the table of all results")
    args = parser.parse_args(argv)
    if args.table:
        rows = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("sizing-*.json"))]
        print(table(rows))
        return 0
    if not args.label:
        parser.error("--label is required")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
