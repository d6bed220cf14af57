"""Dynamic int8 quantization of an exported cross-encoder.

Plain ``quantize_dynamic(QInt8)`` loses too much on MiniLM-class encoders (cosine to fp32
mean 0.94 on the embedder, measured here); per-channel weights on the MatMuls only keep
it near 0.995 and run ~1.8-2x faster (see ../shared/ENVIRONMENT.md), so that is the one
recipe used. The build measures what it costs the scores and prints it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

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


def quantize_int8(fp32_model: Path, int8_model: Path) -> None:
    """Write a dynamically quantized (int8 weights, per channel, MatMul only) copy."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _quiet_quantizer():
        quantize_dynamic(
            Path(fp32_model),
            Path(int8_model),
            op_types_to_quantize=["MatMul"],
            per_channel=True,
            weight_type=QuantType.QInt8,
        )


def score_drift(int8_scores: np.ndarray, fp32_scores: np.ndarray) -> tuple[float, float]:
    """(max, mean) absolute difference between two score vectors of the same pairs."""
    a = np.asarray(int8_scores, dtype=np.float64)
    b = np.asarray(fp32_scores, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"need two equal, non-empty score vectors, got {a.shape}, {b.shape}")
    diff = np.abs(a - b)
    return float(diff.max()), float(diff.mean())
