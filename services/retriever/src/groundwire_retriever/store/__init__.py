"""Vector storage for the retriever: the ``VectorStore`` contract and its two engines.

``EdgeStore`` runs Qdrant's engine in-process (qdrant-edge) on a folder;
``QdrantServerStore`` talks to a Qdrant server through qdrant-client (or runs its
local mode). Both are ``VersionedStore`` over an engine, so they behave the same.
"""

from groundwire_retriever.store.base import StagedSource, VectorStore
from groundwire_retriever.store.bm25 import Bm25Settings
from groundwire_retriever.store.edge import EdgeStore
from groundwire_retriever.store.qdrant import QdrantServerStore

__all__ = ["Bm25Settings", "EdgeStore", "QdrantServerStore", "StagedSource", "VectorStore"]
