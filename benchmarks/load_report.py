"""Load report: the whole stack under a concurrency sweep, per-stage p50/p95 as JSON and PNG.

What it does, in one run on one machine:

1. builds what it needs: the MiniLM model (``--model-dir``, built when missing) and,
   unless ``--reranker none``, a tiny random cross-encoder (no real cross-encoder
   weights exist offline: it exercises the reranker's mechanics, not its real cost);
2. starts a fake LLM as its own process (``tests/fakes/llm_server.py``, started by
   path with ``--orchestrator-answers``: settable time to first token and per-token
   delay; it answers the analysis and listwise prompts with valid JSON and the answer
   prompt with cited sentences taken from the excerpts), so the load is on our stack,
   not on a paid API;
3. starts the local cluster as processes (``LocalCluster``) with the gateway's limits
   off and the orchestrator pointed at the fake LLM, and ingests ``samples/corpus``;
4. for each step of ``--users`` runs locust headless as a subprocess against the gateway
   (``benchmarks/locustfile.py``, ``--duration-s`` per step), reads the summary its
   locustfile writes (locust's stats when it quit, and counters), and checks that no
   service died;
   With ``--gateways N --orchestrators M`` the stack is a multi-process topology (the
   extra replicas run beside the cluster's one of each; ``loadrun/topology.py``), and
   with ``--per-type`` each step runs once with searches only and once with chats only,
   so the report carries requests/s per core of each type and its saturation point
   (``loadrun/capacity.py``: also the CPU seconds every service process spent);
5. optionally (``--throughput``) measures the per-replica throughput of the embedder
   (texts/s at batch 32 through gRPC) and of the reranker (pairs/s) of that cluster;
6. writes ``benchmarks/results/load-<date>.json`` (per step: per-stage p50/p95 from the
   responses' stage reports, end-to-end p50/p95 per request type, requests/s, error
   rate, 5xx count; the machine) and ``load-<date>.png`` beside it, and prints a table.

    python benchmarks/load_report.py                       # 1, 8, 32, 64 users, 60 s each
    python benchmarks/load_report.py --users 32 --duration-s 60 --throughput
    python benchmarks/load_report.py --users 4 --duration-s 10 --out /tmp/load  # a smoke run
    python benchmarks/load_report.py --throughput-only     # only step 5, on the model services
    python benchmarks/load_report.py --gateways 2 --orchestrators 2 --per-type \\
        --users 1,8,32,64 --duration-s 20               # capacity across processes

Exit status: 0 when every step ran with no 5xx, no failed request and none cut off by
``--stop-timeout``; 1 otherwise (the report is written either way); 2 when the cluster
could not be set up.

``python tests/fakes/llm_server.py --orchestrator-answers 80 --ready-file F`` runs only
the fake LLM (what step 2 starts). The pieces live in ``benchmarks/loadrun/``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from loadrun.inputs import ROOT
from loadrun.runs import sweep, throughput_only

RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_MODEL_DIR = ROOT / "var" / "models" / "minilm"


def parse_users(raw: str) -> list[int]:
    try:
        users = [int(u) for u in raw.split(",") if u.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--users wants numbers like 1,8,32: {raw!r}") from None
    if not users or any(u < 1 or u > 1000 for u in users):
        raise argparse.ArgumentTypeError("--users: 1..1000 each")
    return users


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        description="Sweep concurrency against a local cluster with a fake LLM; write "
        "per-stage p50/p95 as JSON and PNG."
    )
    parser.add_argument(
        "--users",
        type=parse_users,
        default=[1, 8, 32, 64],
        help="concurrency steps, comma-separated (1,8,32,64)",
    )
    parser.add_argument("--duration-s", type=float, default=60.0, help="seconds per step")
    parser.add_argument("--search-weight", type=int, default=3, help="searches in the mix")
    parser.add_argument("--chat-weight", type=int, default=1, help="chats in the mix")
    parser.add_argument(
        "--wait-s",
        type=float,
        default=0.0,
        help="think time: uniform 0..this between a user's requests",
    )
    parser.add_argument(
        "--listwise-share",
        type=float,
        default=0.0,
        help="share of requests asking for the listwise LLM stage",
    )
    parser.add_argument("--ttft-s", type=float, default=0.3, help="fake LLM time to first token")
    parser.add_argument(
        "--token-delay-s", type=float, default=0.02, help="fake LLM delay per streamed word"
    )
    parser.add_argument(
        "--answer-words", type=int, default=80, help="words of the fake LLM's answers"
    )
    parser.add_argument(
        "--answer-style",
        choices=("paraphrase", "quote"),
        default="paraphrase",
        help="the fake LLM's answers: sentences behind a lead-in (checked "
        "through the embedder, like a model's paraphrase) or verbatim quotes "
        "(accepted without the embedder: a lighter load)",
    )
    parser.add_argument(
        "--reranker",
        choices=("tiny", "none"),
        default="tiny",
        help="serve a tiny random cross-encoder, or none",
    )
    parser.add_argument(
        "--reranker-model-dir",
        type=Path,
        default=None,
        help="serve this built cross-encoder instead of the tiny one (e.g. a full-size cost "
        "model from `groundwire models build bge-reranker-v2-m3 --random-weights`; pass "
        "--set GROUNDWIRE_RERANKER_SERVE_COST_MODEL=true for one)",
    )
    parser.add_argument(
        "--max-documents",
        type=int,
        default=None,
        help="ingest only the first N documents of samples/corpus",
    )
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=DEFAULT_MODEL_DIR,
        help="the MiniLM ONNX folder (built here when missing)",
    )
    parser.add_argument(
        "--throughput",
        action="store_true",
        help="also measure the model services' per-replica throughput",
    )
    parser.add_argument(
        "--throughput-only",
        action="store_true",
        help="no sweep: start only the model services and measure them",
    )
    parser.add_argument(
        "--throughput-s", type=float, default=15.0, help="seconds per throughput cell"
    )
    parser.add_argument(
        "--throughput-clients",
        type=int,
        default=4,
        help="concurrent gRPC callers saturating one replica",
    )
    parser.add_argument(
        "--gateways",
        type=int,
        default=1,
        help="gateway processes; locust users are dealt to them in turn",
    )
    parser.add_argument(
        "--orchestrators",
        type=int,
        default=1,
        help="orchestrator processes; every gateway round-robins across them",
    )
    parser.add_argument(
        "--per-type",
        action="store_true",
        help="capacity per request type: sweep searches only, then chats only (not the "
        "mix), and report requests/s per core and the saturation point of each",
    )
    parser.add_argument("--cooldown-s", type=float, default=5.0, help="pause between steps")
    parser.add_argument(
        "--stop-timeout-s",
        type=float,
        default=30.0,
        help="how long users may finish their request when a step ends",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the report")
    parser.add_argument("--name", default=None, help="file name stem (load-<date>)")
    parser.add_argument(
        "--note", default="", help="recorded in the report (e.g. the machine was shared)"
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=None,
        help="keep logs and data here (default: a temporary folder)",
    )
    parser.add_argument("--no-chart", action="store_true", help="skip the PNG")
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a service setting for this run, e.g. GROUNDWIRE_EMBEDDER_MODEL_LANES=1 "
        "(repeatable; recorded in the report). The cluster gives each service its own "
        "settings, so a setting in this shell's environment does not reach it",
    )
    args = parser.parse_args(argv)
    overrides: dict[str, str] = {}
    for setting in args.settings:
        key, sep, value = setting.partition("=")
        if not sep or not key.startswith("GROUNDWIRE_"):
            parser.error(f"--set {setting!r}: expected GROUNDWIRE_<SERVICE>_<NAME>=VALUE")
        overrides[key] = value
    args.settings = overrides
    if (
        args.search_weight < 0
        or args.chat_weight < 0
        or not (args.search_weight or args.chat_weight)
    ):
        parser.error("the mix needs a positive --search-weight or --chat-weight")
    if not (1 <= args.gateways <= 8 and 1 <= args.orchestrators <= 8):
        parser.error("--gateways and --orchestrators: 1..8 each")
    if args.duration_s <= 0 or args.duration_s > 3600:
        parser.error("--duration-s: more than 0, at most 3600")
    return throughput_only(args) if args.throughput_only else sweep(args)


if __name__ == "__main__":
    sys.exit(main())
