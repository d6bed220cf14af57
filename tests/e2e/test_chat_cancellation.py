"""A client that disconnects mid-answer cancels the whole chain down to the LLM:
gateway (SSE) -> orchestrator (Ask stream) -> the LLM's HTTP stream, which the fake
Anthropic server sees closed within a second. All real processes but the fake."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from groundwire_cli.cluster import LocalCluster, free_port
from groundwire_cli.ingest import ingest_files
from tests.fakes.llm_server import FakeLLMServer, RecordedRequest, Reply

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


class _FakeOnThread:
    """The fake Anthropic API on its own event loop, readable from the sync test."""

    def __init__(self) -> None:
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server: FakeLLMServer = self._run(
            FakeLLMServer(default=_reply, port=self.port).start()
        )

    def _run(self, coro):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def close(self) -> None:
        self._run(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture(scope="module")
def setup(
    minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LocalCluster, _FakeOnThread]]:
    fake = _FakeOnThread()
    run = tmp_path_factory.mktemp("cancel")
    cluster = LocalCluster.with_free_ports(
        run,
        minilm_dir,
        run / "qdrant",
        extra_env={
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_API_KEY": "fake-key",
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_BASE_URL": f"http://127.0.0.1:{fake.port}",
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_FAST_MODEL": FAST,
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_STRONG_MODEL": STRONG,
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
    setup: tuple[LocalCluster, _FakeOnThread],
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
