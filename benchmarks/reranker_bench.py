"""Reranker benchmark: Rerank latency through gRPC against a bare ONNX Runtime session.

MECHANICS CHECK ONLY. No cross-encoder weights can be downloaded where this runs, so the
models are tiny, randomly initialised cross-encoders of the real architectures (an
XLM-RoBERTa classifier as bge-reranker-v2-m3, a BERT classifier as the ms-marco
cross-encoders; two layers, hidden size 32, 128-token pairs) built with the project's
export command. The figures show what the service adds around the model (gRPC,
queueing, tokenization, bucketing), not what a real reranker costs: a real one spends
far more time in the model itself.

For each model in fp32 and int8, in one run on one machine, with a query from
``samples/questions.txt`` and passages cut from ``samples/corpus``:

* ``grpc``    — p50/p95 of one ``Rerank`` call with 20, 50 and 100 candidates, one call
  after another, to a separate ``python -m groundwire_reranker`` process;
* ``ort``     — the bare ``onnxruntime.InferenceSession.run`` on the same pairs,
  pre-tokenized and padded as one batch, with the same thread settings;
* ``ort+tok`` — the same, tokenization and padding included.

Calls are interleaved (grpc, ort, ort+tok, grpc, ...) so a busy machine slows all alike.

Throughput (``--clients``, default 1 and 32): pairs/s of the service with that many
concurrent gRPC clients, each sending ``Rerank`` calls of ``--throughput-candidates``
passages, against bare ONNX Runtime's pairs/s on the same calls one after another
(``OnnxCrossEncoder.score``: the service's model class, tokenization and length
buckets included, the service's threads; measured before and after the service
cells, averaged);
``svc/ort`` = service ÷ bare. ``--model-dir DIR`` measures a built folder (e.g. the
full-size cost model of ``groundwire models build bge-reranker-v2-m3 --random-weights``,
served with ``SERVE_COST_MODEL``) instead of the tiny models:

    python benchmarks/reranker_bench.py --quick --model-dir /work/costmodels/bge-reranker-v2-m3
Results go to ``benchmarks/results/reranker-<model>-<fp32|int8>.json`` (the ``-tiny``
models) and a table is printed. ``--quick`` runs few calls per cell: a smoke run, noisy figures.

    python benchmarks/reranker_bench.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import onnxruntime as ort
from service_process import ServiceProcess

from groundwire.reranker.v1 import reranker_pb2
from groundwire_core.onnx_models import session_options
from groundwire_reranker.export import BuildReport, build_profile
from groundwire_reranker.export.tiny import Architecture, tiny_checkpoint
from groundwire_reranker.models import CrossEncoderManifest, OnnxCrossEncoder
from groundwire_reranker.settings import RerankerSettings

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
RERANK = "/groundwire.reranker.v1.RerankerService/Rerank"
CANDIDATES = (20, 50, 100)
NOTE = (
    "mechanics check on a tiny random model (2 layers, hidden 32): no real cross-encoder "
    "weights exist offline; the figures measure the service around the model, not a real "
    "reranker's cost, and say nothing about quality"
)
MODELS: dict[str, tuple[Architecture, str]] = {
    # result name: (architecture, export profile)
    "bge-reranker-v2-m3-tiny": ("xlm-roberta", "bge-reranker-v2-m3"),
    "cross-encoder-tiny": ("bert", "cross-encoder"),
}


@dataclass(frozen=True)
class Plan:
    warm_up: int  # untimed calls per cell
    calls: int  # timed calls per cell and path
    min_calls: int  # throughput: calls per service cell (split over its clients), at least

    def calls_per_client(self, clients: int) -> int:
        return max(1, -(-self.min_calls // clients))


QUICK = Plan(warm_up=3, calls=15, min_calls=8)
FULL = Plan(warm_up=10, calls=200, min_calls=64)
SERVICE_CAP = int(RerankerSettings.model_fields["max_pair_tokens"].default)


# -- inputs -------------------------------------------------------------------------------


def corpus_sentences() -> list[str]:
    text = "\n".join(
        p.read_text(encoding="utf-8") for p in sorted((ROOT / "samples" / "corpus").glob("*.md"))
    )
    sentences = [s.strip(" #*-`>|") for s in re.split(r"(?<=[.!?])\s+|\n+", text)]
    return [s for s in sentences if len(s) > 20]


def candidate_passages(sentences: Sequence[str], count: int) -> list[str]:
    """``count`` passages of 2-5 sentences each (about 40-120 tokens), varied in length."""
    out = []
    for i in range(count):
        start = (i * 7) % (len(sentences) - 5)
        out.append(" ".join(sentences[start : start + 2 + i % 4]))
    return out


def the_query() -> str:
    lines = (ROOT / "samples" / "questions.txt").read_text(encoding="utf-8").splitlines()
    return next(q.strip() for q in lines if q.strip() and not q.startswith("#"))


# -- the bare session ------------------------------------------------------------------------


class BareSession:
    """The exported graph in an InferenceSession of our own, fed one padded batch."""

    def __init__(self, model_dir: Path, threads: int) -> None:
        self.manifest = CrossEncoderManifest.load(model_dir)
        # the service's own session options, so only the transport and batching differ
        options = session_options(intra_op_threads=threads)
        self.session = ort.InferenceSession(
            str(model_dir / self.manifest.onnx_file),
            sess_options=options,
            providers=["CPUExecutionProvider"],
        )
        # the service's own tokenization, so both paths see the very same token ids
        self.tokenizer = OnnxCrossEncoder(
            model_dir, intra_op_threads=1, serve_cost_model=True, max_pair_tokens=SERVICE_CAP
        )
        self.tokenizer.load()

    def feed(self, pairs: Sequence[tuple[str, str]]) -> dict[str, np.ndarray]:
        encodings = self.tokenizer.encode_pairs(pairs)
        length = max(len(e.ids) for e in encodings)
        ids = np.full((len(pairs), length), self.manifest.pad_token_id, dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
            types[row, : len(enc.ids)] = enc.type_ids
        available = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        return {name: available[name] for name in self.manifest.input_names}

    def run(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        (logits,) = self.session.run(["logits"], feed)
        return np.asarray(logits).reshape(-1)


# -- the service -----------------------------------------------------------------------------


def percentiles(times: Sequence[float]) -> dict[str, float]:
    return {
        "p50_ms": float(np.percentile(times, 50)),
        "p95_ms": float(np.percentile(times, 95)),
    }


async def measure_cell(
    port: int, bare: BareSession, query: str, passages: list[str], plan: Plan
) -> dict[str, Any]:
    """grpc, ort and ort+tok latencies for one candidate count, interleaved."""
    pairs = [(query, p) for p in passages]
    feed = bare.feed(pairs)
    request = reranker_pb2.RerankRequest(query=query, passages=passages)
    times: dict[str, list[float]] = {"grpc": [], "ort": [], "ort+tok": []}
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(
            RERANK,
            request_serializer=reranker_pb2.RerankRequest.SerializeToString,
            response_deserializer=reranker_pb2.RerankResponse.FromString,
        )

        def clocked(fn: Callable[[], object]) -> float:
            started = time.perf_counter()
            fn()
            return (time.perf_counter() - started) * 1e3

        reply = None
        for i in range(plan.warm_up + plan.calls):
            started = time.perf_counter()
            reply = await call(request, timeout=60)
            grpc_ms = (time.perf_counter() - started) * 1e3
            ort_ms = clocked(lambda: bare.run(feed))
            tok_ms = clocked(lambda: bare.run(bare.feed(pairs)))
            if i >= plan.warm_up:
                times["grpc"].append(grpc_ms)
                times["ort"].append(ort_ms)
                times["ort+tok"].append(tok_ms)
    assert reply is not None and len(reply.results) == len(passages)
    # the service's scores are the bare session's, squashed: same model, same pairs
    bare_scores = 1 / (1 + np.exp(-bare.run(feed).astype(np.float64)))
    served = np.zeros(len(passages))
    served[[r.index for r in reply.results]] = [r.score for r in reply.results]
    return {
        "pairs": len(passages),
        "tokens": int(reply.total_tokens),
        "max_abs_score_diff_vs_bare": float(np.abs(served - bare_scores).max()),
        **{path: percentiles(t) for path, t in times.items()},
    }


async def service_throughput(
    port: int, request: bytes, passages: int, clients: int, calls: int
) -> float:
    """Pairs/s of ``clients`` concurrent callers each sending ``calls`` Rerank calls
    (serialized once, replies left unparsed: the clients cost little)."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(RERANK)

        async def client() -> None:
            for _ in range(calls):
                await call(request, timeout=3600)

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return clients * calls * passages / (time.perf_counter() - started)


def bare_throughput(model: OnnxCrossEncoder, pairs: list[tuple[str, str]], calls: int) -> float:
    """Pairs/s of bare ONNX Runtime on ``calls`` calls one after another: the model
    class the service runs (tokenized, sorted by length and padded per bucket, as the
    service does; the service's thread count), with no queue, no batching engine and
    no gRPC."""
    started = time.perf_counter()
    for _ in range(calls):
        model.score(pairs)
    return calls * len(pairs) / (time.perf_counter() - started)


def throughput(
    port: int,
    model_dir: Path,
    threads: int,
    query: str,
    passages: list[str],
    plan: Plan,
    clients: list[int],
) -> dict[str, Any]:
    pairs = [(query, p) for p in passages]
    bare = OnnxCrossEncoder(
        model_dir, intra_op_threads=threads, serve_cost_model=True, max_pair_tokens=SERVICE_CAP
    )
    bare.load()
    request = reranker_pb2.RerankRequest(query=query, passages=passages).SerializeToString()
    calls = max(2, plan.min_calls // 4)
    bare.score(pairs)
    ort = [bare_throughput(bare, pairs, calls)]
    asyncio.run(service_throughput(port, request, len(passages), 1, 1))  # warm
    svc = {
        str(c): asyncio.run(
            service_throughput(port, request, len(passages), c, plan.calls_per_client(c))
        )
        for c in clients
    }
    ort.append(bare_throughput(bare, pairs, calls))
    bare_pairs_s = sum(ort) / len(ort)
    return {
        "passages_per_call": len(passages),
        "ort_pairs_per_s": round(bare_pairs_s, 2),
        "ort_passes": [round(x, 2) for x in ort],
        "svc_pairs_per_s": {c: round(v, 2) for c, v in svc.items()},
        "svc_over_ort": {c: round(v / bare_pairs_s, 3) for c, v in svc.items()},
    }


def measure(
    name: str,
    precision: str,
    report: BuildReport | None,
    plan: Plan,
    threads: int,
    workdir: Path,
    sentences: list[str],
    *,
    model_dir: Path | None = None,
    clients: Sequence[int] = (1, 32),
    throughput_candidates: int = 50,
    candidates: Sequence[int] = CANDIDATES,
) -> dict[str, Any]:
    folder = model_dir if model_dir is not None else report.out_dir if report else Path()
    manifest = json.loads((folder / "groundwire-model.json").read_text())
    query = the_query()
    bare = BareSession(folder, threads)
    settings = {"MODEL_DIR": str(folder), "INTRA_OP_THREADS": str(threads)}
    if max(clients, default=0) > 8:  # every client waits in the queue: room for all
        settings["MAX_QUEUE"] = str(2 * max(clients))
    if manifest.get("cost_model"):  # a random-weight cost model, served for the benchmark
        settings["SERVE_COST_MODEL"] = "1"
    service = ServiceProcess("reranker", settings, workdir)
    try:
        cells = {
            str(n): asyncio.run(
                measure_cell(service.port, bare, query, candidate_passages(sentences, n), plan)
            )
            for n in candidates
        }
        rates = (
            throughput(
                service.port,
                folder,
                threads,
                query,
                candidate_passages(sentences, throughput_candidates),
                plan,
                list(clients),
            )
            if clients
            else None
        )
    finally:
        service.stop()
    result: dict[str, Any] = {
        "model": name,
        "profile": report.profile if report else manifest.get("profile", ""),
        "precision": precision,
        "mechanics_check": report is not None or bool(manifest.get("cost_model")),
        "note": NOTE if report is not None else f"model folder {folder}" + (
            " (a random-weight cost model: cost, not quality)" if manifest.get("cost_model") else ""
        ),
        "max_tokens": report.max_tokens if report else manifest.get("max_tokens"),
        "candidates": cells,
        "throughput": rates,
    }
    if report is None:
        return result
    result["export_max_abs_logit_diff_vs_torch"] = report.max_abs_diff_vs_torch
    if report.int8:
        result["int8_score_drift_vs_fp32"] = {
            "max": report.int8_score_max_abs_diff,
            "mean": report.int8_score_mean_abs_diff,
        }
    return result


def print_table(results: Sequence[dict[str, Any]]) -> None:
    notes = dict.fromkeys(str(r.get("note", NOTE)) for r in results)
    print(f"\nreranker latency, ms (p50 / p95) — {'; '.join(notes) or NOTE}\n")
    header = (
        f"{'model':<24} {'prec':<5} {'cands':>5} {'tokens':>6}  "
        f"{'grpc':>15}  {'ort':>15}  {'ort+tok':>15}  {'grpc/ort+tok':>12}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        for n, cell in r["candidates"].items():
            g, o, t = cell["grpc"], cell["ort"], cell["ort+tok"]
            print(
                f"{r['model']:<24} {r['precision']:<5} {n:>5} {cell['tokens']:>6}  "
                f"{g['p50_ms']:>6.2f} / {g['p95_ms']:>6.2f}  "
                f"{o['p50_ms']:>6.2f} / {o['p95_ms']:>6.2f}  "
                f"{t['p50_ms']:>6.2f} / {t['p95_ms']:>6.2f}  "
                f"{g['p50_ms'] / max(t['p50_ms'], 1e-9):>11.2f}x"
            )
    for r in results:
        rates = r.get("throughput")
        if rates:
            cells = ", ".join(
                f"{c} clients {v:.1f} ({rates['svc_over_ort'][c]:.2f}x)"
                for c, v in rates["svc_pairs_per_s"].items()
            )
            print(
                f"{r['model']} {r['precision']} throughput, pairs/s ({rates['passages_per_call']} "
                f"per call): bare ort {rates['ort_pairs_per_s']:.1f}; service {cells}"
            )
    for r in results:
        drift = r.get("int8_score_drift_vs_fp32")
        if drift:
            print(
                f"{r['model']} int8 vs fp32 scores (build-time sample pairs): "
                f"max abs diff {drift['max']:.4f}, mean {drift['mean']:.4f}"
            )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few calls per cell: a smoke run")
    parser.add_argument(
        "--models", default=",".join(MODELS), help=f"comma list of {', '.join(MODELS)}"
    )
    parser.add_argument(
        "--threads", type=int, default=0, help="ONNX Runtime intra-op threads (0 = all cores)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON results")
    parser.add_argument(
        "--model-dir", type=Path, default=None, help="measure this built folder, not tiny models"
    )
    parser.add_argument(
        "--clients",
        default="1,32",
        help="throughput cells: concurrent clients, comma list ('' = none)",
    )
    parser.add_argument("--throughput-candidates", type=int, default=50)
    parser.add_argument(
        "--candidates",
        default=",".join(str(n) for n in CANDIDATES),
        help="latency cells: candidates per call, comma list ('' = none; a full-size "
        "model scores ~10 pairs a second on 2 cores, so 100 is minutes a cell)",
    )
    args = parser.parse_args(argv)
    clients = [int(c) for c in args.clients.split(",") if c.strip()]
    candidates = tuple(int(n) for n in args.candidates.split(",") if n.strip())
    plan = QUICK if args.quick else FULL
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    for name in names:
        if name not in MODELS:
            parser.error(f"unknown model {name!r}; known: {', '.join(MODELS)}")

    sentences = corpus_sentences()
    results = []
    args.out.mkdir(parents=True, exist_ok=True)
    environment = {
        "cpus": os.cpu_count(),
        "intra_op_threads": args.threads,
        "python": platform.python_version(),
        "onnxruntime": ort.__version__,
        "quick": args.quick,
        "plan": asdict(plan),
    }
    with tempfile.TemporaryDirectory(prefix="gw-reranker-bench-") as tmp:
        root = Path(tmp)
        if args.model_dir is not None:
            manifest = json.loads((args.model_dir / "groundwire-model.json").read_text())
            precision = "int8" if manifest.get("quantized") else "fp32"
            name = re.sub(r"[^A-Za-z0-9.-]+", "-", str(manifest.get("model_id", "model")))
            print(f"measuring {name} {precision} from {args.model_dir}")
            load_1m = os.getloadavg()[0]
            result = measure(
                name,
                precision,
                None,
                plan,
                args.threads,
                root,
                sentences,
                model_dir=args.model_dir,
                clients=clients,
                throughput_candidates=args.throughput_candidates,
                candidates=candidates,
            )
            result["environment"] = {
                **environment,
                "load_average_1m": load_1m,
                "load_average_1m_at_end": os.getloadavg()[0],
            }
            path = args.out / f"reranker-{name.strip('-')}-{precision}.json"
            path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
            results.append(result)
            names = []
        for name in names:
            arch, profile = MODELS[name]
            print(f"building {name} ({arch}, profile {profile}): fp32 and int8")
            checkpoint = tiny_checkpoint(arch, root / f"{name}-checkpoint", sentences)
            quiet: Callable[[str], None] = lambda _line: None  # noqa: E731
            for precision in ("fp32", "int8"):
                report = build_profile(
                    profile,
                    root / f"{name}-{precision}",
                    int8=precision == "int8",
                    source=checkpoint,
                    log=quiet,
                )
                print(f"measuring {name} {precision}")
                result = measure(
                    name,
                    precision,
                    report,
                    plan,
                    args.threads,
                    root,
                    sentences,
                    clients=clients,
                    throughput_candidates=args.throughput_candidates,
                )
                result["environment"] = {**environment, "load_average_1m": os.getloadavg()[0]}
                path = args.out / f"reranker-{name}-{precision}.json"
                path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
                results.append(result)
    print_table(results)
    print(f"\nresults in {args.out}/reranker-*.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
