"""Plumbing cost: the product's search and ingest against a bare in-process pipeline
doing the same model and engine calls, in one run (issue #34, "plumbing that costs
little").

Search (requests per CPU-second, product ÷ bare)
    *Product*: a ``LocalCluster`` (the five services, no LLM configured) with the
    sample corpus ingested; ``--clients`` concurrent clients send ``--searches``
    ``POST /v1/search`` requests (the demo's questions, cycled) to the gateway. Its CPU
    is the user + system time of every service process (``/proc/<pid>/stat``, as
    ``loadrun.capacity.cpu_seconds``) over those searches; the clients' own CPU is not
    counted. The retriever is left to settle first (its index build after the ingest).
    *Bare*: after the cluster stops, this process opens the retriever's own data folder
    with the retriever's own store class (``EdgeStore`` on qdrant-edge, the class and
    settings ``groundwire_retriever.server`` builds), and runs, one query after another:
    the embedder's ``OnnxEncoder.encode([query])`` (what the embedder service runs for
    an Embed of one text), ``EdgeStore.search`` with the ``SearchQuery`` the
    orchestrator sends (the orchestrator's default fusion and weights, limit 50, path
    limit 100, floor 0.3: the same per-path engine queries, the same fusion and payload
    read the retriever does; only gRPC, the service layer and the orchestrator are
    missing), and ``OnnxCrossEncoder.score`` on the same number of candidates the
    product's rerank stage scored for that query (its stage report's
    ``candidates_used``), each cut to its best window for the query with the product's
    pair cap (``pair_tokens``) by the orchestrator's own ``text.windows.best_window``,
    the model opened with the reranker service's ``max_pair_tokens`` and called in the
    buckets its engine would cut (``batching.plan_buckets``). Its CPU is
    ``time.process_time()`` of this process (every thread, ONNX Runtime's included).
    Reading the same folder, not a rebuilt collection, means the same segments and
    indexes: the engine call is the same call on the same data.
    Ratio = (searches / product CPU) ÷ (searches / bare CPU) = bare CPU ÷ product CPU.
    The window selection is the orchestrator's Python, not a model or engine call: its
    CPU inside the bare loop is timed apart, and a second ratio counts it as plumbing
    (``search_per_cpu_s_windows_as_plumbing``).
    ``--profile DIR`` records each service with py-spy during the timed searches
    (collapsed stacks; it skews the product's CPU: for finding waste, not for figures).

Ingest (documents/s, product ÷ bare)
    *Product*: ``groundwire_cli.ingest.ingest_files`` (what ``groundwire ingest`` runs:
    the retriever's StartJob/WatchJob) of ``samples/corpus`` into an empty collection,
    wall time and the service processes' CPU. *Bare*: the chunk texts the ingest
    stored (read back per source, in order, from the same data folder after the
    stop), embedded in bare ONNX Runtime (the embedder's ``OnnxEncoder`` through its
    ``EncoderBackend``: tokenize, infer, postprocess) in the same model calls the
    service makes: each document's chunks in requests of ``embed_batch`` = 32 (as
    ``RetrieverCore._embed``), each request sorted and cut into buckets within the
    embedder's ``max_batch_tokens`` (``batching.plan_buckets``, as its engine does);
    wall time and this process's CPU. Ratio (wall) = product documents/s ÷ the
    documents/s the bare embedder's texts/s gives on those chunks; the CPU ratio
    likewise. Nothing but embedding is in the bare side: chunking, token counting,
    writes and the engine's indexing are all plumbing the ratio charges to the product.

Models: MiniLM and the tiny random cross-encoder by default (``loadrun.inputs``);
``--embedder-model DIR --reranker-model DIR`` for the full-size cost models (the
services get ``GROUNDWIRE_<SVC>_SERVE_COST_MODEL=true``). Targets (figures, not walls):
search ≥ 0.6 with MiniLM, ≥ 0.9 at full size; ingest ≥ 0.8.

The JSON (``benchmarks/results/plumbing-<name>.json``) records the load average at the
start and end: on a shared machine the CPU figures hold better than the wall ones.

    python benchmarks/plumbing_bench.py --smoke              # proves the script
    python benchmarks/plumbing_bench.py --searches 400 --clients 4
    python benchmarks/plumbing_bench.py --searches 60 --clients 2 \\
        --embedder-model /work/costmodels/bge-m3 \\
        --reranker-model /work/costmodels/bge-reranker-v2-m3 --name full-int8
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from loadrun.capacity import cpu_seconds
from loadrun.inputs import CORPUS, ROOT, build_tiny_reranker, ensure_minilm, sample_questions
from loadrun.machine import machine

RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_MODEL_DIR = ROOT / "var" / "models" / "minilm"
COLLECTION = "docs"
EMBED_BATCH = 32  # RetrieverSettings.embed_batch's default (or what --set gives it)
GATEWAY_ENV = {  # one address sends everything: the abuse controls would refuse it
    "GROUNDWIRE_GATEWAY_RATE_LIMIT_PER_MIN": "0",
    "GROUNDWIRE_GATEWAY_SEARCH_RATE_LIMIT_PER_MIN": "0",
    "GROUNDWIRE_GATEWAY_DAILY_QUOTA": "0",
    "GROUNDWIRE_GATEWAY_ANONYMOUS_DAILY_QUOTA": "0",
    "GROUNDWIRE_GATEWAY_TOKEN_BUDGET_PER_DAY": "0",
}


def _cpu(pids: dict[str, int]) -> dict[str, float]:
    return {name: cpu_seconds(pid) or 0.0 for name, pid in pids.items()}


def _spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {n: round(after[n] - before[n], 3) for n in before}


def settle(pids: dict[str, int], quiet_s: float = 0.05, timeout_s: float = 120.0) -> float:
    """Waits until the services spend under ``quiet_s`` CPU-seconds in a second (the
    retriever's index build after an ingest); the seconds waited."""
    started = time.monotonic()
    last = sum(_cpu(pids).values())
    while time.monotonic() - started < timeout_s:
        time.sleep(1.0)
        now = sum(_cpu(pids).values())
        if now - last < quiet_s:
            break
        last = now
    return round(time.monotonic() - started, 1)


async def product_searches(
    url: str, queries: list[str], clients: int
) -> tuple[list[dict[str, Any]], float]:
    """Each query through POST /v1/search by ``clients`` concurrent clients; the
    replies' rerank details per query index, and the wall seconds."""
    import httpx

    replies: list[dict[str, Any]] = [{} for _ in queries]
    todo = iter(range(len(queries)))

    async def client(http: httpx.AsyncClient) -> None:
        for i in todo:
            reply = await http.post("/v1/search", json={"query": queries[i]})
            if reply.status_code != 200:
                raise RuntimeError(f"search answered {reply.status_code}: {reply.text[:300]}")
            stages = {s["name"]: s for s in reply.json()["stages"]}
            replies[i] = {
                "rerank": stages.get("rerank", {}),
                "retrieval": stages.get("retrieval", {}),
                "results": len(reply.json()["results"]),
            }

    async with httpx.AsyncClient(base_url=url, timeout=300) as http:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        return replies, time.perf_counter() - t0


def start_profilers(pids: dict[str, int], folder: Path) -> list[subprocess.Popen[bytes]]:
    """``py-spy record`` (not a project dependency: pip install py-spy) of each service
    during the timed searches, as collapsed stacks in ``folder/<service>.txt``; it
    samples from outside without pausing the process (--nonblocking)."""
    folder.mkdir(parents=True, exist_ok=True)
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    command = [spy, "record", "--rate", "200", "--nonblocking", "--pid"]
    return [
        subprocess.Popen(
            [*command, str(pid), "--format", "raw", "--output", str(folder / f"{name}.txt")],
            stdout=subprocess.DEVNULL,
            stderr=(folder / f"{name}.log").open("wb"),
        )
        for name, pid in pids.items()
    ]


def stop_profilers(spies: list[subprocess.Popen[bytes]]) -> None:
    for spy in spies:
        spy.send_signal(signal.SIGINT)
    for spy in spies:
        spy.wait(timeout=60)


def run_product(args: argparse.Namespace, run_dir: Path, queries: list[str]) -> dict[str, Any]:
    from groundwire_cli.cluster import LocalCluster
    from groundwire_cli.ingest import find_documents, ingest_files

    env = dict(GATEWAY_ENV)
    env["GROUNDWIRE_RERANKER_MODEL_DIR"] = str(args.reranker_model)
    env["GROUNDWIRE_ORCHESTRATOR_RERANK_THRESHOLD"] = "0"  # a random model: keep all
    if args.cost_models:
        env["GROUNDWIRE_EMBEDDER_SERVE_COST_MODEL"] = "true"
        env["GROUNDWIRE_RERANKER_SERVE_COST_MODEL"] = "true"
    env.update(args.settings)
    cluster = LocalCluster.with_free_ports(run_dir, args.embedder_model, run_dir / "qdrant", env)
    out: dict[str, Any] = {}
    with cluster:
        print(f"starting the cluster; logs in {run_dir / 'logs'}", flush=True)
        cluster.start()
        cluster.wait_ready(timeout_s=600)
        pids = {n: c.process.pid for n, c in cluster.children.items() if c.process}
        files = find_documents([CORPUS])[: args.documents]
        before = _cpu(pids)
        t0 = time.perf_counter()
        totals = asyncio.run(
            ingest_files(cluster.addr("retriever"), COLLECTION, files, root=CORPUS)
        )
        wall = time.perf_counter() - t0
        spent = _spent(before, _cpu(pids))
        out["ingest"] = {
            "documents": totals.ingested,
            "chunks": totals.chunks_written,
            "wall_s": round(wall, 3),
            "cpu_s_by_service": spent,
            "cpu_s": round(sum(spent.values()), 3),
            "documents_per_s": round(totals.ingested / wall, 3),
        }
        print(
            f"ingest: {totals.ingested} documents, {totals.chunks_written} chunks in {wall:.1f} s"
        )
        out["settled_s"] = settle(pids)
        warm = queries[: args.warm_up]
        asyncio.run(product_searches(cluster.gateway_url, warm, 1))
        spies = start_profilers(pids, args.profile) if args.profile else []
        before = _cpu(pids)
        replies, wall = asyncio.run(product_searches(cluster.gateway_url, queries, args.clients))
        spent = _spent(before, _cpu(pids))
        stop_profilers(spies)
        cpu = sum(spent.values())
        out["search"] = {
            "searches": len(queries),
            "clients": args.clients,
            "wall_s": round(wall, 3),
            "requests_per_s": round(len(queries) / wall, 3),
            "cpu_s_by_service": spent,
            "cpu_s": round(cpu, 3),
            "cpu_ms_per_search": round(cpu / len(queries) * 1e3, 2),
            "requests_per_cpu_s": round(len(queries) / cpu, 3),
            "rerank_plans": _count(
                r["rerank"].get("details", {}).get("plan", "?") for r in replies
            ),
        }
        out["replies"] = replies
        crashed = cluster.crashed()
        if crashed:
            raise RuntimeError(f"services exited during the run: {crashed}")
    return out


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return counts


def run_bare(
    args: argparse.Namespace, run_dir: Path, queries: list[str], product: dict[str, Any]
) -> dict[str, Any]:
    from groundwire_core.batching import plan_buckets
    from groundwire_embedder.engine import EncoderBackend
    from groundwire_embedder.models.onnx_backend import OnnxEncoder
    from groundwire_embedder.settings import EmbedderSettings
    from groundwire_orchestrator.fusion import DEFAULT
    from groundwire_orchestrator.text.windows import best_window
    from groundwire_reranker.models import OnnxCrossEncoder
    from groundwire_reranker.settings import RerankerSettings
    from groundwire_retriever.domain import Fusion, SearchPath, SearchQuery, SparseVec
    from groundwire_retriever.settings import RetrieverSettings
    from groundwire_retriever.store.edge import EdgeStore

    # the services' own settings (their defaults, and what this run set for them)
    def given(service: str) -> dict[str, Any]:
        prefix = f"GROUNDWIRE_{service.upper()}_"
        return {  # the service's settings this run sets (--set), by field name
            k[len(prefix) :].lower(): v
            for k, v in args.settings.items()
            if k.startswith(prefix) and k[len(prefix) :].lower() != "model_dir"
        }

    es = EmbedderSettings(
        **{"serve_cost_model": args.cost_models, **given("embedder")},
        model_dir=args.embedder_model,
    )
    rs = RerankerSettings(
        **{"serve_cost_model": args.cost_models, **given("reranker")},
        model_dir=args.reranker_model,
    )
    encoder = OnnxEncoder(
        es.model_dir,
        intra_op_threads=es.intra_op_threads,
        inter_op_threads=es.inter_op_threads,
        allow_spinning=es.ort_allow_spinning,
        serve_cost_model=es.serve_cost_model,
    )
    encoder.load()
    scorer = OnnxCrossEncoder(
        args.reranker_model,
        intra_op_threads=rs.intra_op_threads,
        serve_cost_model=rs.serve_cost_model,
        max_pair_tokens=rs.max_pair_tokens,
    )
    scorer.load()
    search_threads = RetrieverSettings(**given("retriever")).search_threads
    store = EdgeStore(run_dir / "qdrant", search_threads=search_threads)
    store.open()
    fusion = Fusion(DEFAULT.method)
    weights = {SearchPath(p): w for p, w in DEFAULT.weights.items()}

    def search_once(query: str, reply: dict[str, Any]) -> int:
        out = encoder.encode([query])
        sparse = None
        if out.sparse:
            first = out.sparse[0]
            sparse = SparseVec(tuple(first.indices.tolist()), tuple(first.values.tolist()))
        result = store.search(
            COLLECTION,
            SearchQuery(
                text=query,
                dense=tuple(out.dense[0].tolist()),
                sparse=sparse,
                fusion=fusion,
                weights=weights,
                limit=50,
                path_limit=100,
                rrf_k=60,
                dense_floor=0.3,
            ),
        )
        details = reply.get("rerank", {}).get("details", {})
        used = int(details.get("candidates_used", "0") or 0)
        cap = int(details.get("pair_tokens", "0") or 0)
        pool = result.hits[:used]
        w0 = time.process_time()
        pairs = [(query, best_window(query, h.chunk.text, cap)) for h in pool]
        window_cpu[0] += time.process_time() - w0
        # the reranker engine's model calls for one Rerank request (its buckets)
        estimates = [scorer.estimate_tokens(p) for p in pairs]
        for bucket in plan_buckets(estimates, max_tokens=rs.max_batch_tokens):
            scorer.postprocess(*_run(scorer, [pairs[i] for i in bucket]))
        return len(result.hits)

    replies = product["replies"]
    window_cpu = [0.0]  # the orchestrator's window selection, inside the bare's CPU
    try:
        for i, q in enumerate(queries[: args.warm_up]):
            search_once(q, replies[i])
        window_cpu[0] = 0.0
        c0, t0 = time.process_time(), time.perf_counter()
        hits = [search_once(q, replies[i]) for i, q in enumerate(queries)]
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        search = {
            "searches": len(queries),
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3),
            "cpu_ms_per_search": round(cpu / len(queries) * 1e3, 2),
            "requests_per_cpu_s": round(len(queries) / cpu, 3),
            "window_cpu_ms_per_search": round(window_cpu[0] / len(queries) * 1e3, 2),
            "requests_per_cpu_s_models_and_engine_only": round(
                len(queries) / (cpu - window_cpu[0]), 3
            ),
            "mean_hits": round(sum(hits) / len(hits), 1),
        }
        # ingest: the stored chunk texts, per source in order, in the retriever's batches
        docs: list[list[str]] = []
        token = ""
        while True:
            page = store.list_sources(COLLECTION, page_token=token, limit=1000)
            for s in page.sources:
                read = store.read_source(COLLECTION, s.source_id, limit=10000)
                docs.append([c.text for c in read.chunks])
            token = page.next_page_token
            if not token:
                break
    finally:
        store.close()
    backend = EncoderBackend(encoder)
    per_request = int(args.settings.get("GROUNDWIRE_RETRIEVER_EMBED_BATCH", EMBED_BATCH))

    def embed_like_the_engine(batch: list[str]) -> None:
        # the embedder engine's model calls for one Embed request: sorted by estimated
        # length and cut into buckets within max_batch_tokens (batching.plan_buckets)
        estimates = [backend.estimate_tokens(t) for t in batch]
        for bucket in plan_buckets(estimates, max_tokens=es.max_batch_tokens):
            backend.postprocess(*_run(backend, [batch[i] for i in bucket]))

    embed_like_the_engine(docs[0][:per_request] if docs and docs[0] else ["warm-up"])
    c0, t0 = time.process_time(), time.perf_counter()
    texts = 0
    for chunks in docs:
        for start in range(0, len(chunks), per_request):
            embed_like_the_engine(chunks[start : start + per_request])
        texts += len(chunks)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    ingest = {
        "documents": len(docs),
        "texts": texts,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "texts_per_s": round(texts / wall, 3),
        "documents_per_s": round(len(docs) / wall, 3),
        "documents_per_cpu_s": round(len(docs) / cpu, 3),
    }
    return {"search": search, "ingest": ingest}


def _run(backend: Any, items: list[Any]) -> tuple[Any, Any]:
    batch = backend.tokenize(items)
    return batch, backend.infer(batch)


def ratios(product: dict[str, Any], bare: dict[str, Any]) -> dict[str, float]:
    ps, bs = product["search"], bare["search"]
    pi, bi = product["ingest"], bare["ingest"]
    return {
        "search_per_cpu_s": round(ps["requests_per_cpu_s"] / bs["requests_per_cpu_s"], 3),
        "search_per_cpu_s_windows_as_plumbing": round(
            ps["requests_per_cpu_s"] / bs["requests_per_cpu_s_models_and_engine_only"], 3
        ),
        "ingest_documents_per_s": round(pi["documents_per_s"] / bi["documents_per_s"], 3),
        "ingest_documents_per_cpu_s": round(
            (pi["documents"] / pi["cpu_s"]) / bi["documents_per_cpu_s"], 3
        ),
    }


def _label(model_dir: Path) -> str:
    try:
        manifest = json.loads((model_dir / "groundwire-model.json").read_text())
    except (OSError, ValueError):
        return model_dir.name
    precision = "int8" if manifest.get("quantized") else "fp32"
    return f"{manifest.get('model_id', model_dir.name)} ({precision})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--searches", type=int, default=400)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--warm-up", type=int, default=10, help="untimed searches per side")
    parser.add_argument("--documents", type=int, default=None, help="first N corpus files")
    parser.add_argument("--embedder-model", type=Path, default=None, help="default: MiniLM")
    parser.add_argument("--reranker-model", type=Path, default=None, help="default: tiny")
    parser.add_argument("--name", default="", help="results/plumbing-<name>.json")
    parser.add_argument("--note", default="")
    parser.add_argument("--smoke", action="store_true", help="20 searches, 2 clients, 4 docs")
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="py-spy each service during the timed searches into this folder (skews the "
        "product's CPU: for finding waste, not for the figures)",
    )
    parser.add_argument("--run-dir", type=Path, default=None, help="keep the run folder")
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a service setting for the cluster (full name), repeatable",
    )
    args = parser.parse_args(argv)
    args.settings = dict(s.split("=", 1) for s in args.settings)
    if args.smoke:
        args.searches, args.clients, args.warm_up = 20, 2, 3
        args.documents = args.documents or 4
    args.cost_models = args.embedder_model is not None or args.reranker_model is not None
    created = dt.datetime.now(dt.UTC)
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="gw-plumbing-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        if args.embedder_model is None:
            args.embedder_model = ensure_minilm(DEFAULT_MODEL_DIR)
        if args.reranker_model is None:
            print("building the tiny random cross-encoder (mechanics only)", flush=True)
            args.reranker_model = build_tiny_reranker(run_dir)
        base = sample_questions()
        queries = [base[i % len(base)] for i in range(args.searches)]
        product = run_product(args, run_dir, queries)
        bare = run_bare(args, run_dir, queries, product)
    finally:
        if args.run_dir is None:
            shutil.rmtree(run_dir, ignore_errors=True)
    result = {
        "name": args.name or f"{created:%Y-%m-%d}",
        "created": created.isoformat(timespec="seconds"),
        "machine": {
            **machine(),
            "load_average_at_start": load_at_start,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "note": args.note,
        "models": {
            "embedder": _label(args.embedder_model),
            "reranker": _label(args.reranker_model),
        },
        "config": {
            "searches": args.searches,
            "clients": args.clients,
            "warm_up": args.warm_up,
            "documents": args.documents,
            "settings": args.settings,
            "smoke": args.smoke,
        },
        "product": {k: v for k, v in product.items() if k != "replies"},
        "bare": bare,
        "ratio": ratios(product, bare),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"plumbing-{result['name']}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    ps, bs, r = product["search"], bare["search"], result["ratio"]
    print(
        f"models: {result['models']}; load average {load_at_start} -> "
        f"{result['machine']['load_average_at_end']}"
    )
    print(
        f"search: product {ps['requests_per_cpu_s']:.2f}/CPU-s ({ps['cpu_ms_per_search']:.1f} ms; "
        f"by service {ps['cpu_s_by_service']}), bare {bs['requests_per_cpu_s']:.2f}/CPU-s "
        f"({bs['cpu_ms_per_search']:.1f} ms, of which window selection "
        f"{bs['window_cpu_ms_per_search']:.1f}): ratio {r['search_per_cpu_s']:.3f} "
        f"({r['search_per_cpu_s_windows_as_plumbing']:.3f} counting the windows as plumbing) "
        f"(rerank plans {ps['rerank_plans']})"
    )
    pi, bi = product["ingest"], bare["ingest"]
    print(
        f"ingest: product {pi['documents_per_s']:.2f} docs/s ({pi['chunks']} chunks, "
        f"{pi['cpu_s']:.1f} CPU-s), bare embedder {bi['texts_per_s']:.1f} texts/s = "
        f"{bi['documents_per_s']:.2f} docs/s ({bi['cpu_s']:.1f} CPU-s): ratio "
        f"{r['ingest_documents_per_s']:.3f} wall, {r['ingest_documents_per_cpu_s']:.3f} CPU"
    )
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
