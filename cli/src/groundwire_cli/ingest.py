"""Client side of ingestion: read files, stream them to the retriever, show progress."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.grpc.client import create_channel, rpc_errors

SUFFIXES = (".md", ".markdown", ".txt", ".html", ".htm", ".pdf")
BATCH_FILES = 32
BATCH_BYTES = 16 * 1024 * 1024  # well under the 64 MiB gRPC message limit


@dataclass(frozen=True)
class IngestTotals:
    ingested: int
    unchanged: int
    skipped: list[tuple[str, str]]
    chunks_written: int


def _batches(files: list[Path]) -> Iterable[list[Path]]:
    """Files grouped by count and size; a file larger than the byte budget goes alone
    (the retriever rejects it with a reason if it is over its own limit)."""
    batch: list[Path] = []
    size = 0
    for f in files:
        n = f.stat().st_size
        if batch and (len(batch) >= BATCH_FILES or size + n > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(f)
        size += n
    if batch:
        yield batch


def find_documents(paths: Iterable[Path]) -> list[Path]:
    """Files under ``paths`` with a supported suffix, sorted."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(p for p in sorted(path.rglob("*")) if p.suffix.lower() in SUFFIXES)
        elif path.exists():
            found.append(path)
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
    return found


async def ingest_files(
    retriever_addr: str,
    collection: str,
    files: list[Path],
    *,
    root: Path | None = None,
    on_progress: Callable[[retriever_pb2.IngestProgress], None] | None = None,
    timeout_s: float = 600.0,
) -> IngestTotals:
    """Ingests ``files`` into ``collection`` (created if missing), in batches."""
    ingested = unchanged = chunks = 0
    skipped: list[tuple[str, str]] = []
    channel = create_channel(retriever_addr)
    try:
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        for batch in _batches(files):
            docs = [
                retriever_pb2.Document(
                    source_id=str(f.relative_to(root) if root else f),
                    content=f.read_bytes(),
                    filename=f.name,
                )
                for f in batch
            ]
            request = retriever_pb2.IngestRequest(
                collection=collection, documents=docs, create_collection=True
            )
            with rpc_errors("retriever"):
                async for event in stub.Ingest(request, timeout=timeout_s):
                    if event.HasField("progress") and on_progress is not None:
                        on_progress(event.progress)
                    if event.HasField("report"):
                        r = event.report
                        ingested += r.ingested
                        unchanged += r.unchanged
                        chunks += r.chunks_written
                        skipped.extend(
                            (d.source_id, d.reason)
                            for d in r.documents
                            if d.status == retriever_pb2.DOCUMENT_STATUS_SKIPPED
                        )
    finally:
        await channel.close()
    return IngestTotals(ingested, unchanged, skipped, chunks)
