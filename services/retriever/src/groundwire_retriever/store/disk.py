"""``DiskGuard``: free space on the embedded engine's data disk, checked before writes.

qdrant-edge writes through memory-mapped files that it creates sparse and fills page
by page: write-ahead-log segments of 32 MiB, dense-vector chunks of 32 MiB, payload
and sparse-vector pages of 32 MiB (a fresh shard: ~135 MB of files holding ~108 KB
of blocks on ext4). The files it keeps in memory (``Memory.Cached``: payload, id
tracker, keyword indexes) are populated when mapped, which on a filesystem that
stores pages in memory (tmpfs) allocates them in full: a new collection took 38 MiB
of a tmpfs, 10 more when reopened. When the filesystem has no room left for a page
the kernel kills the process with SIGBUS: Python cannot catch it and nothing is
logged. Measured on a 16 MiB tmpfs: creating a collection, or writing with a few
hundred KB free, killed the retriever (exit 135); with 0 bytes free the engine's own
file extensions failed cleanly. So the engine must never be let near a full disk:
every write is refused, with ``InsufficientStorage``, when the free space minus what
the write is estimated to take would fall under a floor.

The floor (``min_free_disk_mib``, default ``DEFAULT_MIN_FREE_MIB``) is a margin for
what no estimate sees: page rounding in each file a write touches, a WAL segment
rolled over mid-write, a flush, logs and other processes on the same disk. Each write
adds its own estimate (``estimated_bytes``) on top, so one batch can never cross it,
however large: the largest single write is a document's chunks (bounded by
``max_document_bytes``, 20 MiB by default, times about two, see ``estimated_bytes``),
and an index build copies a whole shard (checked against the shard's size).

Reads never consult the guard: searches go on while writes are refused, and writes
resume as soon as space is freed (each write checks again; ``statvfs`` costs ~2 µs).
Dropping a collection is never refused: it only renames and removes files, and it is
how an operator frees space without leaving the retriever (a delete by source writes
to the WAL and frees nothing until the next index build, so it is refused).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from groundwire_core.errors import InsufficientStorage, Unavailable
from groundwire_retriever.store.engine import PointData

__all__ = [
    "COLLECTION_CREATE_BYTES",
    "DEFAULT_MIN_FREE_MIB",
    "METADATA_WRITE_BYTES",
    "RETRY_AFTER_S",
    "DiskGuard",
    "DiskSpace",
    "estimated_bytes",
    "folder_bytes",
]

log = logging.getLogger(__name__)

MIB = 1024 * 1024

DEFAULT_MIN_FREE_MIB = 64
"""Two of the engine's 32 MiB allocation units (a WAL segment, a vector chunk, a payload
page): a write that fills one opens the next, which a memory filesystem allocates in
full, and the estimate may be off besides; still under 1% of any real data disk. The
estimate of each write comes on top (``estimated_bytes``), so the floor need not hold
the largest write itself."""

COLLECTION_CREATE_BYTES = 48 * MIB
"""What creating a collection may take: 38 MiB measured on tmpfs (its cached files
populated in full) plus the 10 MiB its first reopen added; ~0.1 MiB on ext4."""

METADATA_WRITE_BYTES = 256 * 1024
"""What a write that adds no points is given: a collection's JSON pointer, a WAL
record of a delete or a payload index, the deleted-flags pages it touches. Also added
to every upsert for the publish (metadata and a delete) that follows a staged write,
so that a source whose chunks were written can also be switched to them."""

_PAGE = 4096
_FILES_PER_UPSERT = 8
"""Files one upsert can add a page to: the WAL, dense vectors, sparse and BM25 pages,
payload page and tracker, id tracker, versions."""
_POINT_OVERHEAD = 128  # id, version, offsets and the WAL record's framing per point

RETRY_AFTER_S = 60.0
"""A full disk is fixed by someone freeing space, not by waiting a second."""


def estimated_bytes(points: Sequence[PointData]) -> int:
    """Bytes of disk that writing ``points`` may take: each point twice (its WAL record
    and its copy in the segment's vector and payload storage), at full size (payloads
    are stored compressed, so this over-counts), plus a page of rounding in each file
    an upsert touches and ``METADATA_WRITE_BYTES`` for the publish that follows.
    Measured: 1,280 points of 384 dims, 100 BM25 terms and 3 KB of text took 8.2 KB
    each on disk; this estimates 10.8 KB."""
    raw = 0
    for point in points:
        raw += 4 * len(point.dense) + _POINT_OVERHEAD
        if point.multi is not None:  # ColBERT: one f32 vector per token (~128 KB at 32x1024)
            raw += 4 * sum(len(row) for row in point.multi)
        for sparse in (point.sparse, point.bm25):
            if sparse is not None:
                raw += 8 * len(sparse.indices)  # u32 index + f32 weight
        raw += len(json.dumps(point.payload, ensure_ascii=False, default=str).encode())
    return 2 * raw + _FILES_PER_UPSERT * _PAGE + METADATA_WRITE_BYTES


def folder_bytes(folder: Path, *, allocated: bool = False) -> int:
    """The apparent size of every file under ``folder``: what a copy of it takes
    (``shutil.copytree`` writes sparse files out in full); with ``allocated``, the
    blocks they hold (what rewriting the data in place takes)."""
    total = 0
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            try:
                stat = os.stat(os.path.join(dirpath, name), follow_symlinks=False)
            except OSError:  # removed meanwhile
                continue
            total += stat.st_blocks * 512 if allocated else stat.st_size
    return total


@dataclass(frozen=True)
class DiskSpace:
    """The data disk now: where, how much is free, and the floor writes keep."""

    path: Path
    free_bytes: int
    floor_bytes: int

    @property
    def low(self) -> bool:
        """Under the floor: every write is refused."""
        return self.free_bytes < self.floor_bytes

    def describe(self) -> str:
        return (
            f"the data disk at {self.path} has {self.free_bytes / MIB:.1f} MiB free "
            f"(writes keep {self.floor_bytes / MIB:.0f} MiB free: "
            "GROUNDWIRE_RETRIEVER_MIN_FREE_DISK_MIB)"
        )

    def warning(self) -> str:
        """Empty while writes are accepted; else what health reports."""
        if not self.low:
            return ""
        return f"LOW DISK: {self.describe()}; writes are refused, searches go on"


class DiskGuard:
    """Refuses a write that would leave less than ``floor_bytes`` free on ``path``'s
    filesystem (see the module docstring)."""

    def __init__(self, path: Path, floor_bytes: int, *, dependency: str) -> None:
        if floor_bytes < 0:
            raise ValueError("floor_bytes must not be negative")
        self._path = Path(path)
        self._floor = floor_bytes
        self._dependency = dependency
        self._was_low = False

    @property
    def floor_bytes(self) -> int:
        return self._floor

    def space(self) -> DiskSpace:
        """Free space now. Raises Unavailable when the data folder is gone (deleted or
        unmounted): then there is no disk of ours to measure."""
        try:
            stat = os.statvfs(self._path)
        except OSError as exc:
            raise Unavailable(
                f"the data folder {self._path} is gone ({exc.strerror}); "
                "restart the retriever once it is back",
                dependency=self._dependency,
            ) from None
        # f_bavail: what an unprivileged process may still use (root's reserve excluded)
        return DiskSpace(self._path, stat.f_bavail * stat.f_frsize, self._floor)

    def require(self, incoming_bytes: int, action: str) -> None:
        """Returns when ``incoming_bytes`` more still leave the floor free; raises
        InsufficientStorage naming the data path otherwise (Unavailable when the data
        folder is gone)."""
        space = self.space()
        if space.free_bytes - incoming_bytes >= self._floor:
            return
        raise InsufficientStorage(
            f"refusing to {action}: {space.describe()} and this write needs about "
            f"{incoming_bytes / MIB:.1f} MiB; free space on it (searches go on meanwhile)",
            retry_after_s=RETRY_AFTER_S,
            dependency=self._dependency,
        )

    def watch(self) -> DiskSpace:
        """``space()``, logging once each time the disk goes under the floor and once
        when it is back above (health calls it every few seconds)."""
        space = self.space()
        if space.low != self._was_low:
            self._was_low = space.low
            if space.low:
                log.warning("%s", space.warning())
            else:
                log.info("disk space is back: %s; writes are accepted", space.describe())
        return space
