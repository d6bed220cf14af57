"""Build-time export of cross-encoder checkpoints to self-contained ONNX model directories.

This package needs the ``export`` extra (torch, transformers, onnx); it is never installed
in the serving image. Importing it is cheap and torch-free: the builders import torch
when they run. Each profile turns one ``*ForSequenceClassification`` checkpoint with one
label into a directory the reranker serves with
``groundwire_reranker.models.OnnxCrossEncoder``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from groundwire_core.errors import InvalidInput
from groundwire_core.model_manifest import staging_dir as staging_dir


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
    random_weights: bool = False,
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
        random_weights=random_weights,
    )


__all__ = ["PROFILES", "BuildReport", "build_cross_encoder", "build_profile", "staging_dir"]
