"""Build-time export of encoder checkpoints to self-contained ONNX model directories.

This package needs the ``export`` extra (torch, transformers, onnx); it is never
installed in the serving image. Each profile turns one checkpoint into a directory the
embedder serves with ``groundwire_embedder.models.OnnxEncoder``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundwire_core.errors import InvalidInput
from groundwire_core.model_manifest import staging_dir as staging_dir


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

    @classmethod
    def finished(
        cls,
        profile: str,
        out_dir: Path,
        started: float,
        log: Callable[[str], None],
        *,
        max_abs_diff: float,
        int8: bool,
        cosine: tuple[float | None, float | None],
    ) -> BuildReport:
        """The report of a build that began at ``started`` (perf_counter), logged."""
        seconds = time.perf_counter() - started
        log(f"built {profile} into {out_dir} in {seconds:.1f}s")
        return cls(profile, out_dir, seconds, max_abs_diff, int8, cosine[0], cosine[1])


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
