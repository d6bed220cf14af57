"""One concurrency step: headless locust as its own process (its gevent never enters
this one) against the gateway, and the step's figures from the locustfile's summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from loadrun.inputs import ROOT

LOCUSTFILE = ROOT / "benchmarks" / "locustfile.py"
HTTP_TYPES = ("POST", "GET")  # locust rows of real requests; "stage"/"client" are ours


def summarize_step(users: int, duration_s: float, summary: dict[str, Any]) -> dict[str, Any]:
    """One step of the report from the locustfile's summary (locust's stats entries,
    taken when it quit, and its counters)."""
    entries = summary["entries"]
    http = [e for e in entries if e["type"] in HTTP_TYPES]
    requests = sum(e["count"] for e in http)
    failed = sum(e["failures"] for e in http)
    fallbacks = summary.get("stage_fallbacks", {})

    def figures(e: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in e.items() if k not in ("type", "name")}

    return {
        "users": users,
        "duration_s": duration_s,
        "requests": requests,
        "failures": failed,
        "requests_per_s": round(sum(e["requests_per_s"] for e in http), 3),
        "error_rate": round(failed / requests, 4) if requests else None,
        "http_5xx": sum(int(v) for v in summary.get("http_5xx", {}).values()),
        # requests still running when --stop-timeout ran out: killed, in no figure
        "cut_at_stop": sum(
            max(0, int(n) - sum(e["count"] for e in http if e["name"] == route))
            for route, n in summary.get("started", {}).items()
        ),
        "status_codes": summary.get("status", {}),
        "error_events": summary.get("error_events", {}),
        "end_to_end": {e["name"]: figures(e) for e in http},
        "client": {e["name"]: figures(e) for e in entries if e["type"] == "client"},
        "stages": {
            e["name"]: {**figures(e), "fallbacks": int(fallbacks.get(e["name"], 0))}
            for e in entries
            if e["type"] == "stage"
        },
        "fallback_reasons": summary.get("fallback_reasons", {}),
        "answer_modes": summary.get("answer_modes", {}),
        "failure_kinds": {
            f"{e['name']}: {e['error']}"[:200]: e["occurrences"] for e in summary.get("errors", [])
        },
    }


def run_locust(
    host: str,
    users: int,
    duration_s: float,
    work_dir: Path,
    env: dict[str, str],
    stop_timeout_s: float,
    name: str | None = None,
) -> dict[str, Any]:
    """One headless locust run (its own process); the step's figures. ``name`` (default
    ``u<users>``) names its files in ``work_dir``."""
    prefix = work_dir / (name or f"u{users}")
    summary_path = work_dir / f"{name or f'u{users}'}-summary.json"
    step_env = {**os.environ, **env, "GW_LOAD_SUMMARY_FILE": str(summary_path)}
    command = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "-u",
        str(users),
        "-r",
        str(users),
        "-t",
        f"{duration_s:g}s",
        "--stop-timeout",
        f"{stop_timeout_s:g}",
        "--host",
        host,
        "--csv",
        str(prefix),
        "--only-summary",
        "--loglevel",
        "WARNING",
    ]
    load_before = os.getloadavg()[0]
    # bounded: the run's length, the stop timeout and a margin for start-up
    limit_s = duration_s + stop_timeout_s + 60
    done = subprocess.run(
        command, env=step_env, capture_output=True, text=True, timeout=limit_s, check=False
    )
    if not summary_path.exists():
        raise RuntimeError(
            f"locust ({users} users) wrote no results (exit {done.returncode}):\n"
            f"{done.stderr[-3000:]}"
        )
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    step = summarize_step(users, duration_s, summary)
    step["load_average_1m"] = {
        "before": round(load_before, 2),
        "after": round(os.getloadavg()[0], 2),
    }
    step["locust_exit_code"] = done.returncode
    return step
