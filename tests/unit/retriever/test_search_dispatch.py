"""Where RetrieverCore runs a search: small embedded searches on the event loop (no
thread hop), large ones and every Qdrant-server search on a worker thread."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from groundwire_retriever.domain import CollectionSpec, SearchPath, SearchQuery, SearchResult
from groundwire_retriever.service import INLINE_CANDIDATES, RetrieverCore


class ThreadRecordingStore:
    """Only what ``RetrieverCore.search`` touches: the engine kind, the collection
    specs (for the caller's access filter) and ``search``."""

    def __init__(self, engine: str) -> None:
        self.engine = engine
        self.threads: list[str] = []

    def list_collections(self) -> list[CollectionSpec]:
        return [CollectionSpec(name="docs", dense_dims=4)]

    def search(self, name: str, query: SearchQuery) -> SearchResult:
        self.threads.append(threading.current_thread().name)
        return SearchResult(hits=(), paths=())


def _query(path_limit: int) -> SearchQuery:
    return SearchQuery(
        text="noodles", dense=(0.1,) * 4, paths=frozenset(SearchPath), path_limit=path_limit
    )


@pytest.mark.parametrize(
    ("engine", "path_limit", "inline"),
    [
        ("edge", 100, True),
        ("edge", INLINE_CANDIDATES // len(SearchPath), True),
        ("edge", INLINE_CANDIDATES // len(SearchPath) + 1, False),
        ("qdrant", 100, False),
    ],
)
async def test_search_runs_inline_only_when_small_and_embedded(
    engine: str, path_limit: int, inline: bool
) -> None:
    store = ThreadRecordingStore(engine)
    core = RetrieverCore(store, embedder=None)  # type: ignore[arg-type]
    result: Any = await core.search("docs", _query(path_limit))
    assert result.hits == ()
    on_loop = store.threads == [threading.main_thread().name]
    assert on_loop is inline
