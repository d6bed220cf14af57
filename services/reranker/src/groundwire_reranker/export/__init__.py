"""Build-time export of cross-encoder checkpoints to self-contained ONNX model directories.

This package needs the ``export`` extra (torch, transformers, onnx); it is never installed
in the serving image. Importing it is cheap and torch-free: the builders import torch
when they run. Each profile turns one ``*ForSequenceClassification`` checkpoint with one
label into a directory the reranker serves with
``groundwire_reranker.models.OnnxCrossEncoder``.
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

from groundwire_core.errors import AlreadyExists, InvalidInput
from groundwire_reranker.models.manifest import MANIFEST_FILE


@dataclass
class BuildReport:
    """What a build produced and how closely it matches the reference PyTorch model."""

    profile: str
    out_dir: Path
    seconds: float
    model_id: str
    max_tokens: int
    max_abs_diff_vs_torch: float  # fp32 ONNX vs PyTorch logits on the sample pairs
    int8: bool
    int8_score_max_abs_diff: float | None  # int8 vs fp32 scores (sigmoid) on sample pairs
    int8_score_mean_abs_diff: float | None


@contextmanager
def staging_dir(out_dir: Path) -> Iterator[Path]:
    """Yield an empty directory beside ``out_dir``; on success it replaces ``out_dir``.

    A failed build removes its staging directory and leaves ``out_dir`` as it was, so a
    half-written model is never served. An existing ``out_dir`` is replaced only if it is
    empty or a previously built model (has a manifest): never an unrelated directory.
    Raises AlreadyExists otherwise.
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


# Imported after BuildReport/staging_dir, which the profile module imports from here.
from groundwire_reranker.export.cross_encoder import (  # noqa: E402
    PROFILE_SPECS,
    build_cross_encoder,
)

PROFILES: dict[str, Callable[..., BuildReport]] = {
    name: spec.builder() for name, spec in PROFILE_SPECS.items()
}


def build_profile(
    name: str,
    out_dir: Path,
    *,
    int8: bool = False,
    source: Path | None = None,
    log: Callable[[str], None] = print,
    model_id: str | None = None,
    max_tokens: int | None = None,
) -> BuildReport:
    """Build the named profile into ``out_dir`` (atomically).

    ``source`` is a local checkpoint folder; without it the profile's hub model is
    downloaded (needs the internet). ``model_id`` and ``max_tokens`` override what the
    manifest records. Raises InvalidInput (unknown profile, unsuitable checkpoint),
    NotFound (incomplete source), Unavailable (download failed), BackendFailure (the
    export disagrees with PyTorch), AlreadyExists (``out_dir`` is not a model folder).
    """
    spec = PROFILE_SPECS.get(name)
    if spec is None:
        known = ", ".join(sorted(PROFILES))
        raise InvalidInput(f"unknown cross-encoder profile {name!r}; known profiles: {known}")
    return build_cross_encoder(
        spec,
        out_dir,
        int8=int8,
        source=source,
        log=log,
        model_id=model_id,
        max_tokens=max_tokens,
    )


__all__ = ["PROFILES", "BuildReport", "build_cross_encoder", "build_profile", "staging_dir"]
