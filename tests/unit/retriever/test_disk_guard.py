"""``DiskGuard`` on the real filesystem under tmp_path, and ``estimated_bytes``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from groundwire_core.errors import InsufficientStorage, Unavailable
from groundwire_retriever.domain import SparseVec
from groundwire_retriever.store.disk import (
    METADATA_WRITE_BYTES,
    DiskGuard,
    estimated_bytes,
    folder_bytes,
)
from groundwire_retriever.store.engine import PointData


def _free(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def test_a_write_that_would_cross_the_floor_is_refused_naming_the_path(tmp_path: Path) -> None:
    free = _free(tmp_path)
    guard = DiskGuard(tmp_path, free // 2, dependency="qdrant-edge")
    guard.require(1024, "write to collection 'docs'")  # far from the floor
    assert guard.space().warning() == ""
    with pytest.raises(InsufficientStorage) as refused:
        guard.require(free, "write to collection 'docs'")
    error = refused.value
    assert str(tmp_path) in error.message and "MIN_FREE_DISK_MIB" in error.message
    assert error.message.startswith("refusing to write to collection 'docs'")
    assert error.code == "insufficient_storage" and error.dependency == "qdrant-edge"
    assert error.retry_after_s >= 30


def test_under_the_floor_every_write_is_refused_and_health_says_why(tmp_path: Path) -> None:
    guard = DiskGuard(tmp_path, _free(tmp_path) + 2**40, dependency="qdrant-edge")
    space = guard.watch()
    assert space.low
    assert space.warning().startswith("LOW DISK") and str(tmp_path) in space.warning()
    with pytest.raises(InsufficientStorage):
        guard.require(0, "delete from collection 'docs'")


def test_a_missing_data_folder_is_unavailable(tmp_path: Path) -> None:
    guard = DiskGuard(tmp_path / "gone", 0, dependency="qdrant-edge")
    with pytest.raises(Unavailable) as gone:
        guard.require(0, "write")
    assert str(tmp_path / "gone") in gone.value.message


def test_the_estimate_grows_with_vectors_and_payload() -> None:
    def point(text: str, terms: int) -> PointData:
        bm25 = SparseVec(tuple(range(terms)), (1.0,) * terms)
        return PointData("id", [0.0] * 384, None, bm25, {"text": text})

    empty = estimated_bytes([])
    one = estimated_bytes([point("x" * 3000, 100)])
    assert empty == estimated_bytes([]) >= METADATA_WRITE_BYTES
    # each point twice (WAL record and segment): 384 floats, 100 terms, 3 KB of text
    assert one - empty >= 2 * (384 * 4 + 100 * 8 + 3000)
    assert estimated_bytes([point("x" * 3000, 100)] * 10) - empty == 10 * (one - empty)
    assert estimated_bytes([point("é" * 3000, 100)]) > one  # UTF-8 bytes, not characters


def test_folder_bytes_counts_apparent_and_allocated_sizes(tmp_path: Path) -> None:
    sparse = tmp_path / "sparse"
    with sparse.open("wb") as fh:
        fh.truncate(8 * 1024 * 1024)  # a hole: nothing allocated
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "data").write_bytes(b"x" * 10_000)
    assert folder_bytes(tmp_path) == 8 * 1024 * 1024 + 10_000
    assert 10_000 <= folder_bytes(tmp_path, allocated=True) < 1024 * 1024
