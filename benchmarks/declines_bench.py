"""Decline precision and recall of the chain without an LLM, per labelled set.

Each set (``evals/declines/*.yaml``: a corpus folder, in-scope and out-of-scope
questions) gets a local cluster of its own (MiniLM, a fresh embedded store, no LLM,
the settings as configured unless ``--env`` overrides them); every question is asked
through ``POST /v1/chat`` and the coverage stage's evidence (dense, terms) is read
from its stage report, with the answer's mode.

Reported per set: precision (declined questions that were out of scope) and recall
(out-of-scope questions declined) of the chain's declines as served; with ``--fit``
also the (dense weight, threshold) pair that best separates the pooled sets, found on
a grid (how the default was chosen; never run by a test).

    .venv/bin/python benchmarks/declines_bench.py evals/declines/sample-corpus.yaml \\
        evals/declines/docs.yaml --fit --out benchmarks/results/declines-minilm.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

from groundwire_cli.chat import ask
from groundwire_cli.demo import serving_corpus

ROOT = Path(__file__).resolve().parent.parent
MIN_MARGIN = 0.05
"""The least gap the fit accepts between the lowest in-scope evidence and the highest
out-of-scope evidence it declines: a threshold closer to a question than this would
flip on a rephrasing."""


@dataclass(frozen=True)
class Asked:
    question: str
    in_scope: bool
    mode: str
    dense: float
    terms: float
    coverage: dict[str, str]


def _ask_all(spec: dict[str, Any], url: str, collection: str) -> list[Asked]:
    labelled = [(q, True) for q in spec["in_scope"]] + [(q, False) for q in spec["out_of_scope"]]
    out = []
    with httpx.Client(base_url=url, timeout=120.0) as client:
        for question, in_scope in labelled:
            outcome = ask(client, question, collection=collection)
            stage = outcome.stage("coverage")
            details = dict(stage.details) if stage else {}
            out.append(
                Asked(
                    question,
                    in_scope,
                    outcome.mode or "error",
                    float(details.get("dense", "0") or 0),
                    float(details.get("terms", "0") or 0),
                    details,
                )
            )
            print(
                f"  {'in ' if in_scope else 'out'} {outcome.mode or 'error':10} "
                f"dense {details.get('dense', '-'):>6} terms {details.get('terms', '-'):>6}  "
                f"{question}",
                flush=True,
            )
    return out


def precision_recall(declined: list[bool], out_of_scope: list[bool]) -> dict[str, float]:
    """Decline precision and recall (1.0 when there is nothing to be wrong about)."""
    hits = sum(d and o for d, o in zip(declined, out_of_scope, strict=True))
    n_declined, n_out = sum(declined), sum(out_of_scope)
    return {
        "precision": hits / n_declined if n_declined else 1.0,
        "recall": hits / n_out if n_out else 1.0,
        "declined": n_declined,
        "out_of_scope_declined": hits,
        "out_of_scope": n_out,
        "in_scope_declined": n_declined - hits,
    }


def fit(asked: list[Asked]) -> dict[str, float]:
    """The (weight, threshold) with the most out-of-scope questions declined while no
    in-scope one is and the gap is at least MIN_MARGIN (questions the names rule
    declines already do not count); ties go to the widest gap, the threshold halfway
    in it."""
    best: tuple[int, float, float, float] | None = None
    judged = [a for a in asked
              if not (a.coverage.get("unknown_names") or a.coverage.get("passing_names"))]
    for w in [i / 20 for i in range(21)]:
        ev_in = [w * a.dense + (1 - w) * a.terms for a in judged if a.in_scope]
        ev_out = [w * a.dense + (1 - w) * a.terms for a in judged if not a.in_scope]
        below = [e for e in ev_out if e < min(ev_in) - MIN_MARGIN]
        if not below:
            continue
        key = (len(below), round(min(ev_in) - max(below), 6), w, (min(ev_in) + max(below)) / 2)
        if best is None or key[:2] > best[:2]:
            best = key
    if best is None:
        return {}
    return {"declined_out_of_scope": best[0], "margin": best[1], "dense_weight": best[2],
            "threshold": round(best[3], 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="+", type=Path)
    parser.add_argument("--model-dir", type=Path, default=ROOT / "var" / "models" / "minilm")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--fit", action="store_true", help="also fit weight and threshold")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="extra orchestrator settings for the cluster")
    args = parser.parse_args()
    extra = {"GROUNDWIRE_GATEWAY_RATE_LIMIT_PER_MIN": "0"}
    extra.update(e.split("=", 1) for e in args.env)
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": str(args.model_dir.name),
        "llm": None,
        "env": extra,
        "sets": {},
    }
    pooled: list[Asked] = []
    for path in args.sets:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
        corpus = ROOT / spec["corpus"]
        print(f"{spec['name']}: {corpus}", flush=True)
        with tempfile.TemporaryDirectory(prefix="groundwire-declines-") as tmp, serving_corpus(
            model_dir=args.model_dir,
            run_dir=Path(tmp) / "run",
            data_path=Path(tmp) / "qdrant",
            corpus=corpus,
            collection=spec["collection"],
            extra_env=extra,
        ) as cluster:
            asked = _ask_all(spec, cluster.gateway_url, spec["collection"])
        pooled += asked
        served = precision_recall(
            [a.mode == "declined" for a in asked], [not a.in_scope for a in asked]
        )
        print(f"{spec['name']}: decline precision {served['precision']:.2f}, "
              f"recall {served['recall']:.2f} ({served['out_of_scope_declined']} of "
              f"{served['out_of_scope']} out of scope declined, {served['in_scope_declined']} "
              "in scope declined)", flush=True)
        results["sets"][spec["name"]] = {
            "file": str(path),
            "served": served,
            "questions": [asdict(a) for a in asked],
        }
    if args.fit:
        results["fit"] = fit(pooled)
        print(f"fit (pooled): {results['fit']}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
