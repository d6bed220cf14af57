"""``POST /v1/search`` with ``group_by: "document"`` through the real gateway, the real
orchestrator and the real retriever, once on each engine (qdrant-edge embedded, and
qdrant-client's local mode): no two results of one source, each with the number of its
matching chunks and their other headings, and the same answer on both engines (a
congruence test, like the retriever's own). The chunk-level default is unchanged."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings
from tests.fakes.llm_server import FakeLLMServer, Reply
from tests.integration.gateway.chain import serve_chain
from tests.integration.orchestrator.test_chain import DOCS
from tests.integration.orchestrator.test_search_by_document import handbook

pytestmark = pytest.mark.asyncio(loop_scope="module")

QUERY = "rate limits per API key"


def _on_qdrant_client(settings: RetrieverSettings) -> RetrieverService:
    """The retriever on qdrant-client's local mode instead of the embedded engine."""
    return RetrieverService(settings.model_copy(update={"qdrant_url": ":memory:"}))


ENGINES: dict[str, Callable[[RetrieverSettings], RetrieverService]] = {
    "edge": RetrieverService,
    "qdrant-client": _on_qdrant_client,
}


async def search(client: httpx.AsyncClient, **body: Any) -> list[dict[str, Any]]:
    reply = await client.post("/v1/search", json={"query": QUERY, "limit": 5, **body})
    assert reply.status_code == 200, reply.text
    stages = {s["name"]: s for s in reply.json()["stages"]}
    assert not stages["retrieval"]["fallback"], stages["retrieval"]
    results: list[dict[str, Any]] = reply.json()["results"]
    return results


async def test_one_result_per_document_on_both_engines(
    minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    answers = {}
    for engine, retriever in ENGINES.items():
        # one stack at a time, each torn down in the task that started it
        async with AsyncExitStack() as exits:
            # no analysis JSON: the analysis falls back to the raw query on both stacks
            llm = await exits.enter_async_context(FakeLLMServer(default=Reply(text="no")))
            app = await serve_chain(
                exits,
                minilm_dir=minilm_dir,
                data_path=tmp_path_factory.mktemp(engine),
                docs={"handbook.md": handbook(), **DOCS},
                llm_url=llm.url,
                retriever=retriever,
            )
            client = await exits.enter_async_context(
                httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw")
            )
            chunks = await search(client)
            documents = await search(client, group_by="document")
            refused = [
                (await client.post("/v1/search", json={"query": QUERY, **body})).status_code
                for body in ({"group_by": "title"}, {"group_by": None})
            ]
        assert refused == [422, 422], engine

        # the chunk level (the default) repeats the handbook
        sources = [r["source_id"] for r in chunks]
        assert sources.count("handbook.md") >= 2, (engine, sources)
        assert all(r["matching_chunks"] == 0 and r["other_headings"] == [] for r in chunks)

        sources = [r["source_id"] for r in documents]
        assert len(sources) == len(set(sources)) == 5, (engine, sources)
        [book] = [r for r in documents if r["source_id"] == "handbook.md"]
        assert book["matching_chunks"] >= 2 and book["other_headings"], (engine, book)
        assert all(r["matching_chunks"] >= 1 for r in documents), engine
        answers[engine] = [
            (r["chunk_id"], r["matching_chunks"], r["other_headings"]) for r in documents
        ]
    assert answers["edge"] == answers["qdrant-client"]
