"""Groundwire retriever: Qdrant collections, ingest and hybrid search."""
