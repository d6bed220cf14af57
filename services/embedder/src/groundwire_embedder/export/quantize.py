"""Dynamic int8 quantization of an exported encoder, and the check that it still agrees.

The recipe (per-channel int8 weights, MatMul only) is ``groundwire_core.onnx_models``'s,
shared with the reranker's build.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from groundwire_core.errors import BackendFailure
from groundwire_core.onnx_models import quantize_int8
from groundwire_embedder.models import EncoderOutput, OnnxEncoder
from groundwire_embedder.models.manifest import ModelManifest


def external_data_file(onnx_path: Path) -> Path:
    """Where a graph written by this package keeps its weights when they are external."""
    return onnx_path.with_name(onnx_path.name + ".data")


def quantize_model_dir(model_dir: Path, scratch: Path, manifest: ModelManifest) -> None:
    """Replace the fp32 graph in ``model_dir`` by its int8 version; mark the manifest.

    The fp32 graph (and its external weights, if any) moves to ``scratch``.
    """
    graph = Path(model_dir) / manifest.onnx_file
    data = external_data_file(graph)
    fp32_dir = Path(scratch) / "fp32"
    fp32_dir.mkdir(parents=True, exist_ok=True)
    fp32_graph = fp32_dir / graph.name
    shutil.move(graph, fp32_graph)
    external = data.is_file()
    if external:
        shutil.move(data, external_data_file(fp32_graph))
    quantize_int8(fp32_graph, graph, external_data=external)
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


def save_onnx(
    source: Path,
    target: Path,
    *,
    external_data: bool | None = None,
    external_data_bytes: int = 1_500_000_000,
) -> int:
    """Re-save the graph at ``source`` as ``target``; returns the weights' size in bytes.

    Weights go to one external file (``external_data_file(target)``) when
    ``external_data`` is True, or when it is None and they exceed ``external_data_bytes``
    (a protobuf file cannot exceed 2 GiB). The exporter scatters large models over one file
    per tensor; this gathers them.
    """
    import onnx

    model = onnx.load(str(source))  # pulls in external tensors from source's folder
    size = sum(len(t.raw_data) for t in model.graph.initializer)
    use_external = external_data if external_data is not None else size > external_data_bytes
    if use_external:
        onnx.save_model(
            model,
            str(target),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=external_data_file(Path(target)).name,
            size_threshold=1024,
        )
    else:
        onnx.save_model(model, str(target))
    return size


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
