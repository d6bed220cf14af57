"""The evaluation's report: the JSON document, the text table and the chart."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ir_measures
import numpy as np

from groundwire_cli.evaluation.ablation import EvalSettings
from groundwire_cli.evaluation.beir import BeirDataset
from groundwire_cli.evaluation.metrics import METRICS


@dataclass
class EvalReport:
    """Everything the JSON holds; ``to_json`` shapes it."""

    dataset: BeirDataset
    settings: EvalSettings
    query_sets: dict[str, list[str]]
    model: dict[str, Any]
    ingest: dict[str, Any]
    configurations: list[dict[str, Any]]
    tuning: dict[str, Any]
    timings: dict[str, float]
    comparison: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        d = self.dataset
        s = self.settings
        return {
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "dataset": {
                "name": d.name,
                "path": str(d.path),
                "split": d.split,
                "documents": len(d.corpus),
                "queries": len(d.queries),
                "judgements": d.judgements,
                "unjudged_queries": d.unjudged_queries,
                "unknown_judged_docs": d.unknown_judged_docs,
            },
            "query_sets": {
                "dev_fraction": s.dev_fraction,
                "rule": "dev when sha256(query id)[:8] / 2**64 < dev_fraction; the rest is tune",
                **{name: len(ids) for name, ids in self.query_sets.items()},
            },
            "model": self.model,
            "settings": {
                "path_limit": s.path_limit,
                "result_limit": "path_limit x paths",
                "depth": s.depth,
                "rrf_k": s.rrf_k,
                "dense_floor": s.dense_floor,
                "chunk_max_tokens": s.chunk_max_tokens,
                "weights": dict(s.weights) if s.weights else "chosen on the tune part",
                "rerank_depth": s.rerank_depth,
                "document_score": "rank of the document's best chunk",
                "metrics_library": f"ir-measures {ir_measures.__version__}",
            },
            "ingest": self.ingest,
            "timings_s": self.timings,
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
            "configurations": self.configurations,
            "tuning": self.tuning,
            "comparison": self.comparison,
        }


def format_table(report: dict[str, Any]) -> str:
    """The ablation as a text table: dev and all-query metrics and latency."""
    d = report["dataset"]
    sets = report["query_sets"]
    lines = [
        f"retrieval ablation — {d['name']} ({d['split']}): {d['documents']} documents, "
        f"{d['queries']} judged queries (dev {sets['dev']}, tune {sets['tune']}); "
        f"model {report['model']['embedder']}",
    ]
    header = (
        f"{'configuration':<40} {'dev nDCG@10':>11} {'R@100':>6} {'MRR@10':>6} | "
        f"{'all nDCG@10':>11} {'R@100':>6} {'MRR@10':>6} | {'p50 ms':>7}"
    )
    lines += [header, "-" * len(header)]

    def cells(metrics: Mapping[str, float] | None) -> str:
        if not metrics:
            return f"{'—':>11} {'—':>6} {'—':>6}"
        return (
            f"{metrics['nDCG@10']:>11.3f} {metrics['Recall@100']:>6.3f} {metrics['MRR@10']:>6.3f}"
        )

    for c in report["configurations"]:
        if c["status"] != "ok":
            lines.append(f"{c['label']:<40} skipped: {c['reason']}")
            continue
        m = c["metrics"]
        lines.append(
            f"{c['label']:<40} {cells(m['dev'])} | {cells(m['all'])} | "
            f"{c['latency_ms']['p50']:>7.1f}"
        )
    comparison = report.get("comparison") or {}
    for name in ("hybrid-rrf", "hybrid-weighted"):
        if name in comparison:
            c = comparison[name]
            lines.append(
                f"{name} vs best single path ({comparison['best_single']}) on dev nDCG@10: "
                f"{c['delta']:+.4f} (wins {c['wins']}, losses {c['losses']}, ties {c['ties']}; "
                f"paired randomization p = {c['p_value']:.3f})"
            )
    return "\n".join(lines)


def write_chart(report: dict[str, Any], path: Path) -> None:
    """A grouped bar chart: one panel per query set, one bar per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ran = [c for c in report["configurations"] if c["status"] == "ok"]
    panels = [s for s in ("dev", "all") if ran and ran[0]["metrics"][s]]
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(6.5 * max(1, len(panels)), 5.4))
    axes_list = list(np.atleast_1d(axes))
    width = 0.8 / max(1, len(ran))
    for ax, panel in zip(axes_list, panels, strict=False):
        for i, config in enumerate(ran):
            values = [config["metrics"][panel][m] for m in METRICS]
            xs = [j + (i - (len(ran) - 1) / 2) * width for j in range(len(METRICS))]
            bars = ax.bar(xs, values, width, label=config["label"])
            ax.bar_label(bars, fmt="%.3f", fontsize=6, rotation=90, padding=2)
        ax.set_xticks(range(len(METRICS)), list(METRICS))
        ax.set_ylim(0, 1.12)
        n = report["query_sets"][panel]
        ax.set_title(f"{panel} queries (n={n})")
        ax.grid(axis="y", alpha=0.3)
    skipped = [c["name"] for c in report["configurations"] if c["status"] != "ok"]
    d = report["dataset"]
    fig.suptitle(
        f"{d['name']} ({d['split']}) — {report['model']['embedder']}"
        + (f"; skipped: {', '.join(skipped)}" if skipped else ""),
        fontsize=10,
    )
    handles, labels = axes_list[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(3, max(1, len(labels))), fontsize=8)
    fig.tight_layout(rect=(0.0, 0.1, 1.0, 1.0))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def dumps(value: Any, indent: int = 0) -> str:
    """JSON with objects indented and lists of scalars kept on one line (per-query
    columns stay compact)."""
    pad = "  " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{pad}{json.dumps(str(k))}: {dumps(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        items = [f"{pad}{dumps(v, indent + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + "  " * indent + "]"
    return json.dumps(value, ensure_ascii=False)
