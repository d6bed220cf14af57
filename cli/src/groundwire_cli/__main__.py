"""The groundwire command.

groundwire up                      run the five services locally until Ctrl-C
groundwire demo                    start the cluster, ingest samples/corpus, search it, ask it
groundwire ingest PATH...          ingest files or folders into a collection
groundwire models build PROFILE    build an ONNX model folder (needs the export extra)
groundwire eval retrieval --dataset DIR   retrieval ablation on a BEIR-format folder
groundwire eval answers --golden FILE     golden-set checks of the answers (/v1/chat)
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

from groundwire_cli import demo as demo_cli
from groundwire_cli import evaluate, golden
from groundwire_cli.cluster import ClusterError, LocalCluster
from groundwire_cli.ingest import find_documents, ingest_with_progress
from groundwire_core.errors import GroundwireError, Unavailable

DEFAULT_MODEL_DIR = Path("var/models/minilm")
DEFAULT_DATA = Path("var/qdrant")
DEFAULT_RUN = Path("var/run")


def _cluster(args: argparse.Namespace, free_ports: bool) -> LocalCluster:
    if not (args.model_dir / "groundwire-model.json").exists():
        raise SystemExit(
            f"no model in {args.model_dir}: run `groundwire models build minilm "
            f"--out {args.model_dir}` first"
        )
    if free_ports:
        return LocalCluster.with_free_ports(args.run_dir, args.model_dir, args.data_path)
    return LocalCluster(args.run_dir, args.model_dir, args.data_path)


def cmd_up(args: argparse.Namespace) -> int:
    cluster = _cluster(args, args.free_ports)
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    print(f"starting {len(cluster.ports)} services; logs in {args.run_dir / 'logs'}", flush=True)
    cluster.start()
    try:
        cluster.wait_ready()
    except ClusterError as error:
        print(f"error: {error}", file=sys.stderr)
        cluster.stop()
        return 1
    for name, port in cluster.ports.items():
        print(f"  {name:<13} 127.0.0.1:{port}  SERVING")
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
        cluster.stop()
    return 1 if reported else 0


def cmd_ingest(args: argparse.Namespace) -> int:
    files = find_documents(args.paths)
    if not files:
        print("no documents found", file=sys.stderr)
        return 1
    return _ingest(
        args.retriever, args.collection, files, args.root, full_reindex=args.full_reindex
    )


def _ingest(
    addr: str,
    collection: str,
    files: list[Path],
    root: Path | None,
    *,
    full_reindex: bool = False,
) -> int:
    try:
        ingest_with_progress(addr, collection, files, root=root, full_reindex=full_reindex)
    except Unavailable as error:
        if error.dependency != "retriever":
            raise
        raise Unavailable(
            f"{error.message} ({addr}); if nothing runs there, start the services with "
            "`groundwire up` or point --retriever at a running retriever",
            dependency="retriever",
        ) from None
    return 0


def _profiles() -> dict[str, object]:
    """Every buildable profile: embedder and reranker exports (needs the export extras)."""
    profiles: dict[str, object] = {}
    for module in ("groundwire_embedder.export", "groundwire_reranker.export"):
        try:
            exported = __import__(module, fromlist=["build_profile", "PROFILES"])
        except ImportError:
            continue
        for name in getattr(exported, "PROFILES", {}):
            profiles[name] = exported.build_profile
    return profiles


def cmd_models_build(args: argparse.Namespace) -> int:
    profiles = _profiles()
    if not profiles:
        print(
            "models build needs the export extras: "
            "pip install -c constraints.txt -e 'services/embedder[export]'",
            file=sys.stderr,
        )
        return 2
    build = profiles.get(args.profile)
    if build is None:
        print(
            f"unknown profile {args.profile!r}; known: {', '.join(sorted(profiles))}",
            file=sys.stderr,
        )
        return 2
    out = args.out or Path("var/models") / args.profile
    report = build(args.profile, out, int8=args.int8, source=args.source)  # type: ignore[operator]
    print(f"built {report.profile} into {report.out_dir} in {report.seconds:.1f}s")
    return 0


def cmd_load_report(args: argparse.Namespace) -> int:
    # benchmarks/ is not part of the installed package: run the checkout's script
    script = Path(__file__).resolve().parents[3] / "benchmarks" / "load_report.py"
    if not script.exists():
        print(
            f"error: {script} not found: `groundwire load report` runs from a source checkout",
            file=sys.stderr,
        )
        return 2
    return subprocess.call([sys.executable, str(script), *args.load_args])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="groundwire", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def cluster_args(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--model-dir",
            type=Path,
            default=DEFAULT_MODEL_DIR,
            help="embedder model folder (default: %(default)s)",
        )
        p.add_argument(
            "--data-path",
            type=Path,
            default=DEFAULT_DATA,
            help="embedded Qdrant folder (default: %(default)s)",
        )
        p.add_argument(
            "--run-dir",
            type=Path,
            default=DEFAULT_RUN,
            help="logs and ready files (default: %(default)s)",
        )

    up = sub.add_parser("up", help="run all five services locally until Ctrl-C")
    cluster_args(up)
    up.add_argument(
        "--free-ports", action="store_true", help="pick free ports instead of 50051-50054 and 8080"
    )
    up.set_defaults(func=cmd_up)

    demo = sub.add_parser(
        "demo", help="start the cluster, ingest the sample corpus, search it and ask it"
    )
    cluster_args(demo)
    demo_cli.add_arguments(demo)
    demo.set_defaults(func=demo_cli.run_command)

    ingest = sub.add_parser("ingest", help="ingest files or folders through the retriever")
    ingest.add_argument("paths", nargs="+", type=Path)
    ingest.add_argument("--collection", default="docs")
    ingest.add_argument("--retriever", default="127.0.0.1:50053", help="retriever gRPC address")
    ingest.add_argument(
        "--root", type=Path, default=None, help="source ids are paths relative to this folder"
    )
    ingest.add_argument(
        "--full-reindex",
        action="store_true",
        help="make these files the whole collection, re-embedded with the embedder's "
        "current model (a new generation that replaces the old one when done; sources not "
        "given disappear); one request, up to 60 MiB",
    )
    ingest.set_defaults(func=cmd_ingest)

    models = sub.add_parser("models", help="build model folders")
    models_sub = models.add_subparsers(dest="models_command", required=True)
    build = models_sub.add_parser("build", help="export a model profile to ONNX")
    build.add_argument("profile", help="minilm, bge-m3, bge-reranker-v2-m3, cross-encoder")
    build.add_argument("--out", type=Path, default=None, help="default: var/models/PROFILE")
    build.add_argument("--int8", action="store_true", help="quantize to int8 (MatMul, per channel)")
    build.add_argument("--source", type=Path, default=None, help="local checkpoint folder")
    build.set_defaults(func=cmd_models_build)

    evals = sub.add_parser("eval", help="evaluate retrieval and answer quality")
    evals_sub = evals.add_subparsers(dest="eval_command", required=True)
    retrieval = evals_sub.add_parser(
        "retrieval",
        help="retrieval ablation (BM25, dense, sparse, hybrid, + rerank) on a BEIR folder",
        description=evaluate.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    evaluate.add_arguments(retrieval)
    retrieval.set_defaults(func=evaluate.run_command)
    answers = evals_sub.add_parser(
        "answers",
        help="ask a golden set through /v1/chat and check every answer (JSON + markdown report)",
        description=golden.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    golden.add_arguments(answers)
    answers.set_defaults(func=golden.run_command)
    load = sub.add_parser("load", help="load tests against a local cluster")
    load_sub = load.add_subparsers(dest="load_command", required=True)
    # prefix_chars="+": every option (--help included) goes to benchmarks/load_report.py
    report = load_sub.add_parser(
        "report",
        help="sweep concurrency with a fake LLM; per-stage p50/p95 as JSON and PNG",
        add_help=False,
        prefix_chars="+",
    )
    report.add_argument("load_args", nargs=argparse.REMAINDER)
    report.set_defaults(func=cmd_load_report)
    return parser


def _exit_on_sigterm(signum: int, frame: object) -> None:
    # SIGTERM's default action ends the process on the spot, leaving the services a
    # command started (eval, demo) running; raising unwinds the `with` and `finally`
    # blocks that stop them, as Ctrl-C does.
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # `up` installs its own handler
    try:
        sys.exit(args.func(args))
    except GroundwireError as error:
        where = f" ({error.dependency})" if error.dependency else ""
        print(f"error{where}: {error.message}", file=sys.stderr)
        sys.exit(1)
    except (FileNotFoundError, ClusterError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
