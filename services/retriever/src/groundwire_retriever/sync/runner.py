"""Run a sync: read the source set, compute its delta against the collection, apply it.

The delta compares each source's content hash as ``ListSources`` reports it (SHA-256
over its chunks' content hashes in order) with the hash of the chunks the ingest
would store for the document now (``RetrieverCore.preparer``: the same parser,
sandbox and chunking policy, no embedding), so ``unchanged`` means exactly what a
re-ingest would find unchanged. The stored side is read by the retriever itself,
with no access filter: a sync run by a write key or the CLI (whose own view hides
access-restricted documents) still sees, updates and deletes every source. A new id
whose hash equals a deleted id's is a rename. New, changed and renamed sources are
then ingested one at a time through the ingest path (each replaced atomically:
readers see the old chunks or the new ones), and deletions (a rename's old id too)
run only after all of them are in, so a moved page is never missing from search in
between.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from pathlib import Path

import httpx

from groundwire_core.errors import InvalidInput, NotFound
from groundwire_core.identity import Identity, identity_scope
from groundwire_core.outbound import OutboundPolicy, strip_credentials
from groundwire_retriever.domain import Chunk
from groundwire_retriever.ingest.pipeline import DocumentInput
from groundwire_retriever.service import IngestTick, RetrieverCore
from groundwire_retriever.store.validation import validate_collection_name
from groundwire_retriever.sync.crawler import WebSource
from groundwire_retriever.sync.curation import curated_out
from groundwire_retriever.sync.definition import (
    Found,
    SourceKind,
    SyncDefinition,
    check_definition,
    within_limit,
)
from groundwire_retriever.sync.folder import FolderSource
from groundwire_retriever.sync.report import (
    Rename,
    SourceOutcome,
    SyncDelta,
    SyncProgress,
    SyncReport,
)

ProgressCallback = Callable[[SyncProgress], object]
"""Called per tick; may return an awaitable, which is awaited."""

_PAGE = 1000
_INGESTED = {"ingested": "new", "updated": "changed"}
_RETRIEVER_ITSELF = Identity(unrestricted=True)
"""Whom the stored side is read as: the sync compares the whole collection, never the
view of the caller who started it (a restricted document it cannot see must still be
updated or deleted)."""


def source_hash(chunks: Sequence[Chunk]) -> str:
    """The content hash ``ListSources`` reports for a source stored as ``chunks``."""
    digest = hashlib.sha256()
    for chunk in sorted(chunks, key=lambda c: (c.chunk_index, c.content_hash)):
        digest.update(chunk.content_hash.encode())
        digest.update(b"\n")
    return digest.hexdigest()


async def stored_hashes(service: RetrieverCore, collection: str) -> dict[str, str]:
    """``source_id -> content hash`` of every stored source, access-restricted ones
    included (read as the retriever itself); {} for a missing collection."""
    hashes: dict[str, str] = {}
    token = ""
    with identity_scope(_RETRIEVER_ITSELF):
        try:
            while True:
                page = await service.list_sources(collection, page_token=token, limit=_PAGE)
                hashes.update((s.source_id, s.content_hash) for s in page.sources)
                token = page.next_page_token
                if not token:
                    return hashes
        except NotFound:
            return {}


async def run_sync(
    service: RetrieverCore,
    collection: str,
    definition: SyncDefinition,
    *,
    dry_run: bool = False,
    progress: ProgressCallback | None = None,
    cancelled: Callable[[], bool] | None = None,
    folder_roots: Sequence[Path] = (),
    outbound: OutboundPolicy | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> SyncReport:
    """Syncs ``collection`` with the source set of ``definition`` (see the module).

    ``outbound`` is what a website sync may reach and its byte cap, which also bounds
    every sync's ``max_bytes`` (the retriever's largest document; default: public hosts
    only, 20 MiB); ``transport`` is for tests.

    ``progress`` gets a tick per source scanned and per source applied; ``cancelled``
    is polled between sources: a cancelled sync stops there (sources already applied
    stay, deletions wait for the next sync) and reports ``cancelled``. The collection
    is created by the first source written. Raises InvalidInput for a bad definition
    or when the source set is empty while the collection holds sources (a missing
    mount or a site that answers nothing must not delete everything), Unavailable
    when the website, git or the embedder does not answer.
    """
    started = time.perf_counter()
    validate_collection_name(collection)
    policy = outbound or OutboundPolicy()
    check_definition(definition, folder_roots, max_bytes_limit=policy.max_bytes)
    definition = within_limit(definition, policy.max_bytes)
    is_cancelled = cancelled or (lambda: False)
    stored = await stored_hashes(service, collection)
    prepare = service.preparer(collection)
    source: FolderSource | WebSource = (
        WebSource(definition, policy=policy, transport=transport)
        if definition.kind is SourceKind.WEB
        else FolderSource(definition)
    )

    async def tick(phase: str, done: int, total: int, outcome: SourceOutcome) -> None:
        if progress is not None:
            result = progress(SyncProgress(phase, done, total, outcome))
            if inspect.isawaitable(result):
                await result

    outcomes: dict[str, SourceOutcome] = {}
    pending: dict[str, DocumentInput] = {}
    hashes: dict[str, str] = {}
    present: set[str] = set()
    stopped = False
    async for found in source.sources():
        if is_cancelled():
            stopped = True
            break
        outcome = await _compare(prepare, found, stored, hashes, pending)
        if found.present and outcome.outcome != "skipped":
            present.add(found.source_id)
        outcomes[found.source_id] = outcome
        await tick("scan", len(outcomes), 0, outcome)

    if not stopped and not present and stored:
        raise InvalidInput(
            f"the source set at {strip_credentials(definition.location)} lists no documents; "
            f"refusing to delete all {len(stored)} sources of {collection!r} (check the path "
            "or URL)"
        )
    if stopped:  # the scan did not finish: nothing is known gone
        gone = []
    elif source.complete:
        gone = [s for s in stored if s not in present]
    else:  # only what was seen gone: the rest of the site was not looked at
        gone = [s for s in stored if s in outcomes and s not in present]
    delta = _delta(outcomes, stored, hashes, gone)
    for old in delta.deleted:  # a curated-out or gone source keeps its reason
        seen = outcomes.get(old)
        outcomes[old] = SourceOutcome(old, "deleted", reason=seen.reason if seen else "")
    if dry_run or stopped:
        return _report(collection, delta, outcomes, 0, dry_run, source.complete, stopped, started)

    written, stopped = 0, False
    renames = {r.new: r.old for r in delta.renamed}
    deletions = list(delta.deleted)
    done, total = 0, delta.actions
    for source_id in (*delta.new, *delta.changed, *renames):
        if is_cancelled():
            stopped = True
            break
        applied = await _ingest(service, collection, pending.pop(source_id), renames)
        outcomes[source_id] = applied
        if applied.outcome != "failed":
            written += applied.chunks if applied.outcome != "unchanged" else 0
            if source_id in renames:  # the content is in under its new id
                deletions.append(renames[source_id])
        done += 1
        await tick("apply", done, total, applied)
    for old in [] if stopped else deletions:
        if is_cancelled():
            stopped = True
            break
        await service.delete_by_source(collection, old)
        seen = outcomes.get(old)
        outcomes[old] = SourceOutcome(old, "deleted", reason=seen.reason if seen else "")
        done += 1
        await tick("apply", done, total, outcomes[old])
    return _report(collection, delta, outcomes, written, False, source.complete, stopped, started)


async def _compare(
    prepare: Callable[[DocumentInput], Awaitable[list[Chunk]]],
    found: Found,
    stored: dict[str, str],
    hashes: dict[str, str],
    pending: dict[str, DocumentInput],
) -> SourceOutcome:
    """The scan outcome of one source; a new or changed document is kept in
    ``pending`` and its hash in ``hashes``."""
    sid = found.source_id
    if found.document is None:
        return SourceOutcome(sid, "failed" if found.present else "skipped", reason=found.reason)
    reason = await curated_out(found.document)
    if reason:
        return SourceOutcome(sid, "skipped", reason=reason)
    try:
        chunks = await prepare(found.document)
    except InvalidInput as error:  # the stored copy, if any, stays
        return SourceOutcome(sid, "failed", reason=error.message)
    hashes[sid] = source_hash(chunks)
    if stored.get(sid) == hashes[sid]:
        return SourceOutcome(sid, "unchanged", chunks=len(chunks))
    pending[sid] = found.document
    return SourceOutcome(sid, "changed" if sid in stored else "new", chunks=len(chunks))


def _delta(
    outcomes: dict[str, SourceOutcome],
    stored: dict[str, str],
    hashes: dict[str, str],
    gone: list[str],
) -> SyncDelta:
    """The delta, pairing each new source with a deleted one of the same content."""
    new = [s for s, o in outcomes.items() if o.outcome == "new"]
    by_hash: dict[str, list[str]] = {}
    for old in sorted(gone):
        by_hash.setdefault(stored[old], []).append(old)
    renamed: list[Rename] = []
    for sid in list(new):
        olds = by_hash.get(hashes[sid])
        if olds:
            renamed.append(Rename(olds.pop(0), sid))
            new.remove(sid)
    moved = {r.old for r in renamed}
    for rename in renamed:
        outcomes[rename.new] = SourceOutcome(
            rename.new, "renamed", chunks=outcomes[rename.new].chunks, reason=f"from {rename.old}"
        )
    return SyncDelta(
        new=tuple(new),
        changed=tuple(s for s, o in outcomes.items() if o.outcome == "changed"),
        unchanged=sum(o.outcome == "unchanged" for o in outcomes.values()),
        deleted=tuple(s for s in sorted(gone) if s not in moved),
        renamed=tuple(renamed),
    )


async def _ingest(
    service: RetrieverCore, collection: str, doc: DocumentInput, renames: dict[str, str]
) -> SourceOutcome:
    """Ingests one document through the ingest path (an atomic replace)."""
    outcome = SourceOutcome(doc.source_id, "failed", reason="the ingest reported nothing")
    async for item in service.ingest(collection, [doc], create=True):
        if isinstance(item, IngestTick):
            status = item.outcome.status
            if status == "skipped":
                outcome = SourceOutcome(doc.source_id, "failed", reason=item.outcome.reason)
            elif doc.source_id in renames and status != "unchanged":
                reason = f"from {renames[doc.source_id]}"
                outcome = SourceOutcome(doc.source_id, "renamed", item.outcome.chunks, reason)
            else:
                label = _INGESTED.get(status, status)
                outcome = SourceOutcome(doc.source_id, label, chunks=item.outcome.chunks)
    return outcome


def _report(
    collection: str,
    delta: SyncDelta,
    outcomes: dict[str, SourceOutcome],
    written: int,
    dry_run: bool,
    complete: bool,
    cancelled: bool,
    started: float,
) -> SyncReport:
    return SyncReport(
        collection=collection,
        delta=delta,
        sources=tuple(outcomes.values()),
        chunks_written=written,
        dry_run=dry_run,
        complete=complete,
        cancelled=cancelled,
        seconds=time.perf_counter() - started,
    )


async def sync_events(
    service: RetrieverCore,
    collection: str,
    definition: SyncDefinition,
    *,
    dry_run: bool = False,
    folder_roots: Sequence[Path] = (),
    outbound: OutboundPolicy | None = None,
) -> AsyncGenerator[SyncProgress | SyncReport, None]:
    """``run_sync`` as a stream: each progress tick, then the report. Closing the
    stream early (the caller went away) cancels the sync; errors are run_sync's."""
    queue: asyncio.Queue[SyncProgress | None] = asyncio.Queue()

    async def run() -> SyncReport:
        try:
            return await run_sync(
                service,
                collection,
                definition,
                dry_run=dry_run,
                progress=queue.put_nowait,
                folder_roots=folder_roots,
                outbound=outbound,
            )
        finally:
            queue.put_nowait(None)

    task = asyncio.create_task(run())
    try:
        while (item := await queue.get()) is not None:
            yield item
        yield await task
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
