"""Groundwire reranker: cross-encoders served on ONNX Runtime over gRPC."""
