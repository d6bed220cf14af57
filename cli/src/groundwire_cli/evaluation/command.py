"""The command line of `groundwire eval retrieval`: its options, checked, and the run
(its description for --help is the package's docstring)."""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

from groundwire_cli.child_settings import user_environment
from groundwire_cli.config import default_model_dir
from groundwire_cli.evaluation.ablation import EvalSettings
from groundwire_cli.evaluation.beir import DatasetError, EvaluationError, limit_dataset, load_beir
from groundwire_cli.evaluation.metrics import DEPTH
from groundwire_cli.evaluation.report import dumps, format_table, write_chart
from groundwire_cli.evaluation.run import evaluate, resolve_model
from groundwire_cli.evaluation.services import PATHS


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-") or "dataset"


def _weights(text: str) -> dict[str, float]:
    weights: dict[str, float] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name.strip() not in PATHS or not value:
            raise argparse.ArgumentTypeError(
                f"{part!r}: use PATH=WEIGHT with PATH one of {', '.join(PATHS)}"
            )
        weight = float(value)
        if not math.isfinite(weight) or weight < 0:
            raise argparse.ArgumentTypeError(f"{part!r}: a weight is a non-negative number")
        weights[name.strip()] = weight
    return weights


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `groundwire eval retrieval`."""
    parser.add_argument("--dataset", type=Path, required=True, help="a BEIR-format folder")
    parser.add_argument("--split", default="train", help="qrels/SPLIT.tsv (default: %(default)s)")
    parser.add_argument(
        "--dev-fraction",
        type=float,
        default=0.2,
        help="share of the judged queries in the dev part, by a hash of the query id "
        "(default: %(default)s); the rest is the tune part",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON report (default: evals/retrieval-NAME.json); "
        "the chart is written beside it as .png",
    )
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=default_model_dir(user_environment()),
        help="embedder model folder; built (minilm) when missing (default: %(default)s)",
    )
    parser.add_argument(
        "--reranker-model-dir",
        type=Path,
        default=None,
        help="reranker model folder; without it the + rerank configuration is skipped",
    )
    parser.add_argument(
        "--limit-docs",
        type=_positive,
        default=None,
        help="ingest at most N documents (relevant ones first)",
    )
    parser.add_argument(
        "--limit-queries", type=_positive, default=None, help="evaluate the first N judged queries"
    )
    parser.add_argument(
        "--path-limit",
        type=int,
        default=100,
        help="candidates per path, at least 100 (default: %(default)s)",
    )
    parser.add_argument("--rrf-k", type=_positive, default=60, help="RRF k (default: %(default)s)")
    parser.add_argument(
        "--dense-floor",
        type=float,
        default=0.0,
        help="cosine floor of the dense path (default: %(default)s; the service's 0.3 is "
        "for answers, not rankings)",
    )
    parser.add_argument(
        "--weights",
        type=_weights,
        default=None,
        help="fixed weights for hybrid-weighted, e.g. dense=0.6,bm25=0.4 "
        "(default: chosen on the tune part)",
    )
    parser.add_argument(
        "--chunk-max-tokens",
        type=_positive,
        default=None,
        help="the retriever's chunk budget for this run (default: the retriever's own)",
    )


def run_command(args: argparse.Namespace) -> int:
    """`groundwire eval retrieval`: returns the exit code (2 for a bad dataset or option)."""
    if args.path_limit < DEPTH:
        print(f"error: --path-limit must be at least {DEPTH} for Recall@{DEPTH}", file=sys.stderr)
        return 2
    if not 0.0 <= args.dev_fraction <= 1.0:
        print("error: --dev-fraction must be between 0 and 1", file=sys.stderr)
        return 2
    try:
        dataset = load_beir(args.dataset, args.split)
        if args.limit_docs or args.limit_queries:
            dataset = limit_dataset(dataset, docs=args.limit_docs, queries=args.limit_queries)
            if not dataset.queries:
                raise DatasetError("the slice keeps no judged query; raise --limit-docs")
        resolve_model(args.model_dir)
    except EvaluationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    out: Path = args.out or Path("evals") / f"retrieval-{_slug(dataset.name)}.json"
    settings = EvalSettings(
        path_limit=args.path_limit,
        rrf_k=args.rrf_k,
        dense_floor=args.dense_floor,
        dev_fraction=args.dev_fraction,
        chunk_max_tokens=args.chunk_max_tokens,
        weights=args.weights,
    )
    print(
        f"{dataset.name}: {len(dataset.corpus)} documents, {len(dataset.queries)} judged "
        f"queries ({args.split}); dense floor {settings.dense_floor} for this evaluation",
        file=sys.stderr,
        flush=True,
    )
    report = evaluate(
        dataset, settings, model_dir=args.model_dir, reranker_model_dir=args.reranker_model_dir
    ).to_json()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(report) + "\n", encoding="utf-8")
    chart = out.with_suffix(".png")
    write_chart(report, chart)
    print(format_table(report))
    print(f"wrote {out} and {chart}")
    return 0
