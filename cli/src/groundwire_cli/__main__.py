"""The groundwire command.

groundwire up [--detach]           run the five services locally (until Ctrl-C, or `down`)
groundwire down                    stop the services `up --detach` started
groundwire demo                    start the cluster, ingest samples/corpus, search it, ask it
groundwire ingest PATH...          ingest files or folders into a collection
groundwire sources COLLECTION      list the sources a collection holds (counts, hashes)
groundwire sync PATH|URL           sync a collection with a folder, git tree or site (deletions)
groundwire jobs [list|show|watch|cancel]  the retriever's ingest and sync jobs
groundwire chat QUESTION           ask the running cluster; a cited answer
groundwire search QUERY            ranked passages from the running cluster (no answer)
groundwire mcp --gateway URL       the gateway's MCP tools over stdio (Claude Desktop, IDEs)
groundwire keys create|list|revoke scoped API keys (tenant, role) via the admin API
groundwire report --collection C   most-asked, declined, low-evidence, marked-wrong questions
groundwire config show [SERVICE]   the settings each service gets from `up` (secrets masked)
groundwire db upgrade              run every service's migrations of the system of record
groundwire backup --out DIR        the collections and the system of record into a new folder
groundwire restore --from DIR      a backup into an empty data folder and empty databases
groundwire models build PROFILE    build an ONNX model folder (needs the export extra)
groundwire eval retrieval --dataset DIR   retrieval ablation on a BEIR-format folder
groundwire eval answers --golden FILE     golden-set checks of the answers (/v1/chat)
groundwire eval grounding --dataset DIR   citation verifiers on SciFact-layout claims
groundwire load report             load test a local cluster: per-stage p50/p95 (a checkout)

Models, the store and logs live in GROUNDWIRE_HOME (default: the checkout's var/, or
~/.local/share/groundwire); settings come from flags, then GROUNDWIRE_<SERVICE>_* variables,
then groundwire.toml (see docs/configuration.md).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx

from groundwire_cli import backup as backup_cli
from groundwire_cli import config as config_cli
from groundwire_cli import demo as demo_cli
from groundwire_cli import evaluation, gateway_access, golden, lifecycle
from groundwire_cli import jobs as jobs_cli
from groundwire_cli import keys as keys_cli
from groundwire_cli import mcp as mcp_cli
from groundwire_cli import report as report_cli
from groundwire_cli import search as search_cli
from groundwire_cli import sources as sources_cli
from groundwire_cli import sync as sync_cli
from groundwire_cli.chat import ChatProtocolError, ChatRequestError, ask
from groundwire_cli.child_settings import user_environment
from groundwire_cli.cluster import ClusterError, LocalCluster, use_service_token
from groundwire_cli.evaluation import command as evaluate
from groundwire_cli.evaluation import grounding
from groundwire_cli.ingest import SUFFIXES, default_root, find_documents, ingest_with_progress
from groundwire_core.errors import GroundwireError, Unavailable


def _resolve_paths(args: argparse.Namespace) -> None:
    """Fills the cluster's folders left unset: flag > environment > settings file >
    GROUNDWIRE_HOME (never the current folder)."""
    environ = user_environment()
    home = config_cli.groundwire_home(environ)
    args.file_settings = config_cli.load_file(config_cli.config_path(args.config, environ))
    file = args.file_settings
    args.model_dir = config_cli.resolve_path(
        args.model_dir, "embedder", "model_dir", environ, file, home / "models" / "minilm"
    )
    args.data_path = config_cli.resolve_path(
        args.data_path, "retriever", "data_path", environ, file, home / "qdrant"
    )
    args.run_dir = args.run_dir or home / "run"


def _cluster(args: argparse.Namespace, free_ports: bool) -> LocalCluster:
    if not (args.model_dir / "groundwire-model.json").exists():
        raise SystemExit(
            f"no model in {args.model_dir}: run `make model` in the checkout, or "
            f"`groundwire models build minilm --out {args.model_dir}`"
        )
    if free_ports:
        return LocalCluster.with_free_ports(
            args.run_dir, args.model_dir, args.data_path, file=args.file_settings
        )
    return LocalCluster(args.run_dir, args.model_dir, args.data_path, file=args.file_settings)


def cmd_up(args: argparse.Namespace) -> int:
    cluster = _cluster(args, args.free_ports)
    config_cli.validate(cluster)
    if args.detach:
        argv = ["up", "--model-dir", str(args.model_dir), "--data-path", str(args.data_path),
                "--run-dir", str(args.run_dir)]  # fmt: skip
        argv += ["--free-ports"] if args.free_ports else []
        if args.file_settings.path is not None:
            argv += ["--config", str(args.file_settings.path)]
        return lifecycle.detach(argv, args.run_dir)
    existing = lifecycle.running(args.run_dir)
    if existing is not None:
        print(
            f"error: Groundwire is already running ({existing.gateway_url}, pid "
            f"{existing.pid}); stop it with `groundwire down` or Ctrl-C where it runs",
            file=sys.stderr,
        )
        return 1
    return lifecycle.serve(cluster, args.run_dir)


def cmd_down(args: argparse.Namespace) -> int:
    return lifecycle.down(args.run_dir)


def cmd_config_show(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.run_dir, args.model_dir, args.data_path, file=args.file_settings)
    print(config_cli.render(cluster, args.service, user_environment()))
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    gateway = gateway_access.gateway_url(args)
    try:
        with httpx.Client(
            base_url=gateway, timeout=args.timeout, headers=gateway_access.headers(args)
        ) as client:
            outcome = ask(client, args.question, collection=args.collection)
    except httpx.TransportError as error:
        raise Unavailable(
            f"no gateway answers at {gateway} ({error}); start the services with "
            "`groundwire up --detach` or point --gateway at a running gateway",
            dependency="gateway",
        ) from None
    except (ChatRequestError, ChatProtocolError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    demo_cli.print_answer(args.question, outcome)
    return 1 if outcome.error is not None else 0


def _suffixes(paths: list[Path], *, unsupported_only: bool = False) -> Counter[str]:
    """How many files of each suffix lie under ``paths`` (folders searched deeply)."""
    found: Counter[str] = Counter()
    for path in paths:
        files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
        found.update(
            p.suffix.lower() or "(no suffix)"
            for p in files
            if not (unsupported_only and p.suffix.lower() in SUFFIXES)
        )
    return found


def _kinds(found: Counter[str]) -> str:
    """``6 .gz, 1 .png`` — the eight most common suffixes, then how many more."""
    kinds = ", ".join(f"{n} {suffix}" for suffix, n in found.most_common(8))
    return kinds + (f" and {len(found) - 8} other kinds" if len(found) > 8 else "")


def _nothing_to_ingest(paths: list[Path]) -> str:
    """Why nothing under ``paths`` can be ingested: which files are there, and which
    formats the ingest reads."""
    found = _suffixes(paths)
    where = ", ".join(map(str, paths))
    supported = f"supported formats: {', '.join(SUFFIXES)}"
    if not found:
        return f"no documents found in {where}: it holds no files; {supported}"
    total = sum(found.values())
    return (
        f"no documents found in {where}: {total} file{'s' if total > 1 else ''} "
        f"({_kinds(found)}), none in a supported format; {supported}"
    )


def cmd_ingest(args: argparse.Namespace) -> int:
    files = find_documents(args.paths)
    # A file named on the command line is found whatever its suffix; one the ingest
    # cannot read is reported here, and never sent: a request would create the
    # collection even when every document in it is skipped.
    unsupported = [f for f in files if f.suffix.lower() not in SUFFIXES]
    files = [f for f in files if f.suffix.lower() in SUFFIXES]
    if not files:
        print(f"error: {_nothing_to_ingest(args.paths)}", file=sys.stderr)
        return 1
    for f in unsupported:
        print(f"  skipped {f}: not a supported format ({', '.join(SUFFIXES)})", file=sys.stderr)
    # files in the folders given that the ingest does not read are said once, not hidden
    left_out = _suffixes([p for p in args.paths if p.is_dir()], unsupported_only=True)
    if left_out:
        total = sum(left_out.values())
        print(
            f"  left out {total} file{'s' if total > 1 else ''} in formats the ingest does "
            f"not read ({_kinds(left_out)}); supported formats: {', '.join(SUFFIXES)}",
            file=sys.stderr,
        )
    retriever = args.retriever or lifecycle.running_addr("retriever", lifecycle.DEFAULT_RETRIEVER)
    root = args.root or default_root(args.paths)  # never the working directory
    return _ingest(
        retriever,
        args.collection,
        files,
        root,
        full_reindex=args.full_reindex,
        url_prefix=args.url_prefix,
    )


def _ingest(
    addr: str,
    collection: str,
    files: list[Path],
    root: Path | None,
    *,
    full_reindex: bool = False,
    url_prefix: str = "",
) -> int:
    with lifecycle.retriever_at(addr):
        ingest_with_progress(
            addr, collection, files, root=root, full_reindex=full_reindex, url_prefix=url_prefix
        )
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


COST_MODEL_PROFILES = ("bge-m3", "bge-reranker-v2-m3", "cross-encoder", "nli")
"""The profiles `models build --random-weights` can build as cost models."""
INT8_BY_DEFAULT = ("bge-m3", "bge-reranker-v2-m3")
"""XLM-RoBERTa large: int8 (per-channel MatMul) is ~3x fp32 on CPU (161 vs 504 tokens/s
per core, ../shared/ENVIRONMENT.md), so these build int8 unless --fp32."""


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
    home = config_cli.groundwire_home(user_environment())
    out = args.out or home / "models" / args.profile
    options = {"random_weights": True} if args.random_weights else {}
    if args.random_weights and args.profile not in COST_MODEL_PROFILES:
        print(
            f"--random-weights builds {', '.join(COST_MODEL_PROFILES)}, not {args.profile!r}",
            file=sys.stderr,
        )
        return 2
    int8 = args.int8 or (args.profile in INT8_BY_DEFAULT and not args.fp32)
    # the build logs its steps and its last line, "built PROFILE into DIR in Ns"
    build(args.profile, out, int8=int8, source=args.source, **options)  # type: ignore[operator]
    return 0


def cmd_load_report(args: argparse.Namespace) -> int:
    # benchmarks/ is not part of the installed package: run the checkout's script
    root = config_cli.checkout_root()
    script = (root or Path(".")) / "benchmarks" / "load_report.py"
    if root is None or not script.exists():
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
        # None: resolved by _resolve_paths (environment, settings file, GROUNDWIRE_HOME)
        p.add_argument(
            "--model-dir",
            type=Path,
            default=None,
            help="embedder model folder (default: GROUNDWIRE_HOME/models/minilm)",
        )
        p.add_argument(
            "--data-path",
            type=Path,
            default=None,
            help="embedded Qdrant folder (default: GROUNDWIRE_HOME/qdrant)",
        )
        p.add_argument(
            "--run-dir",
            type=Path,
            default=None,
            help="logs, ready files and up.json (default: GROUNDWIRE_HOME/run)",
        )
        p.add_argument(
            "--config",
            type=Path,
            default=None,
            help="settings file (default: GROUNDWIRE_CONFIG, else "
            "~/.config/groundwire/groundwire.toml when it exists)",
        )
        p.set_defaults(resolve_paths=True)

    up = sub.add_parser(
        "up", help="run all five services locally until Ctrl-C (or in the background: -d)"
    )
    cluster_args(up)
    lifecycle.add_up_arguments(up)
    up.set_defaults(func=cmd_up)

    down = sub.add_parser("down", help="stop the services `groundwire up --detach` started")
    cluster_args(down)
    down.set_defaults(func=cmd_down)

    chat = sub.add_parser("chat", help="ask the running cluster a question; a cited answer")
    chat.add_argument("question")
    chat.add_argument("--collection", default=None, help="default: the server's")
    gateway_access.add_arguments(chat)
    chat.add_argument("--timeout", type=float, default=120.0, help="seconds (default: 120)")
    chat.set_defaults(func=cmd_chat)

    settings = sub.add_parser("config", help="the settings `groundwire up` gives each service")
    settings_sub = settings.add_subparsers(dest="config_command", required=True)
    show = settings_sub.add_parser(
        "show",
        help="print each service's effective settings and where each comes from (secrets masked)",
    )
    show.add_argument("service", nargs="?", choices=config_cli.SERVICES, default=None)
    cluster_args(show)
    show.set_defaults(func=cmd_config_show)

    demo = sub.add_parser(
        "demo", help="start the cluster, ingest the sample corpus, search it and ask it"
    )
    cluster_args(demo)
    demo_cli.add_arguments(demo)
    demo.set_defaults(func=demo_cli.run_command)

    ingest = sub.add_parser("ingest", help="ingest files or folders through the retriever")
    ingest.add_argument("paths", nargs="+", type=Path)
    ingest.add_argument("--collection", default="docs")
    ingest.add_argument(
        "--retriever",
        default=None,
        help=f"retriever gRPC address (default: the one `groundwire up` runs, else "
        f"{lifecycle.DEFAULT_RETRIEVER})",
    )
    ingest.add_argument(
        "--root",
        type=Path,
        default=None,
        help="source ids are paths relative to this folder (default: the folder given, or "
        "the deepest folder holding all the paths given; never the working directory)",
    )
    ingest.add_argument(
        "--url-prefix",
        default="",
        help="the site the files are published on: each source's URL is this prefix plus "
        "its source id (e.g. https://docs.example.com/ + guide/install.html); without it, "
        "citations open the stored text in the gateway",
    )
    ingest.add_argument(
        "--full-reindex",
        action="store_true",
        help="make these files the whole collection, re-embedded with the embedder's "
        "current model (a new generation that replaces the old one when done; sources not "
        "given disappear); one request, up to 60 MiB",
    )
    ingest.set_defaults(func=cmd_ingest)

    sources = sub.add_parser("sources", help="list the sources a collection holds")
    sources_cli.add_arguments(sources)
    sources.set_defaults(func=sources_cli.run_command)
    sync_cli.add_parser(sub)
    jobs_cli.add_parser(sub)
    mcp_cli.add_parser(sub)
    search_cli.add_parser(sub)
    keys_cli.add_parser(sub)
    report_cli.add_parser(sub)
    backup_cli.add_parsers(sub, cluster_args)

    models = sub.add_parser("models", help="build model folders")
    models_sub = models.add_subparsers(dest="models_command", required=True)
    build = models_sub.add_parser("build", help="export a model profile to ONNX")
    build.add_argument("profile", help="minilm, bge-m3, bge-reranker-v2-m3, cross-encoder, nli")
    build.add_argument("--out", type=Path, default=None, help="default: var/models/PROFILE")
    build.add_argument(
        "--int8",
        action="store_true",
        help="quantize to int8 (MatMul, per channel); the default for "
        + ", ".join(INT8_BY_DEFAULT),
    )
    build.add_argument(
        "--fp32", action="store_true", help=f"keep fp32 for {', '.join(INT8_BY_DEFAULT)}"
    )
    build.add_argument("--source", type=Path, default=None, help="local checkpoint folder")
    build.add_argument(
        "--random-weights",
        action="store_true",
        help="a cost model: the profile's real architecture and sizes with random weights "
        "(no download; for sizing benchmarks: the services refuse it unless SERVE_COST_MODEL)",
    )
    build.set_defaults(func=cmd_models_build)

    evals = sub.add_parser("eval", help="evaluate retrieval and answer quality")
    evals_sub = evals.add_subparsers(dest="eval_command", required=True)
    retrieval = evals_sub.add_parser(
        "retrieval",
        help="retrieval ablation (BM25, dense, sparse, hybrid, + rerank) on a BEIR folder",
        description=evaluation.__doc__,
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
    grounding.add_parser(evals_sub)
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
    use_service_token()  # direct gRPC calls (ingest, sources…) pass the services' check
    try:
        if getattr(args, "resolve_paths", False):
            _resolve_paths(args)
        sys.exit(args.func(args))
    except GroundwireError as error:
        where = f" ({error.dependency})" if error.dependency else ""
        print(f"error{where}: {error.message}", file=sys.stderr)
        sys.exit(1)
    except (FileNotFoundError, ClusterError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    except BrokenPipeError:
        # the reader went away (`groundwire config show | head`); as the Python docs
        # advise, point stdout at devnull so the interpreter's final flush is quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)


if __name__ == "__main__":
    main()
