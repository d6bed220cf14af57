"""A client that disconnects mid-answer cancels the whole chain down to the LLM:
gateway (SSE) -> orchestrator (Ask stream) -> the LLM's HTTP stream, which the fake
Anthropic server sees closed within a second. All real processes but the fake."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from groundwire_cli.cluster import LocalCluster
from groundwire_cli.ingest import ingest_files
from tests.fakes.llm_server import RecordedRequest, Reply
from tests.fakes.llm_thread import ThreadedFakeLLM

pytestmark = pytest.mark.e2e

FAST, STRONG = "fake-fast", "fake-strong"
DOC = "# Pasta\n\nBoil the spaghetti in salted water for about nine minutes, then drain it."


def _reply(request: RecordedRequest) -> Reply:
    if request.body.get("model") == FAST:
        return Reply(
            json={
                "rewritten_query": "pasta",
                "hyde_document": "boil pasta",
                "intent": "cook",
                "filters": [],
                "negatives": [],
            }
        )
    # a long, slow answer: the client leaves long before it ends
    return Reply(text="Boil it for nine minutes [1]. " * 200, ttft_s=0.05, token_delay_s=0.05)


@pytest.fixture(scope="module")
def setup(
    minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LocalCluster, ThreadedFakeLLM]]:
    fake = ThreadedFakeLLM(_reply).start()
    run = tmp_path_factory.mktemp("cancel")
    cluster = LocalCluster.with_free_ports(
        run,
        minilm_dir,
        run / "qdrant",
        extra_env={
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_API_KEY": "fake-key",
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_BASE_URL": fake.url,
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_FAST_MODEL": FAST,
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_STRONG_MODEL": STRONG,
            # today's streaming (verify-before-show holds text: tested on its own)
            "GROUNDWIRE_ORCHESTRATOR_VERIFY_BEFORE_SHOW": "off",
            "GROUNDWIRE_ORCHESTRATOR_CITATION_VERIFIERS": "similarity",
        },
    )
    try:
        with cluster:
            cluster.start()
            cluster.wait_ready(timeout_s=180)
            docs = run / "docs"
            docs.mkdir()
            (docs / "pasta.md").write_text(DOC)
            asyncio.run(
                ingest_files(cluster.addr("retriever"), "docs", [docs / "pasta.md"], root=docs)
            )
            yield cluster, fake
    finally:
        fake.close()


def test_disconnect_mid_stream_cancels_the_llm_request(
    setup: tuple[LocalCluster, ThreadedFakeLLM],
) -> None:
    cluster, fake = setup
    body = {
        "messages": [{"role": "user", "content": "how long do I boil pasta"}],
        "collection": "docs",
    }
    deltas = 0
    with httpx.Client(base_url=cluster.gateway_url, timeout=30) as client:
        with client.stream("POST", "/v1/chat", json=body) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if line.startswith("event: delta"):
                    deltas += 1
                    if deltas == 3:
                        break
            left_at = time.monotonic()
        # leaving the block closed the connection mid-answer
    assert deltas == 3, "the answer was streaming when the client left"
    strong = [i for i, r in enumerate(fake.server.requests) if r.body.get("model") == STRONG]
    assert strong, "the answer request reached the fake LLM"
    deadline = left_at + 5
    while time.monotonic() < deadline:
        gone = [d for d in fake.server.disconnects if d.request_index in strong]
        if gone:
            break
        time.sleep(0.02)
    assert gone, "the LLM request was never cancelled"
    assert gone[0].at - left_at <= 1.0, f"cancelled after {gone[0].at - left_at:.2f}s"
    assert fake.server.completed < len(fake.server.requests), "the answer did not run to its end"
