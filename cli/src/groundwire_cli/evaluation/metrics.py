"""Scoring rankings with ir-measures, and the paired significance test between them.

The retriever returns chunks; a document ranks where its best chunk ranks.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import ir_measures
import numpy as np

DEPTH = 100
"""Documents kept per query: the deepest cut-off of the metrics (Recall@100)."""

METRICS: dict[str, Any] = {
    "nDCG@10": ir_measures.nDCG @ 10,
    "Recall@100": ir_measures.R @ 100,
    "MRR@10": ir_measures.RR @ 10,
}
_METRIC_NAMES = {measure: name for name, measure in METRICS.items()}


def ranking_to_run(doc_ids: Iterable[str], depth: int = DEPTH) -> dict[str, float]:
    """A ranking (best first, repeats allowed) as an ir-measures run for one query.

    The first occurrence of a document is its best chunk. Scores are derived from
    ranks (strictly decreasing), so the metrics see exactly the service's order —
    including its tie-breaks, which raw fused scores (RRF ties are common) would lose.
    """
    ranked: list[str] = []
    seen: set[str] = set()
    for doc_id in doc_ids:
        if doc_id not in seen:
            seen.add(doc_id)
            ranked.append(doc_id)
            if len(ranked) == depth:
                break
    return {doc_id: float(len(ranked) - i) for i, doc_id in enumerate(ranked)}


def per_query_metrics(
    run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, float]]:
    """metric -> query id -> value, for every query in ``qrels``; a query the run has
    nothing for scores 0 (it is never left out of the mean)."""
    values = {name: dict.fromkeys(qrels, 0.0) for name in METRICS}
    judged_run = {qid: dict(docs) for qid, docs in run.items() if qid in qrels and docs}
    for metric in ir_measures.iter_calc(list(METRICS.values()), dict(qrels), judged_run):
        values[_METRIC_NAMES[metric.measure]][str(metric.query_id)] = float(metric.value)
    return values


def mean_metrics(
    per_query: Mapping[str, Mapping[str, float]], query_ids: Sequence[str]
) -> dict[str, float] | None:
    """The mean of each metric over ``query_ids``; None when there are none."""
    if not query_ids:
        return None
    return {
        name: sum(values[q] for q in query_ids) / len(query_ids)
        for name, values in per_query.items()
    }


def paired_randomization_p(a: Sequence[float], b: Sequence[float], rounds: int = 10_000) -> float:
    """Two-sided p-value of a paired randomization test on mean(a - b) (fixed seed)."""
    diffs = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if diffs.size == 0 or not diffs.any():
        return 1.0
    observed = abs(diffs.mean())
    signs = np.random.default_rng(0).choice((-1.0, 1.0), size=(rounds, diffs.size))
    extreme = np.count_nonzero(np.abs((signs * diffs).mean(axis=1)) >= observed - 1e-12)
    return float((extreme + 1) / (rounds + 1))


def comparison(
    configs: Sequence[dict[str, Any]],
    per_query: Mapping[str, Mapping[str, Mapping[str, float]]],
    dev: Sequence[str],
) -> dict[str, Any]:
    """Each hybrid vs the best single path on dev nDCG@10, with a paired test."""
    ran = {c["name"]: c for c in configs if c["status"] == "ok" and c["metrics"]["dev"]}
    singles = [ran[n] for n in ("bm25", "dense", "sparse") if n in ran]
    hybrids = [ran[n] for n in ("hybrid-rrf", "hybrid-weighted") if n in ran]
    if not singles or not hybrids or not dev:
        return {}
    best_single = max(singles, key=lambda c: c["metrics"]["dev"]["nDCG@10"])
    out: dict[str, Any] = {
        "metric": "nDCG@10",
        "query_set": "dev",
        "best_single": best_single["name"],
    }
    for hybrid in hybrids:
        a = [per_query[hybrid["name"]]["nDCG@10"][q] for q in dev]
        b = [per_query[best_single["name"]]["nDCG@10"][q] for q in dev]
        out[hybrid["name"]] = {
            "delta": round(statistics.fmean(a) - statistics.fmean(b), 4),
            "wins": sum(x > y for x, y in zip(a, b, strict=True)),
            "losses": sum(x < y for x, y in zip(a, b, strict=True)),
            "ties": sum(x == y for x, y in zip(a, b, strict=True)),
            "p_value": round(paired_randomization_p(a, b), 4),
        }
    return out


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else 0.0
