"""Client side of ingestion: read files, send them to the retriever as ingest jobs
(a batch each), follow each job and show its progress."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import grpc

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_cli.progress import advance, progress
from groundwire_core.errors import BackendFailure, InvalidInput
from groundwire_core.grpc.client import create_channel, rpc_errors

# The retriever's parsers read these (its ingest.parsers maps each to a format).
SUFFIXES = (
    ".md",
    ".markdown",
    ".txt",
    ".html",
    ".htm",
    ".pdf",
    ".rst",
    ".docx",
    ".pptx",
    ".ipynb",
    ".epub",
)
BATCH_FILES = 32
BATCH_BYTES = 16 * 1024 * 1024  # well under the 64 MiB gRPC message limit
FULL_REINDEX_BYTES = 60 * 1024 * 1024
"""A full re-index is one request (the documents it lists become the collection), so
it is bounded by the gRPC message limit (64 MiB) less room for the envelope."""


@dataclass(frozen=True)
class IngestTotals:
    ingested: int
    unchanged: int
    skipped: list[tuple[str, str]]
    chunks_written: int
    updated: int = 0
    """Sources that were stored already and changed (text, title, URL, type, metadata)."""


def default_root(paths: Sequence[Path]) -> Path:
    """The folder source ids are relative to when no ``--root`` is given: the folder
    given (a file's own folder), or the deepest folder holding all the paths given.
    Absolute, so the ids do not depend on the working directory."""
    if not paths:
        raise ValueError("no paths given")
    folders = [str(p.resolve() if p.is_dir() else p.resolve().parent) for p in paths]
    return Path(os.path.commonpath(folders))


def source_id(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` with ``/`` separators: the same file has the same
    id whichever folder the command runs from. Raises InvalidInput for a file outside
    ``root``."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        raise InvalidInput(f"{path} is not under the root folder {root}") from None


def source_url(prefix: str, relative: str) -> str:
    """The published URL of a file: ``prefix`` + its relative path, percent-encoded
    (``--url-prefix https://docs.example.com/`` maps ``guide/install.html`` to
    ``https://docs.example.com/guide/install.html``); "" without a prefix."""
    if not prefix:
        return ""
    return prefix.rstrip("/") + "/" + quote(relative, safe="/")


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


async def run_job(
    stub: retriever_pb2_grpc.RetrieverServiceStub,
    request: retriever_pb2.StartJobRequest,
    *,
    on_progress: Callable[[retriever_pb2.IngestProgress], None] | None = None,
    timeout_s: float | None = 600.0,
) -> retriever_pb2.Job:
    """Starts a job and follows it (WatchJob) to its end, calling ``on_progress`` each
    time more documents are done; the finished job. When this task is cancelled
    (Ctrl-C) the job is cancelled too: it stops before its next document. Raises
    BackendFailure for a job that failed or was cancelled elsewhere."""
    with rpc_errors("retriever"):
        job: retriever_pb2.Job = await stub.StartJob(request, timeout=timeout_s)
    done = 0
    try:
        with rpc_errors("retriever"):
            async for update in stub.WatchJob(retriever_pb2.GetJobRequest(id=job.id)):
                job = update
                if job.counts.done > done and on_progress is not None:
                    on_progress(
                        retriever_pb2.IngestProgress(done=job.counts.done, total=job.counts.total)
                    )
                done = job.counts.done
    except asyncio.CancelledError:
        with contextlib.suppress(grpc.aio.AioRpcError):
            await stub.CancelJob(retriever_pb2.CancelJobRequest(id=job.id), timeout=5.0)
        raise
    if job.state != retriever_pb2.JOB_STATE_SUCCEEDED:
        state = retriever_pb2.JobState.Name(job.state).removeprefix("JOB_STATE_").lower()
        raise BackendFailure(f"job {job.id} {state}: {job.error}", dependency="retriever")
    return job


async def ingest_files(
    retriever_addr: str,
    collection: str,
    files: list[Path],
    *,
    root: Path | None = None,
    url_prefix: str = "",
    on_progress: Callable[[retriever_pb2.IngestProgress], None] | None = None,
    timeout_s: float | None = 600.0,
    full_reindex: bool = False,
) -> IngestTotals:
    """Ingests ``files`` into ``collection`` (created if missing), in batches. With
    ``full_reindex`` the files become the collection's new generation in one request
    (sources not among them disappear; the old generation serves until it is done),
    with no deadline.

    Source ids are the files' paths relative to ``root`` (default: the deepest folder
    holding them all); with ``url_prefix`` each file's URL is the prefix plus that
    path. Raises InvalidInput when the files are too large for one request, or one is
    outside ``root``."""
    base = root if root is not None else default_root(files) if files else Path.cwd()
    ids = {f: source_id(f, base) for f in files}
    if full_reindex:
        total = sum(f.stat().st_size for f in files)
        if total > FULL_REINDEX_BYTES:
            raise InvalidInput(
                f"a full re-index is one request, and these files total "
                f"{total / 2**20:.0f} MiB, over {FULL_REINDEX_BYTES // 2**20} MiB: ingest "
                "them into a new collection instead (--collection NEW) and switch to it"
            )
        batches: Iterable[list[Path]] = [files]
        timeout_s = None
    else:
        batches = _batches(files)
    ingested = updated = unchanged = chunks = 0
    skipped: list[tuple[str, str]] = []
    finished = 0  # documents of the batches before this one

    def tick(batch: retriever_pb2.IngestProgress) -> None:
        if on_progress is not None:  # done and total over all the files
            on_progress(retriever_pb2.IngestProgress(done=finished + batch.done, total=len(files)))

    channel = create_channel(retriever_addr)
    try:
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        for batch in batches:
            docs = [
                retriever_pb2.Document(
                    source_id=ids[f],
                    content=f.read_bytes(),
                    filename=f.name,
                    url=source_url(url_prefix, ids[f]),
                )
                for f in batch
            ]
            job = await run_job(
                stub,
                retriever_pb2.StartJobRequest(
                    collection=collection,
                    ingest=retriever_pb2.IngestJob(
                        documents=docs, create_collection=True, full_reindex=full_reindex
                    ),
                ),
                on_progress=tick,
                timeout_s=timeout_s,
            )
            c = job.counts
            finished += c.total
            ingested += c.ingested
            updated += c.updated
            unchanged += c.unchanged
            chunks += c.chunks_written
            skipped.extend((d.source_id, d.error) for d in job.documents if d.outcome == "skipped")
    finally:
        await channel.close()
    return IngestTotals(ingested, unchanged, skipped, chunks, updated)


def ingest_with_progress(
    retriever_addr: str,
    collection: str,
    files: list[Path],
    *,
    root: Path | None = None,
    url_prefix: str = "",
    full_reindex: bool = False,
) -> IngestTotals:
    """``ingest_files`` from synchronous code, with a progress bar on stderr and the
    totals (and each skipped document's reason) printed."""
    what = "re-index" if full_reindex else "ingest"
    with progress(total=len(files), unit="doc", desc=f"{what} → {collection}") as bar:
        totals = asyncio.run(
            ingest_files(
                retriever_addr,
                collection,
                files,
                root=root,
                url_prefix=url_prefix,
                on_progress=lambda p: advance(bar, p.done, p.total),
                full_reindex=full_reindex,
            )
        )
    print(
        f"ingested {totals.ingested}, updated {totals.updated}, unchanged {totals.unchanged}, "
        f"skipped {len(totals.skipped)}, chunks written {totals.chunks_written}",
        flush=True,
    )
    for source, reason in totals.skipped:
        print(f"  skipped {source}: {reason}")
    return totals
