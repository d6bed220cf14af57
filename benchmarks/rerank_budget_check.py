"""Does one search on an idle machine get its cross-encoder within the rerank budget?

Starts the local cluster (as `groundwire up` does) with the given embedder and reranker
folders — the full-size BGE-M3 and bge-reranker-v2-m3 int8 cost models by default, built
with `groundwire models build PROFILE --random-weights` — ingests ``samples/corpus``,
then sends searches one at a time and records each one's rerank stage report: its plan
(``full``, ``shrunk`` or ``skipped``), how many candidates the cross-encoder scored, the
reranker's ms/passage and pair cap, and the stage's time. Default settings throughout
(the rerank budget, the pair cap, the candidate count): the point is what a team gets.

    python benchmarks/rerank_budget_check.py \\
        --embedder-model DIR/bge-m3 --reranker-model DIR/bge-reranker-v2-m3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
QUERIES = (
    "how do I stop one user from flooding the API",
    "what happens when the reranker is down",
    "how are documents split into chunks",
    "which settings does the gateway read",
    "how do I run the stack with docker compose",
    "where are traces exported",
)


def main(argv: list[str] | None = None) -> int:
    from groundwire_cli.cluster import LocalCluster
    from groundwire_cli.ingest import find_documents, ingest_files

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder-model", type=Path, required=True)
    parser.add_argument("--reranker-model", type=Path, required=True)
    parser.add_argument("--name", default="rerank-budget-full-int8")
    args = parser.parse_args(argv)
    env = {
        "GROUNDWIRE_EMBEDDER_SERVE_COST_MODEL": "true",
        "GROUNDWIRE_RERANKER_SERVE_COST_MODEL": "true",
        "GROUNDWIRE_RERANKER_MODEL_DIR": str(args.reranker_model),
        # a random model's scores mean nothing: keep what it scores
        "GROUNDWIRE_ORCHESTRATOR_RERANK_THRESHOLD": "0",
    }
    corpus = ROOT / "samples" / "corpus"
    searches: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="groundwire-rerank-check-") as scratch:
        run = Path(scratch)
        cluster = LocalCluster.with_free_ports(run, args.embedder_model, run / "qdrant", env)
        with cluster:
            cluster.start()
            cluster.wait_ready(timeout_s=600)
            files = find_documents([corpus])
            t0 = time.perf_counter()
            totals = asyncio.run(ingest_files(cluster.addr("retriever"), "kb", files, root=corpus))
            ingest_s = time.perf_counter() - t0
            print(f"ingested {totals.ingested} documents, {totals.chunks_written} chunks in "
                  f"{ingest_s:.1f} s", flush=True)  # fmt: skip
            with httpx.Client(base_url=cluster.gateway_url, timeout=120) as http:
                for query in QUERIES:
                    started = time.perf_counter()
                    reply = http.post("/v1/search", json={"query": query, "collection": "kb"})
                    reply.raise_for_status()
                    stages = {s["name"]: s for s in reply.json()["stages"]}
                    rerank = stages["rerank"]
                    row = {
                        "query": query,
                        "search_ms": round((time.perf_counter() - started) * 1e3),
                        "rerank_ms": round(rerank["ms"]),
                        "fallback": rerank["fallback"],
                        "reason": rerank.get("reason", ""),
                        "details": rerank.get("details", {}),
                    }
                    searches.append(row)
                    d = row["details"]
                    print(
                        f"{query[:44]:<46} plan {d.get('plan', '-'):<8} scored "
                        f"{d.get('candidates_used', '-'):>3} of {d.get('candidates_in', '-'):>3}"
                        f"  rerank {row['rerank_ms']:>5} ms  search {row['search_ms']:>5} ms  "
                        f"ms/passage {d.get('ms_per_passage', '-')}  pair cap "
                        f"{d.get('pair_tokens', '-')}",
                        flush=True,
                    )
    report = {
        "name": args.name,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "load_average_at_end": os.getloadavg()},
        "command": " ".join(["python benchmarks/rerank_budget_check.py", *sys.argv[1:]]),
        "embedder_model": str(args.embedder_model),
        "reranker_model": str(args.reranker_model),
        "ingest": {
            "documents": totals.ingested,
            "chunks": totals.chunks_written,
            "seconds": round(ingest_s, 1),
        },
        "searches": searches,
    }
    path = RESULTS / f"{args.name}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
