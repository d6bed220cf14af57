"""The reranker's model layer: the model manifest and ONNX Runtime inference (no torch)."""

from groundwire_reranker.models.cross_encoder import (
    OnnxCrossEncoder,
    Pair,
    PairBatch,
    sigmoid,
)
from groundwire_reranker.models.manifest import MANIFEST_FILE, CrossEncoderManifest

__all__ = [
    "MANIFEST_FILE",
    "CrossEncoderManifest",
    "OnnxCrossEncoder",
    "Pair",
    "PairBatch",
    "sigmoid",
]
