"""``python -m groundwire_retriever.store.optimize_shard SOURCE TARGET``: copies an
EdgeShard folder and builds the copy's search indexes (HNSW, int8 quantization,
segment merges) in a process of its own.

qdrant-edge's ``optimize`` holds Python's GIL for the whole build (~30 s at 100k
chunks on 2 cores), so ``EdgeEngine.optimize`` runs it here while the retriever goes
on answering from the original. The copy is made here too: qdrant-edge's searches
also hold the GIL, and a thread of the retriever copying file by file waited for it
at every file while searches ran back to back. The build runs at the searches' CPU
priority: until it is done they run on the slower unindexed shard. Prints one JSON
line: ``{"built": bool, "seconds": s}``; exits 1 with the reason on stderr when the
shard cannot be built.
"""

from __future__ import annotations

import json
import shutil
import sys
import time

import qdrant_edge as qe


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(
            "usage: python -m groundwire_retriever.store.optimize_shard SOURCE TARGET",
            file=sys.stderr,
        )
        return 2
    source, target = argv
    started = time.perf_counter()
    try:
        shutil.copytree(source, target)
        shard = qe.EdgeShard.load(target, None)  # the configuration the folder records
        try:
            built = bool(shard.optimize())
            shard.flush()
        finally:
            shard.close()
    except Exception as exc:  # the parent logs it and keeps the original
        print(f"building the search indexes of a copy of {source} failed: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"built": built, "seconds": round(time.perf_counter() - started, 2)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
