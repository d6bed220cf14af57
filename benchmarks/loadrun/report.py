"""The load report's chart and text tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

STAGE_ORDER = ("analysis", "retrieval", "rerank", "screening", "listwise", "answer", "citations")


def write_chart(report: dict[str, Any], path: Path) -> None:
    """p50/p95 per stage and end to end, against users."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = report["steps"]
    users = [s["users"] for s in steps]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))

    def series(key: str, name: str) -> tuple[list[Any], list[Any]]:
        rows = [s[key].get(name) for s in steps]
        return (
            [r["p50_ms"] if r else None for r in rows],
            [r["p95_ms"] if r else None for r in rows],
        )

    stage_names = [n for n in report["stage_order"] if any(n in s["stages"] for s in steps)]
    panels = (
        (
            axes[0],
            "per stage (the responses' stage reports)",
            [("stages", n, n) for n in stage_names],
        ),
        (
            axes[1],
            "end to end (client)",
            [("end_to_end", n, n) for n in sorted({n for s in steps for n in s["end_to_end"]})]
            + [("client", n, n) for n in sorted({n for s in steps for n in s["client"]})],
        ),
    )
    for ax, title, lines in panels:
        for i, (key, name, label) in enumerate(lines):
            color = f"C{i % 10}"
            p50, p95 = series(key, name)
            ax.plot(users, p50, "o-", color=color, label=f"{label} p50")
            ax.plot(users, p95, "s--", color=color, alpha=0.6, label=f"{label} p95")
        ax.set_title(title)
        ax.set_xlabel("concurrent users")
        ax.set_ylabel("ms (log above 1 ms)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(users, [str(u) for u in users])
        ax.set_yscale("symlog", linthresh=1.0)  # some stages take well under 1 ms
        ax.set_ylim(bottom=0)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    m = report["machine"]
    fig.suptitle(
        f"Groundwire load ({report['created'][:10]}): {m['cores']} cores, {m['cpu_model']}, "
        f"fake LLM TTFT {report['config']['fake_llm']['ttft_s']:g}s",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def format_table(report: dict[str, Any]) -> str:
    steps = report["steps"]
    lines = [
        "users  req/s   requests  failed  5xx  cut  err%   search p50/p95 ms   chat p50/p95 ms",
    ]
    for s in steps:
        e2e = s["end_to_end"]

        def pair(name: str, e2e: dict[str, Any] = e2e) -> str:
            row = e2e.get(name)
            return f"{row['p50_ms']:>7.0f} / {row['p95_ms']:<7.0f}" if row else f"{'-':>17}"

        rate = f"{100 * s['error_rate']:.2f}" if s["error_rate"] is not None else "-"
        lines.append(
            f"{s['users']:>5}  {s['requests_per_s']:>5.1f}  {s['requests']:>8}  "
            f"{s['failures']:>6}  {s['http_5xx']:>3}  {s['cut_at_stop']:>3}  {rate:>5}   "
            f"{pair('search')}   "
            f"{pair('chat')}"
        )
    stage_names = [n for n in report["stage_order"] if any(n in s["stages"] for s in steps)]
    lines.append("")
    lines.append(
        "per stage p50 / p95 ms (fallbacks)   "
        + "".join(f"{str(s['users']) + ' users':>24}" for s in steps)
    )
    for name in stage_names:
        cells = []
        for s in steps:
            row = s["stages"].get(name)
            cells.append(
                f"{row['p50_ms']:>8.0f} / {row['p95_ms']:<6.0f}({row['fallbacks']:>4})"
                if row
                else f"{'-':>24}"
            )
        lines.append(f"{name:<36}" + "".join(f"{c:>24}" for c in cells))
    for name in sorted({n for s in steps for n in s["client"]}):
        cells = []
        for s in steps:
            row = s["client"].get(name)
            cells.append(f"{row['p50_ms']:>8.0f} / {row['p95_ms']:<12.0f}" if row else "-")
        lines.append(f"{'client ' + name:<36}" + "".join(f"{c:>24}" for c in cells))
    return "\n".join(lines)


def format_throughput(t: dict[str, Any]) -> str:
    lines = []
    emb = t.get("embedder")
    if emb:
        for shape in ("query", "passage"):
            c = emb[shape]
            lines.append(
                f"embedder {emb['model_id']} {shape}: {c['texts_per_s']:.0f} texts/s at batch 32 "
                f"(~{c['mean_tokens_per_text']} tokens/text, {c['tokens_per_s']:.0f} tokens/s)"
            )
    rr = t.get("reranker")
    if rr:
        lines.append(
            f"reranker {rr['model_id']}: {rr['pairs_per_s']:.0f} pairs/s, 50 per call "
            f"(~{rr['mean_tokens_per_pair']} tokens/pair)"
            + (" -- tiny random model: mechanics only" if rr["mechanics_only"] else "")
        )
    return "\n".join(lines)
