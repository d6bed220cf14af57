"""The reranker's model layer: the model manifest and ONNX Runtime inference (no torch)
of relevance cross-encoders and entailment (NLI) models."""

from groundwire_reranker.models.cross_encoder import (
    OnnxCrossEncoder,
    Pair,
    PairBatch,
    PairClassifier,
    sigmoid,
)
from groundwire_reranker.models.manifest import MANIFEST_FILE, NLI_LABELS, CrossEncoderManifest
from groundwire_reranker.models.nli import LabelProbs, OnnxNliModel

__all__ = [
    "MANIFEST_FILE",
    "NLI_LABELS",
    "CrossEncoderManifest",
    "LabelProbs",
    "OnnxCrossEncoder",
    "OnnxNliModel",
    "Pair",
    "PairBatch",
    "PairClassifier",
    "sigmoid",
]
