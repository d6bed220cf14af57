"""One evaluation end to end: start the services on a temporary store, ingest, embed
the queries, choose the weighted fusion's weights on the tune part, search every
configuration and score it."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from groundwire.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from groundwire_cli.cluster import LocalCluster
from groundwire_cli.evaluation.ablation import (
    RERANK_DEPTH,
    WEIGHT_GRID,
    EvalSettings,
    ablation,
    weight_candidates,
)
from groundwire_cli.evaluation.beir import BeirDataset, EvaluationError, is_dev
from groundwire_cli.evaluation.metrics import (
    comparison,
    mean_metrics,
    per_query_metrics,
    percentile,
    ranking_to_run,
)
from groundwire_cli.evaluation.report import EvalReport
from groundwire_cli.evaluation.services import Searcher, embed_queries, ingest_corpus, run_config
from groundwire_cli.progress import progress
from groundwire_core.clients.embedder import EmbedderClient
from groundwire_core.grpc.client import create_channel, rpc_errors


def resolve_model(model_dir: Path) -> None:
    if (model_dir / "groundwire-model.json").exists():
        return
    print(
        f"no model in {model_dir}: building the minilm profile there "
        f"(`groundwire models build minilm --out {model_dir}`)…",
        file=sys.stderr,
        flush=True,
    )
    try:
        from groundwire_embedder.export import build_profile
    except ImportError:
        raise EvaluationError(
            f"no model in {model_dir}, and building one needs the export extra: "
            "pip install -c constraints.txt -e 'services/embedder[export]'"
        ) from None
    build_profile("minilm", model_dir, log=lambda line: print(line, file=sys.stderr))


async def _evaluate_async(
    cluster: LocalCluster,
    dataset: BeirDataset,
    settings: EvalSettings,
    reranker_configured: bool,
    timings: dict[str, float],
) -> EvalReport:
    dev = [q for q in dataset.queries if is_dev(q, settings.dev_fraction)]
    tune = [q for q in dataset.queries if not is_dev(q, settings.dev_fraction)]
    sets = {"dev": dev, "tune": tune, "all": list(dataset.queries)}
    retriever = create_channel(cluster.addr("retriever"))
    embedder_channel = create_channel(cluster.addr("embedder"))
    reranker = create_channel(cluster.addr("reranker")) if reranker_configured else None
    try:
        embedder = EmbedderClient(embedder_channel, timeout_s=120)
        info = await embedder.info()
        reranker_reason = "no reranker model is configured (pass --reranker-model-dir)"
        reranker_info: dict[str, Any] | None = None
        max_passages = RERANK_DEPTH
        if reranker is not None:
            stub = reranker_pb2_grpc.RerankerServiceStub(reranker)
            with rpc_errors("reranker"):
                rinfo = await stub.Info(reranker_pb2.InfoRequest(), timeout=30)
            if rinfo.ready:
                reranker_reason = ""
                reranker_info = {"model_id": rinfo.model_id, "profile": rinfo.profile}
                max_passages = rinfo.max_batch_passages or RERANK_DEPTH
            else:
                reranker_reason = "the reranker has no model loaded"

        started = time.perf_counter()
        with progress(total=len(dataset.corpus), desc="ingest", unit="doc") as bar:
            ingest = await ingest_corpus(retriever, dataset.corpus, bar)
        timings["ingest"] = round(time.perf_counter() - started, 2)

        started = time.perf_counter()
        with progress(total=len(dataset.queries), desc="embed queries", unit="q") as bar:
            queries = await embed_queries(embedder, dataset.queries, "sparse" in info.outputs, bar)
        timings["embed_queries"] = round(time.perf_counter() - started, 2)

        searcher = Searcher(retriever, reranker, settings, max_passages)
        configs = ablation(info, reranker_reason=reranker_reason)

        tuning: dict[str, Any] = {}
        weighted = next(c for c in configs if c.fusion == "weighted")
        if settings.weights is not None:
            weights: Mapping[str, float] = dict(settings.weights)
            tuning = {"weights": dict(weights), "source": "--weights"}
        elif not tune:
            weights = weight_candidates(weighted.paths)[len(WEIGHT_GRID) // 2]
            tuning = {"weights": dict(weights), "source": "no tune queries: equal weights"}
        else:
            started = time.perf_counter()
            by_id = {q.query_id: q for q in queries}
            tune_queries = [by_id[q] for q in tune]
            grid: list[dict[str, Any]] = []
            for candidate in weight_candidates(weighted.paths):
                trial = replace(weighted, weights=candidate)
                run = await run_config(searcher, trial, tune_queries, f"tune {trial.label}")
                scores = per_query_metrics(
                    {q: ranking_to_run(r, settings.depth) for q, r in run.rankings.items()},
                    {q: dataset.qrels[q] for q in tune},
                )
                mean = mean_metrics(scores, tune)
                assert mean is not None
                grid.append({"weights": candidate, "tune_nDCG@10": round(mean["nDCG@10"], 4)})
            best = max(grid, key=lambda g: g["tune_nDCG@10"])
            weights = best["weights"]
            tuning = {
                "weights": dict(weights),
                "source": "best nDCG@10 on the tune part",
                "grid": grid,
                "seconds": round(time.perf_counter() - started, 2),
            }
        configs = [replace(c, weights=weights) if c is weighted else c for c in configs]

        results: list[dict[str, Any]] = []
        per_query_all: dict[str, dict[str, dict[str, float]]] = {}
        for config in configs:
            entry: dict[str, Any] = {
                "name": config.name,
                "label": config.label,
                "paths": list(config.paths),
                "fusion": config.fusion if len(config.paths) > 1 else None,
                "weights": dict(config.weights) or None,
                "rerank": config.rerank,
            }
            if config.skipped:
                results.append({**entry, "status": "skipped", "reason": config.skipped})
                continue
            started = time.perf_counter()
            run = await run_config(searcher, config, queries, config.label)
            seconds = time.perf_counter() - started
            per_query = per_query_metrics(
                {q: ranking_to_run(r, settings.depth) for q, r in run.rankings.items()},
                dataset.qrels,
            )
            per_query_all[config.name] = per_query
            means = {name: mean_metrics(per_query, ids) for name, ids in sets.items()}
            results.append(
                {
                    **entry,
                    "status": "ok",
                    "metrics": {
                        name: ({k: round(v, 4) for k, v in m.items()} if m else None)
                        for name, m in means.items()
                    },
                    "latency_ms": {
                        "p50": round(percentile(run.ms, 50), 2),
                        "p95": round(percentile(run.ms, 95), 2),
                    },
                    "seconds": round(seconds, 2),
                    "per_query": {
                        "query_ids": list(dataset.queries),
                        **{
                            name: [round(values[q], 4) for q in dataset.queries]
                            for name, values in per_query.items()
                        },
                    },
                }
            )
            timings[f"search_{config.name}"] = round(seconds, 2)
    finally:
        for channel in (retriever, embedder_channel, reranker):
            if channel is not None:
                await channel.close()
    return EvalReport(
        dataset=dataset,
        settings=settings,
        query_sets=sets,
        model={
            "embedder": info.model_id,
            "profile": info.profile,
            "dense_dims": info.dense_dims,
            "max_tokens": info.max_tokens,
            "outputs": sorted(info.outputs),
            "reranker": reranker_info,
        },
        ingest=ingest,
        configurations=results,
        tuning=tuning,
        timings=timings,
        comparison=comparison(results, per_query_all, dev),
    )


def evaluate(
    dataset: BeirDataset,
    settings: EvalSettings,
    *,
    model_dir: Path,
    reranker_model_dir: Path | None = None,
) -> EvalReport:
    """Starts the services on a temporary store, ingests, searches, scores.

    Raises ClusterError when a service does not start, GroundwireError when a call
    fails.
    """
    extra_env: dict[str, str] = {}
    if settings.chunk_max_tokens is not None:
        extra_env["GROUNDWIRE_RETRIEVER_CHUNK_MAX_TOKENS"] = str(settings.chunk_max_tokens)
    if reranker_model_dir is not None:
        extra_env["GROUNDWIRE_RERANKER_MODEL_DIR"] = str(reranker_model_dir)
    names = ("embedder", "retriever") + (("reranker",) if reranker_model_dir else ())
    timings: dict[str, float] = {}
    total = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="groundwire-eval-") as tmp:
        cluster = LocalCluster.with_free_ports(
            Path(tmp) / "run", model_dir, Path(tmp) / "qdrant", extra_env=extra_env
        )
        with cluster:
            started = time.perf_counter()
            print(f"starting {', '.join(names)} (store in {tmp})…", file=sys.stderr, flush=True)
            cluster.start(names)
            cluster.wait_ready(names=names)
            timings["start_services"] = round(time.perf_counter() - started, 2)
            report = asyncio.run(
                _evaluate_async(cluster, dataset, settings, reranker_model_dir is not None, timings)
            )
    timings["total"] = round(time.perf_counter() - total, 2)
    return report
