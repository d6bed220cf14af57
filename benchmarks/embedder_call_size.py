"""How fast one ONNX Runtime session runs per text as the model call grows.

Runs the bare session (``session.run`` on pre-tokenized batches, the embedder's thread
settings) on short (~32 tokens) and long (~256 tokens) texts in calls of growing size,
and prints texts/s per call size. It is the measurement behind the embedder's default
``MAX_BATCH_TOKENS``: on a small CPU, calls of a few hundred tokens run fastest (the
activations stay in cache), so the engine cuts batches into calls of that size.

    python benchmarks/embedder_call_size.py                      # MiniLM, built if missing
    python benchmarks/embedder_call_size.py --model-dir DIR --seconds 4

Writes ``benchmarks/results/embedder-call-size-<profile>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path

import onnxruntime as ort
from embedder_bench import RESULTS, BareOrt, texts_of_tokens, timed_loop

from groundwire_embedder.models import ModelManifest

ROOT = Path(__file__).resolve().parent.parent
SIZES = {"short": (32, (2, 4, 8, 16, 32, 64, 128, 256)), "long": (256, (1, 2, 4, 8, 16, 32, 64))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", type=Path, default=ROOT / "var" / "models" / "minilm")
    parser.add_argument("--seconds", type=float, default=4.0, help="per call size")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0 = all)")
    args = parser.parse_args(argv)
    if not (args.model_dir / "groundwire-model.json").is_file():
        from groundwire_embedder.export import build_profile

        build_profile("minilm", args.model_dir)
    manifest = ModelManifest.load(args.model_dir)
    bare = BareOrt(args.model_dir, args.threads)
    rows: list[dict[str, object]] = []
    for shape, (tokens, sizes) in SIZES.items():
        texts = texts_of_tokens(bare.tokenizer, tokens, 512, seed=tokens)
        for size in sizes:
            feeds = [bare.feed(texts[i : i + size]) for i in range(0, len(texts), size)]

            def run(i: int, feeds: list[dict[str, object]] = feeds) -> int:
                feed = feeds[i % len(feeds)]
                bare.run(feed)  # type: ignore[arg-type]
                return len(feed["input_ids"])  # type: ignore[arg-type]

            rate = timed_loop(run, args.seconds)
            rows.append({"shape": shape, "texts": size, "tokens": size * tokens, "rate": rate})
            print(
                f"{shape:5} {size:4d} texts/call (~{size * tokens:6,} tokens): {rate:7.1f} texts/s",
                flush=True,
            )
    out = (
        RESULTS
        / f"embedder-call-size-{manifest.profile}{'-int8' if manifest.quantized else ''}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "benchmark": "embedder texts/s per model call size (bare session.run)",
                "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "model": manifest.model_id,
                "quantized": manifest.quantized,
                "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                "onnxruntime": ort.__version__,
                "threads": args.threads,
                "seconds_per_size": args.seconds,
                "texts_per_s": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
