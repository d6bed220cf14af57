"""Build-time export of encoder checkpoints to self-contained ONNX model directories.

This package needs the ``export`` extra (torch, transformers, onnx); it is never
installed in the serving image. Each profile turns one checkpoint into a directory the
embedder serves with ``groundwire_embedder.models.OnnxEncoder``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundwire_core.errors import AlreadyExists, InvalidInput
from groundwire_embedder.models.manifest import MANIFEST_FILE


@dataclass
class BuildReport:
    """What a build produced and how closely it matches the reference PyTorch model."""

    profile: str
    out_dir: Path
    seconds: float
    max_abs_diff_vs_torch: float  # fp32 ONNX vs PyTorch, pooled embeddings, sample sentences
    int8: bool
    int8_cosine_mean: float | None  # int8 vs fp32 dense cosine on sample sentences
    int8_cosine_min: float | None


@contextmanager
def staging_dir(out_dir: Path) -> Iterator[Path]:
    """Yield an empty directory beside ``out_dir``; on success it replaces ``out_dir``.

    A failed build removes its staging directory and leaves ``out_dir`` as it was, so a
    half-written model is never served. An existing ``out_dir`` is replaced only if it is
    empty or a previously built model (has a manifest): never an unrelated directory.
    """
    out_dir = Path(out_dir).absolute()
    if out_dir.exists():
        if not out_dir.is_dir():
            raise AlreadyExists(f"{out_dir} exists and is not a directory")
        if any(out_dir.iterdir()) and not (out_dir / MANIFEST_FILE).is_file():
            raise AlreadyExists(
                f"{out_dir} exists and is not a Groundwire model directory (no "
                f"{MANIFEST_FILE}); refusing to replace it: choose another directory"
            )
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.build-", dir=out_dir.parent))
    staging.chmod(0o755)  # mkdtemp makes it 0700; the served model must be readable
    try:
        yield staging
        _swap_in(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _swap_in(staging: Path, out_dir: Path) -> None:
    if not out_dir.exists():
        os.rename(staging, out_dir)
        return
    old = out_dir.with_name(f".{out_dir.name}.old-{uuid.uuid4().hex[:8]}")
    os.rename(out_dir, old)
    try:
        os.rename(staging, out_dir)
    except BaseException:
        os.rename(old, out_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)


# Imported after BuildReport/staging_dir, which the profile modules import from here.
from groundwire_embedder.export.bge_m3 import build_bge_m3  # noqa: E402
from groundwire_embedder.export.minilm import build_minilm  # noqa: E402

PROFILES: dict[str, Callable[..., BuildReport]] = {"minilm": build_minilm, "bge-m3": build_bge_m3}


def build_profile(
    name: str,
    out_dir: Path,
    *,
    int8: bool = False,
    source: Path | None = None,
    log: Callable[[str], None] = print,
    **options: Any,
) -> BuildReport:
    """Build the named profile into ``out_dir`` (atomically).

    ``options`` go to the profile's builder (e.g. ``external_data`` for bge-m3). Raises
    InvalidInput for an unknown profile, and whatever the profile's builder raises.
    """
    builder = PROFILES.get(name)
    if builder is None:
        raise InvalidInput(
            f"unknown model profile {name!r}; known profiles: {', '.join(sorted(PROFILES))}"
        )
    return builder(out_dir, int8=int8, source=source, log=log, **options)


__all__ = [
    "PROFILES",
    "BuildReport",
    "build_bge_m3",
    "build_minilm",
    "build_profile",
    "staging_dir",
]
