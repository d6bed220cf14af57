"""Per-document access through the orchestrator: the caller's identity, bound where
the call starts, reaches the retriever on every hop — the first retrieval, the agent's
``search`` and ``read_document`` tools, and Search — so a document restricted to a
group never reaches an outsider's events, stage reports or the LLM's prompts.

Reuses test_chain's stack (real MiniLM embedder and retriever in-process, the fake LLM
server scripting the agent's tool calls) with one more document, restricted to
``group:eng``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import pytest_asyncio

from groundwire.orchestrator.v1 import orchestrator_pb2, orchestrator_pb2_grpc
from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_core.grpc.client import create_channel
from groundwire_core.identity import Identity, identity_scope
from tests.fakes.llm_server import Reply, ToolUse
from tests.integration.orchestrator.test_chain import (  # noqa: F401 (fixtures)
    COLLECTION,
    Stack,
    _fresh,
    _strings,
    chain,
    of,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

pb = orchestrator_pb2
SECRET_SOURCE = "override.md"
SECRET = "ZEBRA-42"
SECRET_DOC = (
    "# Rate limit override\n\nEngineers may lift the rate limits per API key with the "
    f"override code {SECRET}; the gateway then accepts six hundred requests per minute."
)
ENGINEER = Identity(tenant="acme", user="bob", groups=frozenset({"eng"}))
OUTSIDER = Identity(tenant="acme", user="carol", groups=frozenset({"sales"}))
QUESTION = "what is the rate limit override code per API key"


@pytest_asyncio.fixture(loop_scope="module", scope="module", autouse=True)
async def restricted(chain: Stack) -> None:  # noqa: F811
    doc = retriever_pb2.Document(
        source_id=SECRET_SOURCE,
        filename=SECRET_SOURCE,
        content=SECRET_DOC.encode(),
        access=["group:eng"],
    )
    async with create_channel(f"127.0.0.1:{chain.ports['retriever']}") as ch:
        stub = retriever_pb2_grpc.RetrieverServiceStub(ch)
        request = retriever_pb2.IngestRequest(collection=COLLECTION, documents=[doc])
        events = [e async for e in stub.Ingest(request)]
    assert events[-1].report.ingested == 1


async def _ask(chain: Stack, identity: Identity) -> list[pb.AskEvent]:  # noqa: F811
    request = pb.AskRequest(
        collection=COLLECTION,
        messages=[pb.Message(role=pb.ROLE_USER, content=QUESTION)],
        max_agent_steps=3,
    )
    async with create_channel(f"127.0.0.1:{chain.ports['orchestrator']}") as ch:
        stub = orchestrator_pb2_grpc.OrchestratorServiceStub(ch)
        with identity_scope(identity):  # as the gateway binds it for a request
            return [e async for e in stub.Ask(request, timeout=30)]


def _script_agent(chain: Stack) -> None:  # noqa: F811
    """Step 1 searches for the secret, step 2 reads the first excerpt's document."""
    chain.router.push(
        "answer",
        Reply(
            text="",
            tool_calls=[ToolUse("search", {"query": "engineers lift the limits with a code"})],
        ),
        Reply(text="", tool_calls=[ToolUse("read_document", {"number": 1})]),
        Reply(text="I can't answer that from the available documents."),
    )


def _everything(events: Sequence[pb.AskEvent], bodies: list[Any]) -> str:
    return "\n".join([*(str(e) for e in events), *_strings(bodies)])


async def test_agent_tools_never_show_an_outsider_the_restricted_document(
    chain: Stack,  # noqa: F811
) -> None:
    _script_agent(chain)
    events = await _ask(chain, OUTSIDER)
    seen = _everything(events, chain.bodies("answer"))
    assert len(chain.bodies("answer")) == 3, "the agent ran both tools"
    assert "search(" in seen or "read_document(" in seen or "tool_use" in seen
    for leaked in (SECRET, SECRET_SOURCE, "Rate limit override"):
        assert leaked not in seen


async def test_agent_tools_show_a_group_member_the_restricted_document(
    chain: Stack,  # noqa: F811
) -> None:
    _script_agent(chain)
    events = await _ask(chain, ENGINEER)
    retrieved = {s.source_id for r in of(events, "retrieval") for s in r.sources}
    assert SECRET_SOURCE in retrieved
    assert SECRET in "\n".join(_strings(chain.bodies("answer")))


async def test_search_counts_differ_by_exactly_the_restricted_chunks(
    chain: Stack,  # noqa: F811
) -> None:
    async def search(identity: Identity) -> pb.SearchResponse:
        async with create_channel(f"127.0.0.1:{chain.ports['plain']}") as ch:
            stub = orchestrator_pb2_grpc.OrchestratorServiceStub(ch)
            with identity_scope(identity):
                return await stub.Search(
                    pb.SearchRequest(collection=COLLECTION, query=QUESTION, limit=50)
                )

    inside, outside = await search(ENGINEER), await search(OUTSIDER)
    inside_ids = {h.source_id for h in inside.results}
    outside_ids = {h.source_id for h in outside.results}
    assert inside_ids - outside_ids == {SECRET_SOURCE}
    assert SECRET not in str(outside)
    assert len(inside.results) - len(outside.results) == sum(
        1 for h in inside.results if h.source_id == SECRET_SOURCE
    )
