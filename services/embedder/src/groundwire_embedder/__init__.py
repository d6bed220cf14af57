"""Groundwire embedder: bi-encoders served on ONNX Runtime over gRPC."""
