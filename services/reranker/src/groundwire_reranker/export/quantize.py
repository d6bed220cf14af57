"""What int8 quantization costs a cross-encoder's scores; the build prints it.

The recipe itself (per-channel int8 weights, MatMul only) is
``groundwire_core.onnx_models.quantize_int8``, shared with the embedder's build.
"""

from __future__ import annotations

import numpy as np


def score_drift(int8_scores: np.ndarray, fp32_scores: np.ndarray) -> tuple[float, float]:
    """(max, mean) absolute difference between two score vectors of the same pairs."""
    a = np.asarray(int8_scores, dtype=np.float64)
    b = np.asarray(fp32_scores, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"need two equal, non-empty score vectors, got {a.shape}, {b.shape}")
    diff = np.abs(a - b)
    return float(diff.max()), float(diff.mean())
