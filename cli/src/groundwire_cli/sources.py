"""``groundwire sources COLLECTION``: what a collection holds, one line per source.

Reads the retriever's ListSources page by page: each source's id, chunk count,
content hash, when it was ingested, title and URL (``--json`` for all of it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import TextIO

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_cli import lifecycle
from groundwire_core.grpc.client import create_channel, rpc_errors

PAGE = 500


@dataclass(frozen=True)
class SourceRow:
    source_id: str
    chunks: int
    content_hash: str
    ingested_at: float
    title: str
    url: str
    doc_type: str


async def list_sources(
    retriever_addr: str, collection: str, *, page_size: int = PAGE, timeout_s: float = 60.0
) -> list[SourceRow]:
    """Every source of ``collection``, sorted by id. Raises NotFound for a missing
    collection, Unavailable when no retriever answers."""
    rows: list[SourceRow] = []
    token = ""
    async with create_channel(retriever_addr) as channel:
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        while True:
            with rpc_errors("retriever"):
                page = await stub.ListSources(
                    retriever_pb2.ListSourcesRequest(
                        collection=collection, page_token=token, limit=page_size
                    ),
                    timeout=timeout_s,
                )
            rows.extend(
                SourceRow(
                    source_id=s.source_id,
                    chunks=s.chunks,
                    content_hash=s.content_hash,
                    ingested_at=s.ingested_at,
                    title=s.title,
                    url=s.url,
                    doc_type=s.doc_type,
                )
                for s in page.sources
            )
            token = page.next_page_token
            if not token:
                return rows


def table(rows: list[SourceRow]) -> Iterator[str]:
    """Aligned lines: id, chunks, the hash's first 12 digits, ingest time (UTC), title, URL."""
    head = ("SOURCE", "CHUNKS", "HASH", "INGESTED (UTC)", "TITLE", "URL")
    cells = [
        (
            r.source_id,
            str(r.chunks),
            r.content_hash[:12],
            time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.ingested_at)),
            r.title,
            r.url,
        )
        for r in rows
    ]
    widths = [max(len(c[i]) for c in [head, *cells]) for i in range(len(head) - 1)]
    for line in [head, *cells]:
        yield "  ".join(
            [*(cell.ljust(width) for cell, width in zip(line, widths, strict=False)), line[-1]]
        ).rstrip()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("collection", help="the collection to list")
    parser.add_argument(
        "--retriever",
        default=None,
        help=f"retriever gRPC address (default: the one `groundwire up` runs, else "
        f"{lifecycle.DEFAULT_RETRIEVER})",
    )
    parser.add_argument("--json", action="store_true", help="one JSON array, every field")


def run_command(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    addr = args.retriever or lifecycle.running_addr("retriever", lifecycle.DEFAULT_RETRIEVER)
    with lifecycle.retriever_at(addr):
        rows = asyncio.run(list_sources(addr, args.collection))
    if args.json:
        json.dump([asdict(r) for r in rows], out, indent=2)
        out.write("\n")
    else:
        for line in table(rows):
            out.write(line + "\n")
        out.write(f"{len(rows)} source(s) in {args.collection}\n")
    return 0
