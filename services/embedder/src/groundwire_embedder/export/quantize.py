"""Dynamic int8 quantization of an exported encoder, and the check that it still agrees.

Plain ``quantize_dynamic(QInt8)`` loses too much on MiniLM (cosine to fp32: mean 0.94,
min 0.90, measured here). Per-channel weights on the MatMuls only keep mean ~0.995 and run
~1.8-2x faster (see ../shared/ENVIRONMENT.md), so that is the one recipe used.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np

from groundwire_embedder.models.manifest import ModelManifest

# onnxruntime's quantizer logs this on the root logger for every call; the models it
# would pre-process (shape inference, graph optimisation) gain nothing measurable here.
_NOISE = "consider to run pre-processing before quantization"


class _DropPreprocessHint(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return _NOISE not in record.getMessage()


@contextmanager
def _quiet_quantizer() -> Iterator[None]:
    root = logging.getLogger()
    hint = _DropPreprocessHint()
    root.addFilter(hint)
    try:
        yield
    finally:
        root.removeFilter(hint)


def quantize_int8(fp32_model: Path, int8_model: Path, *, external_data: bool = False) -> None:
    """Write a dynamically quantized (int8 weights, per channel, MatMul only) copy.

    With ``external_data`` the weights go to ``<int8_model>.data`` beside the graph.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _quiet_quantizer():
        quantize_dynamic(
            Path(fp32_model),
            Path(int8_model),
            op_types_to_quantize=["MatMul"],
            per_channel=True,
            weight_type=QuantType.QInt8,
            use_external_data_format=external_data,
        )


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
