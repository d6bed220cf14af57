"""The embedder's model layer: the model manifest and ONNX Runtime inference (no torch)."""

from groundwire_embedder.models.manifest import MANIFEST_FILE, ModelManifest
from groundwire_embedder.models.onnx_backend import EncodedBatch, EncoderOutput, OnnxEncoder

__all__ = ["MANIFEST_FILE", "EncodedBatch", "EncoderOutput", "ModelManifest", "OnnxEncoder"]
