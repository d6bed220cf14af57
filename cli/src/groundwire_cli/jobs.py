"""``groundwire jobs``: the retriever's ingest and sync jobs.

``jobs list`` one line per job (newest first), ``jobs show ID`` one job with its
per-document report, ``jobs watch ID`` its progress bar until it ends, ``jobs cancel
ID`` stops it before its next document. ``--json`` prints the jobs as the HTTP API
does (``GET /v1/admin/jobs``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TextIO, TypeVar

from google.protobuf.json_format import MessageToDict

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_cli import lifecycle
from groundwire_cli.progress import advance, progress
from groundwire_core.grpc.client import create_channel, rpc_errors

T = TypeVar("T")
TIMEOUT_S = 30.0


def _name(enum: Any, value: int, prefix: str) -> str:
    return str(enum.Name(value)).removeprefix(prefix).lower()


def state_name(job: retriever_pb2.Job) -> str:
    return _name(retriever_pb2.JobState, job.state, "JOB_STATE_")


def kind_name(job: retriever_pb2.Job) -> str:
    return _name(retriever_pb2.JobKind, job.kind, "JOB_KIND_")


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) if seconds else "-"


def as_json(job: retriever_pb2.Job) -> dict[str, Any]:
    """The job with names for its kind and state (the shape of the HTTP API's Job,
    times in Unix seconds)."""
    out: dict[str, Any] = MessageToDict(
        job, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    out["kind"], out["state"] = kind_name(job), state_name(job)
    return out


def table(jobs: list[retriever_pb2.Job]) -> Iterator[str]:
    """Aligned lines: id, collection, kind, state, done/total, created (UTC), error."""
    head = ("JOB", "COLLECTION", "KIND", "STATE", "DONE", "CREATED (UTC)", "ERROR")
    cells = [
        (
            j.id,
            j.collection,
            kind_name(j),
            state_name(j) + (" (cancelling)" if j.cancel_requested else ""),
            f"{j.counts.done}/{j.counts.total}",
            _when(j.created_at),
            j.error,
        )
        for j in jobs
    ]
    widths = [max(len(c[i]) for c in [head, *cells]) for i in range(len(head) - 1)]
    for line in [head, *cells]:
        yield "  ".join(
            [*(cell.ljust(width) for cell, width in zip(line, widths, strict=False)), line[-1]]
        ).rstrip()


def describe(job: retriever_pb2.Job) -> Iterator[str]:
    """One job for a person: what, when, counts, then each document that was not
    plainly written."""
    c = job.counts
    yield f"job {job.id}: {kind_name(job)} into {job.collection}, {state_name(job)}"
    yield (
        f"  created {_when(job.created_at)}, started {_when(job.started_at)}, "
        f"finished {_when(job.finished_at)} (UTC)"
    )
    yield (
        f"  done {c.done}/{c.total}: ingested {c.ingested}, updated {c.updated}, "
        f"unchanged {c.unchanged}, skipped {c.skipped}, failed {c.failed}, "
        f"deleted {c.deleted}, chunks written {c.chunks_written}"
    )
    if job.error:
        yield f"  {job.error}"
    for d in job.documents:
        if d.outcome in ("skipped", "failed"):
            yield f"  {d.outcome} {d.source_id}: {d.error}"


async def _call(
    addr: str, work: Callable[[retriever_pb2_grpc.RetrieverServiceStub], Awaitable[T]]
) -> T:
    async with create_channel(addr) as channel:
        with rpc_errors("retriever"):
            return await work(retriever_pb2_grpc.RetrieverServiceStub(channel))


async def watch(
    stub: retriever_pb2_grpc.RetrieverServiceStub, job_id: str, out: TextIO
) -> retriever_pb2.Job:
    """Follows the job with a progress bar on stderr; the job once it has ended."""
    job: retriever_pb2.Job = await stub.GetJob(
        retriever_pb2.GetJobRequest(id=job_id), timeout=TIMEOUT_S
    )
    desc = f"{kind_name(job)} → {job.collection}"
    with progress(total=job.counts.total or None, unit="doc", desc=desc) as bar:
        async for job in stub.WatchJob(retriever_pb2.GetJobRequest(id=job_id)):
            advance(bar, job.counts.done, job.counts.total)
    return job


def run_command(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    addr = args.retriever or lifecycle.running_addr("retriever", lifecycle.DEFAULT_RETRIEVER)
    with lifecycle.retriever_at(addr):
        return _run(args, addr, out)


def _run(args: argparse.Namespace, addr: str, out: TextIO) -> int:
    action = args.jobs_action or "list"
    if action == "list":
        request = retriever_pb2.ListJobsRequest(collection=args.collection or "", limit=args.limit)
        reply = asyncio.run(_call(addr, lambda stub: stub.ListJobs(request, timeout=TIMEOUT_S)))
        if args.json:
            json.dump([as_json(j) for j in reply.jobs], out, indent=2)
            out.write("\n")
        else:
            for line in table(list(reply.jobs)):
                out.write(line + "\n")
        return 0
    if action == "watch":
        job = asyncio.run(_call(addr, lambda stub: watch(stub, args.id, out)))
    elif action == "cancel":
        request_id = retriever_pb2.CancelJobRequest(id=args.id)
        job = asyncio.run(_call(addr, lambda stub: stub.CancelJob(request_id, timeout=TIMEOUT_S)))
    else:
        get = retriever_pb2.GetJobRequest(id=args.id)
        job = asyncio.run(_call(addr, lambda stub: stub.GetJob(get, timeout=TIMEOUT_S)))
    if getattr(args, "json", False):
        json.dump(as_json(job), out, indent=2)
        out.write("\n")
    else:
        for line in describe(job):
            out.write(line + "\n")
    return 1 if state_name(job) == "failed" else 0


def add_parser(sub: Any) -> None:
    """Registers ``groundwire jobs`` on the CLI's subcommands."""
    jobs = sub.add_parser("jobs", help="list, show, watch or cancel ingest and sync jobs")
    actions = jobs.add_subparsers(dest="jobs_action")
    listing = actions.add_parser("list", help="the jobs, newest first (the default)")
    listing.add_argument("--collection", default="", help="only this collection's jobs")
    listing.add_argument("--limit", type=int, default=50, help="at most this many")
    parsers = [listing]
    for name, text in (
        ("show", "one job with its per-document report"),
        ("watch", "follow a job's progress until it ends"),
        ("cancel", "cancel a job (a running one stops before its next document)"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("id", help="the job's id")
        parsers.append(action)
    for parser in parsers:
        parser.add_argument("--json", action="store_true", help="print JSON, every field")
        parser.add_argument(
            "--retriever",
            default=None,
            help=f"retriever gRPC address (default: the one `groundwire up` runs, else "
            f"{lifecycle.DEFAULT_RETRIEVER})",
        )
    jobs.set_defaults(
        func=run_command, jobs_action=None, collection="", limit=50, json=False, retriever=None
    )
