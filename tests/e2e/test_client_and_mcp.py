"""Acceptance of #25's integrations against the real services (local cluster as
processes, MiniLM, embedded Qdrant, no LLM: extractive answers), one cluster for all:

- the Python client (clients/python): an upload and an ingest job followed to the end
  through their server-sent progress, a streamed chat whose typed events come in the
  documented order, ``ask()`` with quoted citations, and errors that carry the
  API's code and request id;
- the MCP server: the SDK's own client over streamable HTTP (the gateway's /mcp) and
  over stdio (``groundwire mcp``) lists the tools and calls each; results carry
  sources and citations; without a key (the gateway requires one) it is refused.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client as McpClient
from mcp import MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from groundwire_cli.cluster import LocalCluster
from groundwire_client import (
    AsyncClient,
    AuthenticationError,
    CitationsEvent,
    Client,
    DeltaEvent,
    DoneEvent,
    NotFoundError,
    PermissionDeniedError,
    ResetEvent,
    RetrievalEvent,
    StagesEvent,
)

pytestmark = pytest.mark.e2e

ADMIN_KEY = "e2e-admin-key-client"
TEAM_KEY = "e2e-team-key-client"
DOCS = "corpus"
BULK = "bulk"
BULK_DOCS = 60
GROUNDWIRE = Path(sys.executable).with_name("groundwire")
QUESTION = "How do I limit requests per client?"


@pytest.fixture(scope="module")
def gateway(
    minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory, repo_root: Path
) -> Iterator[str]:
    """The cluster's gateway URL; keys required on every route, the sample corpus
    uploaded (as a job, through the client) into ``corpus``."""
    run = tmp_path_factory.mktemp("client-cluster")
    cluster = LocalCluster.with_free_ports(
        run,
        minilm_dir,
        run / "qdrant",
        extra_env={
            "GROUNDWIRE_GATEWAY_ADMIN_API_KEYS": f"ops:{ADMIN_KEY}",
            "GROUNDWIRE_GATEWAY_API_KEYS": f"team:{TEAM_KEY}",
            "GROUNDWIRE_GATEWAY_REQUIRE_API_KEY": "true",
            "GROUNDWIRE_GATEWAY_DEFAULT_COLLECTION": DOCS,
        },
    )
    with cluster:
        cluster.start()
        cluster.wait_ready(timeout_s=120)
        corpus = repo_root / "samples" / "corpus"
        with Client(cluster.gateway_url, ADMIN_KEY) as admin:
            job = admin.upload_files(
                DOCS, sorted(corpus.glob("*.md")), root=corpus, create_collection=True
            )
            final = admin.wait_for_job(job.id)
            assert final.state == "succeeded", final
            assert final.counts.ingested == len(list(corpus.glob("*.md")))
        yield cluster.gateway_url


# --- the Python client -----------------------------------------------------------------------


def test_an_ingest_job_reports_progress_until_it_is_done(gateway: str) -> None:
    documents = [
        {"source_id": f"note-{i:03}.md", "content": f"# Note {i}\n\nShelf {i} holds box {i * 7}."}
        for i in range(BULK_DOCS)
    ]
    with Client(gateway, ADMIN_KEY) as admin:
        job = admin.ingest_documents(BULK, documents, create_collection=True)
        assert job.kind == "ingest" and job.state in ("queued", "running")
        seen = list(admin.watch_job(job.id))
        listed = admin.jobs(BULK)
    assert len(seen) >= 2, "expected progress before the end"
    assert all(not j.finished for j in seen[:-1]) and seen[-1].finished
    done = [j.counts.done for j in seen]
    assert done == sorted(done) and done[-1] == BULK_DOCS
    final = seen[-1]
    assert (
        final.state == "succeeded" and final.counts.ingested == BULK_DOCS and final.progress == 1.0
    )
    assert {d.source_id for d in final.documents} == {d["source_id"] for d in documents}
    assert [j.id for j in listed][:1] == [job.id]


def test_a_streamed_chat_yields_typed_events_in_order(gateway: str) -> None:
    order = {RetrievalEvent: 0, DeltaEvent: 1, ResetEvent: 1, CitationsEvent: 2, StagesEvent: 3}
    with Client(gateway, TEAM_KEY) as client:
        events = list(client.chat(QUESTION))
    assert isinstance(events[0], RetrievalEvent) and isinstance(events[-1], DoneEvent)
    ranks = [order[type(e)] for e in events[:-1]]
    assert ranks == sorted(ranks), [type(e).__name__ for e in events]
    assert any(isinstance(e, DeltaEvent) for e in events)
    assert sum(isinstance(e, CitationsEvent) for e in events) == 1
    retrieved = events[0].sources
    assert retrieved and retrieved[0].source_id == "rate-limits.md"
    streamed = "".join(e.text for e in events if isinstance(e, DeltaEvent))
    assert events[-1].answer.strip() and streamed.strip()


async def test_ask_returns_the_answer_with_verified_citations(gateway: str) -> None:
    async with AsyncClient(gateway, TEAM_KEY) as client:
        answer = await client.ask(QUESTION)
        found = await client.search("Retry-After header", limit=3)
        names = await client.collection_names()
    assert answer.mode == "extractive" and answer.answer
    # quoted verbatim, judged by similarity only: never "verified" (issue #32)
    assert answer.citations and not answer.verified
    assert {c.status for c in answer.citations} == {"quoted"}
    cited = answer.source(answer.citations[0].number)
    assert cited is not None and cited.source_id == "rate-limits.md"
    assert len(answer.request_id) >= 16 and answer.stages
    assert found.results[0].source_id == "rate-limits.md" and found.collection == DOCS
    assert set(names) >= {DOCS, BULK}


def test_errors_carry_the_api_code_and_request_id(gateway: str) -> None:
    with Client(gateway) as anonymous, pytest.raises(AuthenticationError) as refused:
        anonymous.search("rate limits")
    assert refused.value.status == 401 and refused.value.code == "unauthenticated"
    assert len(refused.value.request_id) >= 16

    with Client(gateway, TEAM_KEY) as client:
        with pytest.raises(NotFoundError) as missing:
            client.search("rate limits", collection="no-such-collection")
        with pytest.raises(PermissionDeniedError) as denied:
            client.collections()
        with pytest.raises(NotFoundError):
            list(client.chat(QUESTION, collection="no-such-collection"))
    assert missing.value.code == "not_found" and missing.value.request_id
    assert "no-such-collection" in missing.value.message
    assert denied.value.code == "permission_denied" and denied.value.status == 403
    assert missing.value.request_id != denied.value.request_id


# --- the MCP server --------------------------------------------------------------------------


async def _call_every_tool(client: McpClient) -> dict[str, dict[str, Any]]:
    tools = {t.name for t in (await client.list_tools()).tools}
    assert tools == {"search", "ask", "list_collections", "read_document"}
    out: dict[str, dict[str, Any]] = {}
    for name, arguments in (
        ("search", {"query": QUESTION, "limit": 3}),
        ("ask", {"question": QUESTION}),
        ("list_collections", {}),
        ("read_document", {"source_id": "rate-limits.md"}),
    ):
        result = await client.call_tool(name, arguments)
        assert not result.is_error, (name, result.content)
        assert result.structured_content is not None
        out[name] = result.structured_content
    return out


def _check_results(results: dict[str, dict[str, Any]]) -> None:
    passages = results["search"]["passages"]
    assert passages[0]["source_id"] == "rate-limits.md" and passages[0]["title"]
    assert passages[0]["resource"] == "groundwire://documents/corpus/rate-limits.md"
    answer = results["ask"]
    assert answer["mode"] == "extractive" and answer["answer"]
    assert answer["citations"] and all(c["status"] == "quoted" for c in answer["citations"])
    assert {s["source_id"] for s in answer["sources"]} >= {"rate-limits.md"}
    assert answer["verification"].endswith("chosen by similarity; none checked for meaning")
    assert {"name": DOCS, "default": True} in results["list_collections"]["collections"]
    document = results["read_document"]
    assert document["source_id"] == "rate-limits.md" and "429" in document["text"]


async def test_mcp_over_streamable_http(gateway: str) -> None:
    url = f"{gateway}/mcp"
    headers = {"authorization": f"Bearer {TEAM_KEY}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        McpClient(streamable_http_client(url, http_client=http)) as client,
    ):
        results = await _call_every_tool(client)
        resource = await client.read_resource("groundwire://documents/corpus/rate-limits.md")
    _check_results(results)
    assert "429" in resource.contents[0].text  # type: ignore[union-attr]

    with pytest.raises(ExceptionGroup) as refused:
        async with (
            httpx2.AsyncClient(timeout=60) as http,
            McpClient(streamable_http_client(url, http_client=http)) as client,
        ):
            await client.list_tools()
    assert refused.group_contains(MCPError)
    async with httpx2.AsyncClient(timeout=60) as http:
        raw = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert raw.status_code == 401 and raw.json()["error"]["code"] == "unauthenticated"


async def test_mcp_over_stdio(gateway: str) -> None:
    command = StdioServerParameters(
        command=str(GROUNDWIRE),
        args=["mcp", "--gateway", gateway],
        env={"GROUNDWIRE_API_KEY": TEAM_KEY},
    )
    async with McpClient(command) as client:
        results = await _call_every_tool(client)
    _check_results(results)


def test_mcp_over_stdio_stops_with_the_api_reason_without_a_key(gateway: str) -> None:
    keyless = subprocess.run(
        [str(GROUNDWIRE), "mcp", "--gateway", gateway],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "GROUNDWIRE_API_KEY"},
    )
    assert keyless.returncode == 1 and keyless.stdout == ""
    assert "HTTP 401" in keyless.stderr and "unauthenticated" in keyless.stderr
