"""BM25 for both engines: the analyzer's settings and the text it indexes.

BM25 vectors come from qdrant-edge's standalone ``Bm25`` analyzer for both engines
(``EdgeStore`` and ``QdrantServerStore``): Qdrant server's own BM25 inference is not
used, so identical text gives identical sparse vectors on either engine (Qdrant
applies the IDF modifier at query time).
"""

from __future__ import annotations

from dataclasses import dataclass

import qdrant_edge as qe

from groundwire_retriever.domain import Chunk

__all__ = ["Bm25Settings", "bm25_document_text"]


@dataclass(frozen=True)
class Bm25Settings:
    """BM25 document weighting; persisted per collection, fixed at creation.

    ``avg_len`` is the expected chunk length in tokens (after stop-word removal).
    """

    k: float = 1.2
    b: float = 0.75
    avg_len: float = 256.0

    def model(self) -> qe.Bm25:
        """The qdrant-edge BM25 model: English word tokenizer, lowercase, English stop
        words and Snowball stemmer (all explicit, not left to library defaults)."""
        return qe.Bm25(
            qe.Bm25Config(
                k=self.k,
                b=self.b,
                avg_len=self.avg_len,
                tokenizer=qe.TokenizerType.Word,
                language="english",
                lowercase=True,
                stopwords=qe.Language.English,
                stemmer=qe.SnowballParams(qe.SnowballLanguage.English),
            )
        )


def bm25_document_text(chunk: Chunk) -> str:
    """The text BM25 indexes: title, then heading path, then the chunk text."""
    parts = [chunk.title] if chunk.title else []
    parts.extend(h for h in chunk.heading_path if h and h != chunk.title)
    parts.append(chunk.text)
    return "\n".join(parts)
