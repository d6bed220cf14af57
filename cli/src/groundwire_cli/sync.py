"""``groundwire sync``: keep a collection in step with a folder, a git working tree or a
website, deletions included: a sync job on the retriever (queued behind the collection's
other jobs, followed with a progress bar, cancelled by Ctrl-C); ``--dry-run`` asks the
Sync RPC for the delta at once.

The retriever reads the folder (or crawls the site) itself, so a folder path must be
one the retriever sees: on the same machine with ``groundwire up``, a mounted volume
in Kubernetes (docs/cli.md). A source comes from the command line, or from the
settings file's ``[sync.<collection>]`` tables::

    [sync.docs]
    source = "~/src/product/docs"      # a folder (relative: from this file's folder) or URL
    git = true                         # only the files git tracks
    include = ["*.md", "*.rst"]
    exclude = ["drafts/*"]

    [sync.site]
    source = "https://docs.example.com/guide/"   # or .../sitemap.xml
    page_limit = 200
    delay_s = 1.0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_cli import config as config_cli
from groundwire_cli import lifecycle
from groundwire_cli.child_settings import user_environment
from groundwire_cli.ingest import run_job
from groundwire_cli.progress import advance, progress
from groundwire_core.errors import InvalidInput
from groundwire_core.grpc.client import create_channel, rpc_errors
from groundwire_core.urls import is_web_url

KINDS = {
    "folder": retriever_pb2.SYNC_SOURCE_KIND_FOLDER,
    "git": retriever_pb2.SYNC_SOURCE_KIND_GIT,
    "web": retriever_pb2.SYNC_SOURCE_KIND_WEB,
}
_KEYS = {
    "source",
    "git",
    "include",
    "exclude",
    "max_bytes",
    "page_limit",
    "delay_s",
    "prefix",
    "url_prefix",
}
_LISTED = ("new", "changed", "renamed", "deleted", "skipped", "failed")
_SYNC_OUTCOMES = {"updated": "changed"}
"""A job document's outcome -> the sync report's, where they differ (``ingested`` is
``new`` or ``renamed``: job_report tells them apart)."""
JOB_START_S = 30.0
"""Deadline of StartJob alone (it queues the job); the job itself has none: a crawl
takes as long as its politeness delay makes it."""


def definition(values: Mapping[str, Any], base: Path | None = None) -> retriever_pb2.SyncDefinition:
    """A definition from ``source`` (a folder or an http(s) URL) and the options; a
    relative folder is taken from ``base`` (the settings file's folder), else the
    working folder, and sent absolute. Raises InvalidInput for an unknown key or a
    missing source."""
    unknown = set(values) - _KEYS
    if unknown:
        raise InvalidInput(f"unknown sync option(s) {sorted(unknown)}; known: {sorted(_KEYS)}")
    source = str(values.get("source") or "")
    if not source:
        raise InvalidInput("a sync needs a source: a folder or an http(s) URL")
    d = retriever_pb2.SyncDefinition(
        include=list(values.get("include") or []),
        exclude=list(values.get("exclude") or []),
        max_bytes=int(values.get("max_bytes") or 0),
        page_limit=int(values.get("page_limit") or 0),
        prefix=str(values.get("prefix") or ""),
        url_prefix=str(values.get("url_prefix") or ""),
    )
    if values.get("delay_s") is not None:
        d.delay_s = float(values["delay_s"])
    if is_web_url(source):
        d.kind, d.location = KINDS["web"], source
        return d
    folder = Path(source).expanduser()
    if not folder.is_absolute():
        folder = (base or Path.cwd()) / folder
    d.kind = KINDS["git" if values.get("git") else "folder"]
    d.location = str(folder.resolve())
    return d


def file_definitions(
    path: Path | None, overrides: Mapping[str, Any] | None = None
) -> dict[str, retriever_pb2.SyncDefinition]:
    """``collection -> definition`` from the settings file's ``[sync.*]`` tables, each
    with ``overrides`` (the command line's options) over it. Raises InvalidInput for
    bad TOML or a bad table."""
    if path is None:
        return {}
    try:
        tables = tomllib.loads(path.read_text(encoding="utf-8")).get(config_cli.SYNC_TABLE, {})
    except tomllib.TOMLDecodeError as error:
        raise InvalidInput(f"{path} is not valid TOML: {error}") from None
    found: dict[str, retriever_pb2.SyncDefinition] = {}
    for collection, values in tables.items():
        if not isinstance(values, dict):
            raise InvalidInput(f"{path}: [sync] holds one table per collection, [sync.NAME]")
        try:
            found[collection] = definition({**values, **(overrides or {})}, path.parent)
        except InvalidInput as error:
            raise InvalidInput(f"{path} [sync.{collection}]: {error.message}") from None
    return found


async def preview(
    retriever_addr: str,
    collection: str,
    request_definition: retriever_pb2.SyncDefinition,
    *,
    on_progress: Callable[[retriever_pb2.SyncProgress], None] | None = None,
) -> retriever_pb2.SyncReport:
    """The delta a sync would apply, from the Sync RPC's dry run (at once: not a job,
    nothing written; no deadline, a crawl takes as long as its politeness delay makes
    it). Raises what the RPC raises."""
    request = retriever_pb2.SyncRequest(
        collection=collection, definition=request_definition, dry_run=True
    )
    report = retriever_pb2.SyncReport()
    async with create_channel(retriever_addr) as channel:
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        with rpc_errors("retriever"):
            async for event in stub.Sync(request):
                if event.HasField("progress") and on_progress is not None:
                    on_progress(event.progress)
                elif event.HasField("report"):
                    report = event.report
    return report


async def sync_job(
    retriever_addr: str,
    collection: str,
    request_definition: retriever_pb2.SyncDefinition,
    *,
    on_progress: Callable[[retriever_pb2.IngestProgress], None] | None = None,
) -> retriever_pb2.Job:
    """Runs the sync as a retriever job (queued behind the collection's other jobs, as
    an HTTP sync is) and follows it to its end: the finished job, with its per-source
    report. ``on_progress`` gets the sources done of those known so far (the total
    grows while the scan runs). Cancelling this task (Ctrl-C) cancels the job: the
    sources already applied stay, deletions wait for the next sync. Raises
    BackendFailure for a job that failed or was cancelled elsewhere, InvalidInput for
    a definition the retriever refuses."""
    request = retriever_pb2.StartJobRequest(collection=collection, sync=request_definition)
    async with create_channel(retriever_addr) as channel:
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        return await run_job(stub, request, on_progress=on_progress, timeout_s=JOB_START_S)


def job_report(job: retriever_pb2.Job) -> retriever_pb2.SyncReport:
    """A finished sync job read as the Sync RPC's report, so a job and a dry run print
    alike: the job's document outcomes named as the sync's again (``ingested`` is a
    rename's new id when the delta pairs it, else ``new``; ``updated`` is
    ``changed``; a rename's old id, deleted once the new one is in, is the rename's
    ``(from …)`` and not listed again as deleted)."""
    renamed = {r.to_id for r in job.delta.renamed}
    moved_from = {r.from_id for r in job.delta.renamed}
    sources = [
        retriever_pb2.SyncSource(
            source_id=d.source_id,
            outcome=(
                ("renamed" if d.source_id in renamed else "new")
                if d.outcome == "ingested"
                else _SYNC_OUTCOMES.get(d.outcome, d.outcome)
            ),
            chunks=d.chunks,
            reason=d.error,
        )
        for d in job.documents
        if not (d.outcome == "deleted" and d.source_id in moved_from)
    ]
    ended = job.finished_at or job.started_at
    return retriever_pb2.SyncReport(
        collection=job.collection,
        delta=job.delta,
        sources=sources,
        chunks_written=job.counts.chunks_written,
        dry_run=False,
        # the retriever finishes a sync job SUCCEEDED with an error only when its crawl
        # stopped early (page limit, a transient error): the report's `complete`
        complete=not (job.state == retriever_pb2.JOB_STATE_SUCCEEDED and job.error),
        cancelled=job.state == retriever_pb2.JOB_STATE_CANCELLED,
        seconds=max(0.0, ended - job.started_at) if job.started_at else 0.0,
    )


def summary(report: retriever_pb2.SyncReport) -> list[str]:
    """The report as lines: the counts, then each source that was not unchanged."""
    d = report.delta
    head = (
        f"{'dry run (nothing written): ' if report.dry_run else ''}sync {report.collection}: "
        f"{len(d.new)} new, {len(d.changed)} changed, {d.unchanged} unchanged, "
        f"{len(d.deleted)} deleted, {len(d.renamed)} renamed; "
        f"{report.chunks_written} chunks written in {report.seconds:.1f} s"
    )
    lines = [head]
    if report.cancelled:
        lines.append("  cancelled: sources already applied stay, deletions wait for the next sync")
    if not report.complete:
        lines.append("  the crawl was cut short (page limit or an error): unseen pages were kept")
    for outcome in _LISTED:
        for s in report.sources:
            if s.outcome == outcome:
                reason = f"  ({s.reason})" if s.reason else ""
                lines.append(f"  {outcome:<8} {s.source_id}{reason}")
    return lines


def as_json(report: retriever_pb2.SyncReport, job_id: str = "") -> dict[str, Any]:
    """The report as the HTTP route's SyncReport, with ``job`` (its id; "" for a dry
    run)."""
    d = report.delta
    return {
        "job": job_id,
        "collection": report.collection,
        "dry_run": report.dry_run,
        "complete": report.complete,
        "cancelled": report.cancelled,
        "chunks_written": report.chunks_written,
        "seconds": report.seconds,
        "delta": {
            "new": list(d.new),
            "changed": list(d.changed),
            "unchanged": d.unchanged,
            "deleted": list(d.deleted),
            "renamed": [{"from": r.from_id, "to": r.to_id} for r in d.renamed],
        },
        "sources": [
            {"source_id": s.source_id, "outcome": s.outcome, "chunks": s.chunks, "reason": s.reason}
            for s in report.sources
        ],
    }


def add_parser(sub: Any) -> None:
    """Registers ``groundwire sync`` on the command's subparsers."""
    p = sub.add_parser(
        "sync",
        help="sync a collection with a folder, git working tree or website (deletions too)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "source",
        nargs="?",
        help="a folder the retriever can read, or an http(s) start or sitemap URL; "
        "without it, the settings file's [sync.COLLECTION] tables",
    )
    p.add_argument("--collection", default=None, help="default: docs, or every [sync.*] table")
    p.add_argument("--git", action="store_true", default=None, help="only the files git tracks")
    p.add_argument("--include", action="append", default=None, help="glob to keep (repeatable)")
    p.add_argument("--exclude", action="append", default=None, help="glob to drop (repeatable)")
    p.add_argument("--max-bytes", type=int, default=None, help="skip larger files (20 MiB)")
    p.add_argument("--page-limit", type=int, default=None, help="web: pages at most (500)")
    p.add_argument("--delay", type=float, default=None, help="web: seconds between requests (1)")
    p.add_argument("--prefix", default=None, help="web: URL path to stay under")
    p.add_argument("--url-prefix", default=None, help="folder: the site the files are published on")
    p.add_argument("--dry-run", action="store_true", help="print the delta; write nothing")
    p.add_argument("--json", action="store_true", help="the reports as JSON")
    p.add_argument(
        "--retriever",
        default=None,
        help=f"retriever gRPC address (default: the one `groundwire up` runs, else "
        f"{lifecycle.DEFAULT_RETRIEVER})",
    )
    p.add_argument("--config", type=Path, default=None, help="settings file with [sync.*] tables")
    p.set_defaults(func=run_command)


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    given = {
        "git": args.git,
        "include": args.include,
        "exclude": args.exclude,
        "max_bytes": args.max_bytes,
        "page_limit": args.page_limit,
        "delay_s": args.delay,
        "prefix": args.prefix,
        "url_prefix": args.url_prefix,
    }
    return {k: v for k, v in given.items() if v is not None}


def _definitions(args: argparse.Namespace) -> dict[str, retriever_pb2.SyncDefinition]:
    if args.source:
        return {args.collection or "docs": definition({"source": args.source, **_flags(args)})}
    path = config_cli.config_path(args.config, user_environment())
    defined = file_definitions(path, _flags(args))  # the command line's options win
    if args.collection:
        if args.collection not in defined:
            raise InvalidInput(f"no [sync.{args.collection}] table in {path or 'a settings file'}")
        defined = {args.collection: defined[args.collection]}
    if not defined:
        raise InvalidInput(
            f"nothing to sync: give a folder or URL, or add [sync.NAME] tables to "
            f"{path or 'the settings file (' + config_cli.CONFIG_NAME + ')'}"
        )
    return defined


def run_command(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """Runs each definition's sync (a job each, one after the other; a dry run asks
    for the delta); 1 when a source failed (a cron job should say so)."""
    addr = args.retriever or lifecycle.running_addr("retriever", lifecycle.DEFAULT_RETRIEVER)
    failed = 0
    reports: list[dict[str, Any]] = []
    for collection, d in _definitions(args).items():
        with lifecycle.retriever_at(addr):
            report, job_id = _with_bars(addr, collection, d, args.dry_run)
        failed += sum(s.outcome == "failed" for s in report.sources)
        reports.append(as_json(report, job_id))
        if not args.json:
            out.write("\n".join(summary(report)) + "\n")
            if job_id:
                out.write(f"  job {job_id} (groundwire jobs show {job_id})\n")
    if args.json:
        json.dump(reports, out, indent=2)
        out.write("\n")
    return 1 if failed else 0


def _with_bars(
    addr: str, collection: str, d: retriever_pb2.SyncDefinition, dry_run: bool
) -> tuple[retriever_pb2.SyncReport, str]:
    """The report and the job's id ("" for a dry run), with a bar on stderr: the
    sources compared (dry run), or the job's sources done of those known so far."""
    if dry_run:
        with progress(total=None, unit="src", desc=f"scan → {collection}") as scan:
            report = asyncio.run(preview(addr, collection, d, on_progress=lambda _: scan.update(1)))
        return report, ""
    with progress(total=None, unit="src", desc=f"sync → {collection}") as bar:
        job = asyncio.run(  # the total grows while the scan runs
            sync_job(addr, collection, d, on_progress=lambda p: advance(bar, p.done, p.total))
        )
    return job_report(job), job.id
