"""Nothing expensive on the request path: a search or a chat through the real gateway
app, the real orchestrator and the real retriever (MiniLM embedder, Qdrant edge) makes
no retriever call that counts or facets a whole collection. Only the admin listing
asks for counts.

The retriever is the real service, recording which collection-level RPCs reach it
(and whether a listing asked for counts) before it answers them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from pydantic import SecretStr

from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings
from tests.fakes.llm_server import FakeLLMServer, RecordedRequest, Reply
from tests.integration.gateway.chain import serve_chain

pytestmark = pytest.mark.asyncio(loop_scope="module")

DOCS = {
    "limits.md": "# Rate limits\n\nRate limits are enforced per API key. Each key may send "
    "sixty requests per minute; beyond that the gateway answers 429.",
    "roses.md": "# Pruning roses\n\nCut each cane just above an outward-facing bud in late "
    "winter, removing dead and crossing stems first.",
}
ADMIN = {"authorization": "Bearer admin-secret-1"}
FILTERS = [{"field": "source_id", "any_of": ["limits.md"]}]
COUNTING = {"DescribeCollection", "Stats", "ListSources"}
"""RPCs that count or facet every chunk of a collection (see retriever.proto)."""


class RecordingRetriever(RetrieverService):
    """The real retriever, recording each collection-level call: (RPC, counts asked)."""

    def __init__(self, settings: RetrieverSettings) -> None:
        super().__init__(settings)
        self.calls: list[tuple[str, bool]] = []

    async def ListCollections(self, request, context):  # type: ignore[no-untyped-def]
        self.calls.append(("ListCollections", request.counts))
        return await super().ListCollections(request, context)

    async def DescribeCollection(self, request, context):  # type: ignore[no-untyped-def]
        self.calls.append(("DescribeCollection", True))
        return await super().DescribeCollection(request, context)

    async def Stats(self, request, context):  # type: ignore[no-untyped-def]
        self.calls.append(("Stats", True))
        return await super().Stats(request, context)

    async def ListSources(self, request, context):  # type: ignore[no-untyped-def]
        self.calls.append(("ListSources", True))
        return await super().ListSources(request, context)


def _analysis(request: RecordedRequest) -> Reply:
    """Analysis JSON for the analysis prompt (so the analysis stage asks for the
    collection's filterable fields), a cited sentence for the answer prompt."""
    system = request.body.get("system", "")
    system = system if isinstance(system, str) else " ".join(b["text"] for b in system)
    if system.startswith("You analyse search queries"):
        return Reply(
            json={
                "rewritten_query": "rate limits per key",
                "hyde_document": "Each API key may send sixty requests per minute.",
                "intent": "limits",
                "filters": [],
                "negatives": [],
            }
        )
    return Reply(text="Each API key may send sixty requests per minute [1].")


@dataclass
class Stack:
    client: httpx.AsyncClient
    retriever: RecordingRetriever


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def stack(minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    async with AsyncExitStack() as exits:
        llm = await exits.enter_async_context(FakeLLMServer(default=_analysis))
        recording: list[RecordingRetriever] = []

        def retriever(settings: RetrieverSettings) -> RecordingRetriever:
            recording.append(RecordingRetriever(settings))
            return recording[0]

        app = await serve_chain(
            exits,
            minilm_dir=minilm_dir,
            data_path=tmp_path_factory.mktemp("qdrant"),
            docs=DOCS,
            llm_url=llm.url,
            retriever=retriever,
            orchestrator={"analysis_timeout_s": 5.0},
            gateway={"admin_api_keys": SecretStr("ops:admin-secret-1")},
        )
        client = await exits.enter_async_context(
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw")
        )
        yield Stack(client, recording[0])


def _events(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = block.split("\n")
        name = next((ln[6:].strip() for ln in lines if ln.startswith("event:")), "")
        data = [ln[5:].strip() for ln in lines if ln.startswith("data:")]
        if name and data:
            out.append((name, json.loads("\n".join(data))))
    return out


async def test_search_and_chat_count_no_collection_and_the_admin_listing_does(
    stack: Stack,
) -> None:
    stack.retriever.calls.clear()
    search = await stack.client.post(
        "/v1/search", json={"query": "how many requests per minute", "filters": FILTERS}
    )
    assert search.status_code == 200, search.text
    assert {r["source_id"] for r in search.json()["results"]} == {"limits.md"}
    chat = await stack.client.post(
        "/v1/chat",
        json={
            "messages": [{"role": "user", "content": "how many requests per minute?"}],
            "filters": FILTERS,
        },
    )
    assert chat.status_code == 200, chat.text
    events = _events(chat.text)
    stages = {s["name"]: s for name, d in events if name == "stages" for s in d["stages"]}
    # the analysis ran on the LLM, so it did look up the collection's filterable fields
    assert stages["analysis"]["fallback"] is False, stages["analysis"]
    assert [name for name, _ in events][-1] == "done"

    # both lookups happened (the gateway's catalog, the orchestrator's filterable
    # fields), each through the cheap listing; nothing counted a collection
    assert stack.retriever.calls == [("ListCollections", False)] * 2
    assert not COUNTING & {rpc for rpc, _ in stack.retriever.calls}

    listed = await stack.client.get("/v1/admin/collections", headers=ADMIN)
    assert listed.status_code == 200, listed.text
    [docs] = listed.json()["collections"]
    assert (docs["sources"], docs["chunks"] > 0) == (len(DOCS), True)
    assert stack.retriever.calls[-1] == ("ListCollections", True)
