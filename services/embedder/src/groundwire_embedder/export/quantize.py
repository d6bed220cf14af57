"""Dynamic int8 quantization of an exported encoder, and the check that it still agrees.

The recipe (per-channel int8 weights, MatMul only) is ``groundwire_core.onnx_models``'s,
shared with the reranker's build.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from groundwire_core.errors import BackendFailure
from groundwire_core.onnx_models import external_data_file as external_data_file
from groundwire_core.onnx_models import quantize_in_place
from groundwire_core.onnx_models import save_onnx as save_onnx
from groundwire_embedder.models import EncoderOutput, OnnxEncoder
from groundwire_embedder.models.manifest import ModelManifest


def quantize_model_dir(model_dir: Path, scratch: Path, manifest: ModelManifest) -> None:
    """Replace the fp32 graph in ``model_dir`` by its int8 version; mark the manifest.

    The fp32 graph (and its external weights, if any) moves to ``scratch``.
    """
    quantize_in_place(Path(model_dir) / manifest.onnx_file, scratch)
    replace(manifest, quantized=True).save(model_dir)


def quantize_checked(
    stage: Path,
    scratch: Path,
    manifest: ModelManifest,
    texts: Sequence[str],
    fp32_dense: np.ndarray,
    *,
    min_cosine_mean: float,
    log: Callable[[str], None],
) -> tuple[EncoderOutput, float, float]:
    """Quantize the model in ``stage`` (``quantize_model_dir``), encode ``texts`` with it
    and compare its dense vectors with ``fp32_dense`` (the fp32 model's, same texts).

    Returns the int8 output and the cosine (mean, min); raises BackendFailure when the
    mean is below ``min_cosine_mean``, and the build then installs nothing.
    """
    started = time.perf_counter()
    quantize_model_dir(stage, scratch, manifest)
    log(f"quantized to int8 (per-channel MatMul) in {time.perf_counter() - started:.1f}s")
    encoder = OnnxEncoder(stage, serve_cost_model=manifest.cost_model)
    encoder.load()
    output = encoder.encode(list(texts))
    cos_mean, cos_min = cosine_stats(output.dense, fp32_dense)
    log(
        f"int8 vs fp32 dense cosine on {len(texts)} sentences: "
        f"mean {cos_mean:.4f}, min {cos_min:.4f}"
    )
    if not cos_mean >= min_cosine_mean:
        raise BackendFailure(
            f"the int8 {manifest.profile} model drifts too far from fp32 (cosine mean "
            f"{cos_mean:.4f} < {min_cosine_mean}); not installed"
        )
    return output, cos_mean, cos_min


def cosine_stats(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Row-wise cosine between two [n, d] matrices: (mean, min)."""
    if a.shape != b.shape or a.ndim != 2 or a.shape[0] == 0:
        raise ValueError(f"need two equal, non-empty [n, d] matrices, got {a.shape}, {b.shape}")
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    num = (a64 * b64).sum(axis=1)
    den = np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1)
    cos = num / np.maximum(den, 1e-12)
    return float(cos.mean()), float(cos.min())
