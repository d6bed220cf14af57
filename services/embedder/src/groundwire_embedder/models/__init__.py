"""The embedder's model layer: the model manifest and ONNX Runtime inference (no torch)."""

from groundwire_embedder.models.manifest import MANIFEST_FILE, ModelManifest
from groundwire_embedder.models.onnx_backend import (
    EncodedBatch,
    EncoderOutput,
    GraphOutputs,
    OnnxEncoder,
    SparseWeights,
)

__all__ = [
    "MANIFEST_FILE",
    "EncodedBatch",
    "EncoderOutput",
    "GraphOutputs",
    "ModelManifest",
    "OnnxEncoder",
    "SparseWeights",
]
