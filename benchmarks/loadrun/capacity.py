"""Capacity: requests per second per core, per request type, and where it saturates.

Two figures per step, both honest about a shared machine:

* ``requests_per_s_per_core``: the step's requests/s over the machine's usable cores.
  The load generator (locust) and the fake LLM run on the same cores, so this is what
  the whole machine sustains, the generator included.
* ``requests_per_cpu_s``: requests over the CPU seconds the service processes
  (``/proc/<pid>/stat`` user + system time, read before and after the step) spent:
  requests/s per fully busy core of the stack alone, which carries to a bigger machine
  as long as nothing else becomes the bottleneck.

The saturation point of a request type is the step with the most requests/s; the
report says whether a step past it added less than 10 % (saturated) or the sweep
stopped before the curve flattened.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
FLAT = 1.10  # a step past the best adding less than 10 % means the curve is flat


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of one process so far (None when it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name may hold spaces: the fields after it start past the last ')'
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        idle = values[3] + values[4]  # idle + iowait
        total = sum(values[:8])
        return (total - idle) / _TICKS, total / _TICKS
    return 0.0, 0.0


def sample(pids: dict[str, int]) -> dict[str, Any]:
    return {
        "processes": {name: cpu_seconds(pid) for name, pid in pids.items()},
        "machine": machine_busy(),
    }


def step_cpu(before: dict[str, Any], after: dict[str, Any], requests: int) -> dict[str, Any]:
    """CPU spent by each service process during a step and requests per CPU second."""
    spent: dict[str, float] = {}
    for name, start in before["processes"].items():
        end = after["processes"].get(name)
        if start is not None and end is not None:
            spent[name] = round(end - start, 2)
    stack = sum(spent.values())
    busy = after["machine"][0] - before["machine"][0]
    total = after["machine"][1] - before["machine"][1]
    return {
        "service_cpu_s": spent,
        "stack_cpu_s": round(stack, 2),
        "machine_busy_share": round(busy / total, 3) if total > 0 else None,
        "requests_per_cpu_s": round(requests / stack, 3) if stack > 0 else None,
    }


def saturation(steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The step with the most requests/s, and whether the curve had flattened there."""
    if not steps:
        return None
    best = max(steps, key=lambda s: s["requests_per_s"])
    later = [s for s in steps if s["users"] > best["users"]]
    earlier = [s for s in steps if s["users"] < best["users"]]
    flat = bool(earlier) and best["requests_per_s"] < FLAT * earlier[-1]["requests_per_s"]
    e2e: dict[str, Any] = next(iter(best["end_to_end"].values()), {})
    return {
        "users": best["users"],
        "requests_per_s": best["requests_per_s"],
        "requests_per_s_per_core": best["requests_per_s_per_core"],
        "requests_per_cpu_s": best["cpu"]["requests_per_cpu_s"],
        "p95_ms": e2e.get("p95_ms"),
        # a stage that fell back (e.g. the reranker shedding load) did less work: a rate
        # bought with fallbacks is not the rate at full quality
        "stage_fallbacks": {
            name: row["fallbacks"] for name, row in best["stages"].items() if row["fallbacks"]
        },
        "saturated": bool(later) or flat,
        "note": "a later step was no faster"
        if later
        else "the last step added < 10 %"
        if flat
        else "best at the last step: the sweep may stop short of saturation",
    }


def shed(step: dict[str, Any], lightest: dict[str, Any]) -> dict[str, int]:
    """Stages that fell back more often than at the lightest step (by over 1 % of the
    requests): work the stack dropped under load (a full reranker queue, an embedder
    past its deadline). A fallback the lightest step has too (a judge that never
    answers) is how the stack runs, not load."""
    out: dict[str, int] = {}
    for name, row in step["stages"].items():
        base = lightest["stages"].get(name)
        share = base["fallbacks"] / base["count"] if base and base["count"] else 0.0
        if row["fallbacks"] - share * row["count"] > 0.01 * row["count"]:
            out[name] = row["fallbacks"]
    return out


def summarize(steps: list[dict[str, Any]], kinds: list[str]) -> dict[str, Any]:
    """Per request type: the fastest step at full quality (no stage shedding work) —
    the saturation point quoted — and the fastest step whatever it shed."""
    out: dict[str, Any] = {}
    for kind in kinds:
        mine = sorted((s for s in steps if s["kind"] == kind), key=lambda s: s["users"])
        if not mine:
            continue
        for step in mine:
            step["shed_under_load"] = shed(step, mine[0])
        full = saturation([s for s in mine if not s["shed_under_load"]])
        if full is not None:
            past = [s for s in mine if s["users"] > full["users"]]
            if past and past[0]["shed_under_load"]:
                full["saturated"] = True
                full["note"] = (
                    f"at {past[0]['users']} users the stack sheds work "
                    f"({past[0]['shed_under_load']})"
                )
        out[kind] = {"full_quality": full, "fastest": saturation(mine)}
    return out


def format_capacity(report: dict[str, Any]) -> str:
    lines = [
        "kind    users  req/s  req/s/core  req/cpu-s  stack cpu-s  busy   failed  5xx   "
        "e2e p50/p95 ms     shed under load"
    ]
    for s in report["steps"]:
        e2e = next(iter(s["end_to_end"].values()), None)
        pair = f"{e2e['p50_ms']:>7.0f} / {e2e['p95_ms']:<7.0f}" if e2e else "-"
        per_cpu = s["cpu"]["requests_per_cpu_s"]
        busy = s["cpu"]["machine_busy_share"]
        lines.append(
            f"{s['kind']:<7} {s['users']:>5}  {s['requests_per_s']:>5.1f}  "
            f"{s['requests_per_s_per_core']:>10.2f}  "
            f"{(f'{per_cpu:.2f}' if per_cpu is not None else '-'):>9}  "
            f"{s['cpu']['stack_cpu_s']:>11.1f}  {(f'{busy:.0%}' if busy is not None else '-'):>5}  "
            f"{s['failures']:>6}  {s['http_5xx']:>3}   {pair:<18} "
            f"{', '.join(s.get('shed_under_load', {})) or '-'}"
        )
    for kind, points in report.get("capacity", {}).items():
        for which, sat in points.items():
            if not sat:
                lines.append(f"saturation {kind} ({which}): none")
                continue
            lines.append(
                f"saturation {kind} ({which.replace('_', ' ')}): {sat['requests_per_s']:.1f} "
                f"req/s at {sat['users']} users = "
                f"{sat['requests_per_s_per_core']:.2f} req/s per core "
                f"({sat['requests_per_cpu_s']} per stack CPU-second; {sat['note']})"
                + (f"; fallbacks {sat['stage_fallbacks']}" if sat["stage_fallbacks"] else "")
            )
    return "\n".join(lines)


def write_capacity_chart(report: dict[str, Any], path: Path) -> None:
    """Requests/s per core against users per request type, and each type's per-stage
    p50/p95."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(report["capacity"])
    fig, axes = plt.subplots(1, 1 + len(kinds), figsize=(6 * (1 + len(kinds)), 5))
    ax0 = axes[0]
    for i, kind in enumerate(kinds):
        steps = [s for s in report["steps"] if s["kind"] == kind]
        users = [s["users"] for s in steps]
        ax0.plot(
            users,
            [s["requests_per_s_per_core"] for s in steps],
            "o-",
            color=f"C{i}",
            label=f"{kind}: req/s per machine core",
        )
        ax0.plot(
            users,
            [s["cpu"]["requests_per_cpu_s"] for s in steps],
            "s--",
            color=f"C{i}",
            alpha=0.6,
            label=f"{kind}: req per stack CPU-second",
        )
        full = report["capacity"][kind]["full_quality"]
        if full:  # the quoted point: the fastest step that shed no work
            ax0.plot(
                [full["users"]],
                [full["requests_per_s_per_core"]],
                "*",
                markersize=16,
                color=f"C{i}",
                label=f"{kind}: saturation at full quality",
            )
    ax0.set_title("capacity")
    ax0.set_xlabel("concurrent users")
    ax0.set_xscale("log", base=2)
    ax0.set_xticks(report["config"]["users"], [str(u) for u in report["config"]["users"]])
    ax0.grid(True, which="both", alpha=0.3)
    ax0.legend(fontsize=7)
    for ax, kind in zip(axes[1:], kinds, strict=True):
        steps = [s for s in report["steps"] if s["kind"] == kind]
        users = [s["users"] for s in steps]
        names = [n for n in report["stage_order"] if any(n in s["stages"] for s in steps)]
        rows = [("stages", n) for n in names] + [("end_to_end", kind)]
        for i, (key, name) in enumerate(rows):
            got = [s[key].get(name) for s in steps]
            color = f"C{i % 10}"
            ax.plot(
                users,
                [g["p50_ms"] if g else None for g in got],
                "o-",
                color=color,
                label=f"{name} p50",
            )
            ax.plot(
                users,
                [g["p95_ms"] if g else None for g in got],
                "s--",
                color=color,
                alpha=0.6,
                label=f"{name} p95",
            )
        ax.set_title(f"{kind}: per stage and end to end")
        ax.set_xlabel("concurrent users")
        ax.set_ylabel("ms (log above 1 ms)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(users, [str(u) for u in users])
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_ylim(bottom=0)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    m = report["machine"]
    procs = report["topology"]["processes"]
    fig.suptitle(
        f"Groundwire capacity ({report['created'][:10]}): {m['cores']} cores, {m['cpu_model']}, "
        f"{m['memory_gib']} GiB; {procs['gateway']} gateways, {procs['orchestrator']} "
        "orchestrators, 1 embedder, 1 reranker, 1 retriever",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
