"""One model run on every core at a time, or one one-thread run per core side by side?

The measurement behind the model services' ``MODEL_LANES``. On the bare ONNX Runtime
session (real texts, tokenized beforehand) it times, for short (~32 tokens) and long
(~256 tokens) texts in calls of the sizes the embedder's 512-token budget makes:

* ``alone``  — one session on all intra-op threads, called from one thread (one run at
  a time: MODEL_LANES=1);
* ``lanes``  — one one-thread session called from one thread per core at once (what
  the services do while requests wait);
* ``shared pool`` — the all-threads session called from as many threads at once: why
  the lanes need a session of their own;

and a lone 16-token query on each session (where ``alone`` must stay). The three ways
alternate in rounds, so a machine that drifts slows them alike; texts/s pool the rounds.

    python benchmarks/embedder_lanes.py                        # MiniLM fp32, built if missing
    python benchmarks/embedder_lanes.py --model-dir DIR --rounds 5

Writes ``benchmarks/results/embedder-lanes-<profile>[-int8].json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import onnxruntime as ort
from embedder_bench import RESULTS, BareOrt, query_of_tokens, texts_of_tokens

from groundwire_core.onnx_models import session_options
from groundwire_embedder.models import ModelManifest

ROOT = Path(__file__).resolve().parent.parent
# texts per call as the embedder's default 512-token budget cuts them
SHAPES = {"short": (32, 16), "long": (256, 2)}
WAYS = ("alone", "lanes", "shared pool")


def texts_per_s(
    session: ort.InferenceSession, feeds: list[dict[str, np.ndarray]], callers: int, seconds: float
) -> tuple[int, float]:
    """Texts done and seconds taken by ``callers`` threads calling ``session`` at once."""
    done = [0] * callers
    stop = time.perf_counter() + seconds

    def call(lane: int) -> None:
        i = lane
        while time.perf_counter() < stop:
            feed = feeds[i % len(feeds)]
            session.run(None, feed)
            done[lane] += len(feed["input_ids"])
            i += callers

    started = time.perf_counter()
    threads = [threading.Thread(target=call, args=(lane,)) for lane in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done), time.perf_counter() - started


def query_ms(session: ort.InferenceSession, feed: dict[str, np.ndarray], calls: int) -> float:
    for _ in range(20):
        session.run(None, feed)
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        session.run(None, feed)
        times.append((time.perf_counter() - started) * 1e3)
    return float(np.percentile(times, 50))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", type=Path, default=ROOT / "var" / "models" / "minilm")
    parser.add_argument("--seconds", type=float, default=3.0, help="per way, shape and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--query-calls", type=int, default=300)
    args = parser.parse_args(argv)
    if not (args.model_dir / "groundwire-model.json").is_file():
        from groundwire_embedder.export import build_profile

        build_profile("minilm", args.model_dir)
    manifest = ModelManifest.load(args.model_dir)
    cores = len(os.sched_getaffinity(0))
    bare = BareOrt(args.model_dir, 0)  # the tokenizer and feeds; its session is `alone`
    onnx_path = str(args.model_dir / manifest.onnx_file)
    one_thread = ort.InferenceSession(
        onnx_path, session_options(intra_op_threads=1), providers=["CPUExecutionProvider"]
    )
    sessions = {"alone": bare.session, "lanes": one_thread, "shared pool": bare.session}
    callers = {"alone": 1, "lanes": cores, "shared pool": cores}

    shapes: dict[str, dict[str, object]] = {}
    for shape, (tokens, per_call) in SHAPES.items():
        texts = texts_of_tokens(bare.tokenizer, tokens, 256, seed=tokens)
        feeds = [bare.feed(texts[i : i + per_call]) for i in range(0, len(texts), per_call)]
        for session in (bare.session, one_thread):
            session.run(None, feeds[0])  # warm this shape
        totals = {way: [0, 0.0] for way in WAYS}
        rounds: list[dict[str, float]] = []
        for _ in range(args.rounds):
            this_round = {}
            for way in WAYS:
                done, seconds = texts_per_s(sessions[way], feeds, callers[way], args.seconds)
                totals[way][0] += done
                totals[way][1] += seconds
                this_round[way] = round(done / seconds, 1)
            rounds.append(this_round)
        rates = {way: round(done / seconds, 1) for way, (done, seconds) in totals.items()}
        shapes[shape] = {
            "tokens": tokens,
            "texts_per_call": per_call,
            "texts_per_s": rates,
            "by_round": rounds,
            "lanes_over_alone": round(rates["lanes"] / rates["alone"], 2),
            "shared_pool_over_alone": round(rates["shared pool"] / rates["alone"], 2),
        }
        print(
            f"{shape:5} {per_call:2d} x ~{tokens} tokens: alone {rates['alone']:6.1f} texts/s, "
            f"{cores} lanes {rates['lanes']:6.1f} ({rates['lanes'] / rates['alone']:.2f}x), "
            f"shared pool {rates['shared pool']:6.1f} "
            f"({rates['shared pool'] / rates['alone']:.2f}x)",
            flush=True,
        )

    query = bare.feed([query_of_tokens(bare.tokenizer, 16)])
    lone = {
        "alone": round(query_ms(bare.session, query, args.query_calls), 2),
        "one_thread": round(query_ms(one_thread, query, args.query_calls), 2),
    }
    print(
        f"a lone 16-token query, p50: all threads {lone['alone']:.2f} ms, "
        f"one thread {lone['one_thread']:.2f} ms",
        flush=True,
    )

    suffix = "-int8" if manifest.quantized else ""
    out = RESULTS / f"embedder-lanes-{manifest.profile}{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "one run on all threads vs one one-thread run per core (bare session.run)",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": manifest.model_id,
        "quantized": manifest.quantized,
        "machine": {"cpus": cores, "platform": platform.platform()},
        "onnxruntime": ort.__version__,
        "seconds_per_way": args.seconds,
        "rounds": args.rounds,
        "shapes": shapes,
        "lone_query_p50_ms": lone,
    }
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
