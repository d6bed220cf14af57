"""How near fp32 MiniLM on long texts runs to what these cores can do.

The embedder benchmark's fp32 long-text cell asks for 1.5x sentence-transformers. This
measures what bounds it, on the bare session with one intra-op thread (one lane; the
service runs one lane per core while requests wait):

* the graph's matrix-multiply work per text, read from ONNX Runtime's own profile (each
  MatMul / FusedMatMul node: 2 x output elements x inner dimension), and the share of
  kernel time those nodes take;
* the rate ONNX Runtime's matrix multiply reaches on the graph's costliest MatMul
  alone (a one-node graph of the same shapes, one thread): the ceiling for that work;
* the model's texts/s on one thread, and sentence-transformers' (PyTorch) on every core
  in the benchmark's client batches of 32 texts.

From these it prints two bounds on texts/s over all cores (lanes run side by side): if
every MatMul ran at the one-node rate and nothing else took time, and if the other ops
kept their measured time. Real texts of ~256 tokens, 2 per call (the embedder's
512-token budget), like the benchmark's long cell.

    python benchmarks/embedder_ceiling.py                  # MiniLM fp32, built if missing
    python benchmarks/embedder_ceiling.py --seconds 8 --rounds 3

Writes ``benchmarks/results/embedder-ceiling-minilm.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from embedder_bench import RESULTS, BareOrt, sentence_transformer, texts_of_tokens, timed_loop
from onnx import TensorProto, helper, numpy_helper

from groundwire_core.onnx_models import session_options
from groundwire_embedder.models import ModelManifest

ROOT = Path(__file__).resolve().parent.parent
TOKENS, PER_CALL = 256, 2
MATMULS = ("MatMul", "FusedMatMul")


def shape_of(entry: dict[str, list[int]]) -> list[int]:
    """``{"float": [2, 252, 384]}`` (a profile's type-and-shape entry) → the shape."""
    return next(iter(entry.values()))


def profile_ops(onnx_path: str, feed: dict[str, np.ndarray], runs: int) -> dict[str, Any]:
    """Kernel time per op type and the MatMul nodes' work, from ONNX Runtime's profiler."""
    with tempfile.TemporaryDirectory() as folder:
        options = session_options(intra_op_threads=1)
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(folder) / "minilm")
        session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
        session.run(None, feed)  # the first run allocates; its events are dropped below
        for _ in range(runs):
            session.run(None, feed)
        events = json.loads(Path(session.end_profiling()).read_text(encoding="utf-8"))
    kernels = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    per_run = len(kernels) // (runs + 1)
    kernels = kernels[per_run:]  # drop the first run
    time_by_op: Counter[str] = Counter()
    flops = 0.0
    costliest: dict[str, Any] = {}
    for e in kernels:
        op = e["args"]["op_name"]
        time_by_op[op] += e["dur"]
        if op in MATMULS:
            inputs = e["args"]["input_type_shape"]  # a prepacked weight is not listed
            a = shape_of(inputs[0])
            out = shape_of(e["args"]["output_type_shape"][0])
            rows = int(np.prod(out[:-1]))
            inner = int(np.prod(a)) // rows  # A is [..., rows, inner] (or transposed)
            node_flops = 2.0 * rows * out[-1] * inner
            flops += node_flops
            if op == "MatMul" and len(inputs) == 1 and node_flops > costliest.get("flops", 0):
                costliest = {"a": a, "b": [inner, out[-1]], "flops": node_flops}
    total = sum(time_by_op.values())
    matmul_us = sum(time_by_op[op] for op in MATMULS)
    return {
        "share_by_op": {op: round(t / total, 4) for op, t in time_by_op.most_common()},
        "matmul_share": matmul_us / total,
        "matmul_flops_per_run": flops / runs,
        "matmul_gflops_in_graph": flops / (matmul_us * 1e-6) / 1e9,
        "costliest_matmul": costliest,
    }


def one_matmul_gflops(a_shape: list[int], b_shape: list[int], seconds: float) -> float:
    """ONNX Runtime's rate on one MatMul node of these shapes (B a weight), one thread."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal(b_shape).astype(np.float32), "b")
    out = [*a_shape[:-1], b_shape[-1]]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"])],
        "one_matmul",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, a_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    session = ort.InferenceSession(
        model.SerializeToString(),
        session_options(intra_op_threads=1),
        providers=["CPUExecutionProvider"],
    )
    feed = {"a": rng.standard_normal(a_shape).astype(np.float32)}
    flops = 2.0 * int(np.prod(out)) * a_shape[-1]

    def call(_: int) -> int:
        session.run(None, feed)
        return 1

    return rate(call, seconds) * flops / 1e9


def rate(fn: Callable[[int], int], seconds: float) -> float:
    """Units a second of ``fn(i)`` (returns the units it did), the benchmark's loop."""
    done, elapsed = timed_loop(fn, seconds)
    return done / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", type=Path, default=ROOT / "var" / "models" / "minilm")
    parser.add_argument("--seconds", type=float, default=5.0, help="per measurement and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-torch", action="store_true", help="skip sentence-transformers")
    args = parser.parse_args(argv)
    if not (args.model_dir / "groundwire-model.json").is_file():
        from groundwire_embedder.export import build_profile

        build_profile("minilm", args.model_dir)
    manifest = ModelManifest.load(args.model_dir)
    if manifest.quantized:
        print("this measures the fp32 graph; --model-dir holds an int8 one", file=sys.stderr)
        return 2
    cores = len(os.sched_getaffinity(0))
    bare = BareOrt(args.model_dir, 1)  # one thread: one lane
    onnx_path = str(args.model_dir / manifest.onnx_file)
    texts = texts_of_tokens(bare.tokenizer, TOKENS, 64, seed=TOKENS)
    calls = [texts[i : i + PER_CALL] for i in range(0, len(texts), PER_CALL)]
    feeds = [bare.feed(batch) for batch in calls]
    tokens = float(np.mean([f["input_ids"].shape[1] for f in feeds]))

    print(f"profiling {PER_CALL} x ~{tokens:.0f}-token texts, one thread…", flush=True)
    ops = profile_ops(onnx_path, feeds[0], runs=10)
    flops_per_text = ops["matmul_flops_per_run"] / PER_CALL
    costliest = ops["costliest_matmul"]
    print(
        f"MatMul work {flops_per_text / 1e9:.2f} GFLOP a text; MatMul nodes "
        f"{ops['matmul_share']:.1%} of kernel time, running at "
        f"{ops['matmul_gflops_in_graph']:.0f} GFLOP/s in the graph",
        flush=True,
    )

    torch_model = None if args.no_torch else sentence_transformer("minilm", 0)
    rounds: list[dict[str, float]] = []
    for k in range(args.rounds):

        def model_call(i: int) -> int:
            bare.run(feeds[i % len(feeds)])
            return PER_CALL

        this = {
            "ceiling_gflops": one_matmul_gflops(costliest["a"], costliest["b"], args.seconds),
            "ort_one_thread_texts_per_s": rate(model_call, args.seconds),
        }
        if torch_model is not None:

            def torch_call(i: int) -> int:  # the benchmark's client batches: 32 texts a call
                start = 32 * (i % (len(texts) // 32))
                batch = texts[start : start + 32]
                torch_model.encode(batch, batch_size=len(batch), normalize_embeddings=True)
                return len(batch)

            this["torch_texts_per_s"] = rate(torch_call, args.seconds)
        rounds.append({key: round(value, 2) for key, value in this.items()})
        print(f"round {k + 1}: " + ", ".join(f"{key} {v:.1f}" for key, v in this.items()))

    def mean(key: str) -> float:
        return float(np.mean([r[key] for r in rounds]))

    ceiling = mean("ceiling_gflops")
    ort_rate = mean("ort_one_thread_texts_per_s")
    matmul_s = flops_per_text / (ceiling * 1e9)  # a text's MatMuls at the ceiling
    other_s = (1 - ops["matmul_share"]) / ort_rate  # a text's other ops as measured
    bounds = {
        "matmuls_at_ceiling_nothing_else": cores / matmul_s,
        "matmuls_at_ceiling_other_ops_as_measured": cores / (matmul_s + other_s),
        "ort_lanes_measured_one_thread_x_cores": cores * ort_rate,
    }
    print(
        f"\nthe costliest MatMul ({costliest['a']} x {costliest['b']}) alone, one thread: "
        f"{ceiling:.0f} GFLOP/s; in the graph the MatMuls run at "
        f"{ops['matmul_gflops_in_graph']:.0f} ({ops['matmul_gflops_in_graph'] / ceiling:.0%})"
    )
    print(f"texts/s on {cores} cores (one lane each):")
    for name, value in bounds.items():
        print(f"  {name.replace('_', ' '):45} {value:6.1f}")
    report: dict[str, Any] = {
        "benchmark": "fp32 MiniLM long texts: MatMul work, the cores' MatMul rate, bounds",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": manifest.model_id,
        "machine": {"cpus": cores, "platform": platform.platform()},
        "onnxruntime": ort.__version__,
        "onnx": onnx.__version__,
        "texts": {"tokens_mean": round(tokens, 1), "per_call": PER_CALL},
        "seconds_per_measurement": args.seconds,
        "profile": {
            "share_by_op": ops["share_by_op"],
            "matmul_share": round(ops["matmul_share"], 4),
            "matmul_gflop_per_text": round(flops_per_text / 1e9, 3),
            "matmul_gflops_in_graph": round(ops["matmul_gflops_in_graph"], 1),
            "costliest_matmul": {"a": costliest["a"], "b": costliest["b"]},
        },
        "rounds": rounds,
        "ceiling_gflops_one_thread": round(ceiling, 1),
        "bounds_texts_per_s": {name: round(value, 1) for name, value in bounds.items()},
    }
    if torch_model is not None:
        torch_rate = mean("torch_texts_per_s")
        needed = 1.5 * torch_rate
        report["torch_texts_per_s"] = round(torch_rate, 1)
        report["target_1_5x_torch_texts_per_s"] = round(needed, 1)
        print(
            f"  {'sentence-transformers, every core':45} {torch_rate:6.1f}\n"
            f"  {'1.5x that (the benchmark target)':45} {needed:6.1f}"
        )
    out = RESULTS / "embedder-ceiling-minilm.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
