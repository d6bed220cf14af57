"""The parse sandbox's worker process: parses and chunks one document at a time.

Run by ``ParseSandbox`` as ``python -m groundwire_retriever.ingest.sandbox_worker
MEMORY_BYTES``; it caps its own address space (RLIMIT_AS) before importing any
parser, so a document that makes a parser allocate without bound ends in a
MemoryError here, never in the retriever.

Protocol on stdin/stdout, every frame a 4-byte big-endian length and a body. The
worker sends ``{"ready": true}`` once imported; then for each job the parent sends a
JSON header (format, title, filename, chunk limits, ``counted``) and the raw content
as a second frame. With ``counted`` the worker asks for token counts
(``{"count": [...]}``, answered by ``{"counts": [ints]}``: the parent calls the
embedder); otherwise it counts with ``approx_tokens``. It ends each job with one of
``{"done": {"parsed": ...}}`` (the chunks before it), ``{"refused": reason}``,
``{"failed": reason}`` or ``{"memory": true}`` (after which it exits, so that a
fresh process takes the next job). Long lists (texts to count, chunks) come first in
``{"more": kind, "items": [...]}`` frames of ~128K characters, so the parent never
decodes a large frame on its event loop. JSON rather than pickle: the parent must not
run code a compromised worker chose.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import struct
import sys
from typing import Any, BinaryIO

_LENGTH = struct.Struct(">I")
# Long lists (texts to count, chunks) go in frames of about this many characters:
# the parent decodes each on its event loop, and json.loads holds the GIL throughout.
_PART_CHARS = 128 * 1024


def read_frame(stream: BinaryIO) -> bytes | None:
    """One frame's body; None at the end of the stream."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    body = stream.read(size)
    if len(body) < size:
        return None
    return body


def write_frame(stream: BinaryIO, message: dict[str, Any]) -> None:
    body = json.dumps(message).encode()
    stream.write(_LENGTH.pack(len(body)) + body)
    stream.flush()


def write_list(stream: BinaryIO, kind: str, items: list[Any], last: dict[str, Any]) -> None:
    """``items`` in frames of ``{"more": kind, "items": [...]}`` of about _PART_CHARS,
    then ``last`` (whose own ``kind`` list, if any, the parent appends to them)."""
    part: list[Any] = []
    size = 0
    for item in items:
        part.append(item)
        size += len(item) if isinstance(item, str) else len(item[-1]) + 16
        if size >= _PART_CHARS:
            write_frame(stream, {"more": kind, "items": part})
            part, size = [], 0
    if part:
        write_frame(stream, {"more": kind, "items": part})
    write_frame(stream, last)


def _run_job(job: dict[str, Any], content: bytes, inp: BinaryIO, out: BinaryIO) -> dict[str, Any]:
    # Imported here, after the memory limit is set (see main).
    from groundwire_core.errors import InvalidInput
    from groundwire_retriever.ingest.chunker import TextChunk, approx_tokens, plan_chunks
    from groundwire_retriever.ingest.parsers import parse

    try:
        parsed = parse(content, job["format"], title=job["title"], filename=job["filename"])
        plan = plan_chunks(
            parsed.title,
            parsed.body,
            summary=parsed.summary,
            markdown=parsed.markdown,
            min_tokens=job["min_tokens"],
            max_tokens=job["max_tokens"],
            overlap_tokens=job["overlap_tokens"],
        )
        chunks: list[TextChunk]
        try:
            request = next(plan)
            while True:
                if job["counted"]:
                    write_list(out, "count", request, {"count": []})
                    answer = read_frame(inp)
                    if answer is None:
                        sys.exit(0)  # the parent gave up on this job
                    counts = json.loads(answer)["counts"]
                else:
                    counts = [approx_tokens(t) for t in request]
                request = plan.send(counts)
        except StopIteration as done:
            chunks = done.value
        # The body stays here: the parent needs the chunks and the metadata.
        meta = dataclasses.asdict(dataclasses.replace(parsed, body=""))
        return {
            "done": {"parsed": meta},
            "chunks": [[c.index, list(c.heading_path), c.text] for c in chunks],
        }
    except InvalidInput as error:
        if _hit_memory_limit():  # e.g. the HTML parser's failure, wrapped by parse()
            return {"memory": True}
        return {"refused": error.message}
    except MemoryError:
        return {"memory": True}
    except RecursionError:
        return {"failed": "the document nests too deeply to parse (RecursionError)"}
    except Exception as error:  # any parser bug is this document's failure, not the batch's
        if _hit_memory_limit():  # C libraries report a failed malloc their own way
            return {"memory": True}
        return {"failed": f"the document could not be parsed ({type(error).__name__})"}


def _hit_memory_limit() -> bool:
    """Whether this process's peak address space came within 16 MiB of RLIMIT_AS
    (libxml2, for one, turns a failed allocation into a syntax error)."""
    limit, _ = resource.getrlimit(resource.RLIMIT_AS)
    if limit == resource.RLIM_INFINITY:
        return False
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmPeak:"):
                    return int(line.split()[1]) * 1024 >= limit - (16 << 20)
    except OSError:
        pass
    return False


def main() -> None:
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    # Frames go to the original stdout; whatever a library prints goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    inp = sys.stdin.buffer
    import groundwire_retriever.ingest.parsers  # noqa: F401  (the cost of starting, once)

    write_frame(out, {"ready": True})
    while True:
        header = read_frame(inp)
        if header is None:
            return  # the parent closed the pipe: stop
        job = json.loads(header)
        content = read_frame(inp)
        if content is None:
            return
        reply = _run_job(job, content, inp, out)
        del content
        try:
            write_list(out, "chunks", reply.pop("chunks", []), reply)
        except MemoryError:  # the chunks fit, their JSON did not
            del reply
            reply = {"memory": True}
            write_frame(out, reply)
        if "memory" in reply:
            return


if __name__ == "__main__":
    main()
