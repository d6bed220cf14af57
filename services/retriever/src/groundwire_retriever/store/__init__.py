"""Vector storage for the retriever: the ``VectorStore`` contract and its backends."""

from groundwire_retriever.store.base import VectorStore
from groundwire_retriever.store.edge import Bm25Settings, EdgeStore

__all__ = ["Bm25Settings", "EdgeStore", "VectorStore"]
