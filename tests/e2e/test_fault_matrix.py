"""The fault matrix: the whole cluster as processes (MiniLM embedder, a tiny real
cross-encoder, the embedded store, the fake Anthropic API, a real Redis), one
dependency taken away at a time. Each case asserts, through the gateway over HTTP,
what the README promises while it is gone — a fallback the stage report names, or a
503 naming the dependency, within the deadline and never a 500 — then brings back
only that dependency and asserts the cluster recovers without restarting anything
else (every other process keeps its pid)."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from groundwire_cli.cluster import SERVICES, ClusterError, LocalCluster, free_port
from tests.e2e.fault_support import (
    FAST_MODEL,
    STRONG_MODEL,
    build_tiny_reranker,
    eventually,
    role_reply,
    sse_events,
)
from tests.fakes.llm_thread import ThreadedFakeLLM
from tests.redis_server import RedisServer

pytestmark = pytest.mark.e2e

ADMIN_KEY = "fault-matrix-admin-key"
ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}
COLLECTION = "faults"
REQUEST_TIMEOUT_S = 8.0
CHAT_TIMEOUT_S = 15.0
EMBEDDER_QUERY_TIMEOUT_S = 1.0
RECOVERY_S = 30.0
"""How long a restarted dependency may take to be used again (channels reconnect with
a backoff of at most 2 s; the reranker's load is cached 1 s)."""
QUESTION = "how long should spaghetti cook"
DOCS = {
    "kitchen.md": "# Cooking pasta\n\nBring salted water to a rolling boil, add the spaghetti "
    "and stir. Cook it until it is al dente, after about nine minutes.",
    "sauce.md": "# Tomato sauce\n\nCook crushed tomatoes with garlic and olive oil for twenty "
    "minutes, then toss the sauce with the cooked spaghetti.",
    "fresh.md": "# Fresh pasta\n\nFresh egg spaghetti cooks much faster than dried: two to "
    "three minutes in boiling water is long enough.",
    "rice.md": "# Boiling rice\n\nRinse the rice, cover it with water and cook it with the "
    "lid on for fifteen minutes, then let it rest as long again.",
    "bread.md": "# Baking bread\n\nKnead the dough for ten minutes, let it rise as long as it "
    "needs to double and bake it until the crust sounds hollow.",
    "garden.md": "# Pruning roses\n\nCut each cane just above an outward-facing bud in late "
    "winter, removing dead and crossing stems first.",
    "finance.md": "# Paying taxes\n\nFile your return before the deadline and keep receipts "
    "for every deductible expense for at least five years.",
}

SLACK_S = 10.0
"""Added to every deadline an assertion checks: a loaded CI machine is slow, and what
these tests guard against is a request that hangs (far past it), not a late one."""


@dataclass
class Matrix:
    cluster: LocalCluster
    redis: RedisServer
    llm: ThreadedFakeLLM
    http: httpx.Client
    run_dir: Path

    def pids(self) -> dict[str, int]:
        """The pid of each running process the cluster is made of."""
        pids = {
            name: child.process.pid
            for name, child in self.cluster.children.items()
            if child.process is not None and child.process.poll() is None
        }
        if self.redis.process is not None:
            pids["redis"] = self.redis.process.pid
        return pids

    def restart(self, name: str) -> None:
        self.cluster.start((name,))
        self.cluster.wait_ready(timeout_s=90, names=(name,))


@pytest.fixture(scope="module")
def matrix(
    minilm_dir: Path, repo_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Matrix]:
    run = tmp_path_factory.mktemp("fault-matrix")
    reranker_model = build_tiny_reranker(repo_root, run / "reranker")
    redis = RedisServer(run / "redis")
    llm = ThreadedFakeLLM(role_reply)
    cluster = LocalCluster.with_free_ports(
        run,
        minilm_dir,
        run / "qdrant",
        extra_env={
            "GROUNDWIRE_EMBEDDER_INTRA_OP_THREADS": "1",
            "GROUNDWIRE_RERANKER_MODEL_DIR": str(reranker_model),
            "GROUNDWIRE_RERANKER_INTRA_OP_THREADS": "1",
            # a random model: keep every scored passage, and never skip for load on
            # busy CI cores, so a fallback here can only mean the reranker is gone
            "GROUNDWIRE_ORCHESTRATOR_RERANK_THRESHOLD": "0",
            "GROUNDWIRE_ORCHESTRATOR_RERANK_BUDGET_MS": "0",
            "GROUNDWIRE_ORCHESTRATOR_RERANK_TIMEOUT_S": "6",
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_API_KEY": "fake-anthropic-key",
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_BASE_URL": llm.url,
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_FAST_MODEL": FAST_MODEL,
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_STRONG_MODEL": STRONG_MODEL,
            "GROUNDWIRE_ORCHESTRATOR_LLM_ORDER": "anthropic",
            "GROUNDWIRE_ORCHESTRATOR_EMBEDDER_QUERY_TIMEOUT_S": str(EMBEDDER_QUERY_TIMEOUT_S),
            # today's streaming and LLM traffic (the judge is tested on its own)
            "GROUNDWIRE_ORCHESTRATOR_VERIFY_BEFORE_SHOW": "off",
            "GROUNDWIRE_ORCHESTRATOR_CITATION_VERIFIERS": "similarity",
            "GROUNDWIRE_GATEWAY_REDIS_URL": redis.url,
            "GROUNDWIRE_GATEWAY_REQUEST_TIMEOUT_S": str(REQUEST_TIMEOUT_S),
            "GROUNDWIRE_GATEWAY_CHAT_TIMEOUT_S": str(CHAT_TIMEOUT_S),
            "GROUNDWIRE_GATEWAY_ADMIN_API_KEYS": f"ops:{ADMIN_KEY}",
            # on (every admission goes through Redis), but never refusing this file's requests
            "GROUNDWIRE_GATEWAY_RATE_LIMIT_PER_MIN": "1000",
            "GROUNDWIRE_GATEWAY_SEARCH_RATE_LIMIT_PER_MIN": "1000",
            # each fault is read from health right after it is made: no cached result
            "GROUNDWIRE_GATEWAY_HEALTH_CACHE_S": "0",
        },
    )
    try:
        redis.start()
        llm.start()
        with cluster:
            cluster.start()
            cluster.wait_ready(timeout_s=150)
            with httpx.Client(base_url=cluster.gateway_url, timeout=60) as http:
                documents = [{"source_id": k, "content": v} for k, v in DOCS.items()]
                ingested = http.post(
                    f"/v1/admin/collections/{COLLECTION}/documents",
                    json={"documents": documents, "create_collection": True},
                    headers=ADMIN,
                    params={"wait": "true"},  # the report, not a job to follow
                )
                assert ingested.status_code == 200, ingested.text
                assert ingested.json()["ingested"] == len(DOCS)
                yield Matrix(cluster, redis, llm, http, run)
    finally:
        llm.close()
        redis.stop()


@pytest.fixture(autouse=True)
def whole_again(matrix: Matrix) -> Iterator[None]:
    """After each case, whatever it left down is brought back (a failed case must not
    fail the next ones), and the cluster must be healthy before the next case runs."""
    yield
    down = [
        name
        for name in SERVICES
        if (child := matrix.cluster.children.get(name)) is None
        or child.process is None
        or child.process.poll() is not None
    ]
    for name in down:
        matrix.restart(name)
    if not matrix.redis.running:
        matrix.redis.start()
    if not matrix.llm.running:
        matrix.llm.start()
    health = eventually(
        lambda: matrix.http.get("/v1/health"),
        lambda r: r.status_code == 200 and r.json()["status"] == "ok",
        timeout_s=RECOVERY_S,
    )
    assert health.json()["status"] == "ok", health.text


# --- requests and what they answered ---------------------------------------------------


def search(http: httpx.Client, **body: Any) -> httpx.Response:
    return http.post("/v1/search", json={"query": QUESTION, "collection": COLLECTION, **body})


@dataclass
class Chat:
    response: httpx.Response
    events: list[tuple[str, dict[str, Any]]]

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.events]

    def one(self, name: str) -> dict[str, Any]:
        found = [data for n, data in self.events if n == name]
        assert len(found) == 1, f"expected one {name} event, got {self.names}"
        return found[0]

    @property
    def done(self) -> dict[str, Any]:
        return self.one("done")

    @property
    def stages(self) -> dict[str, dict[str, Any]]:
        return {s["name"]: s for s in self.one("stages")["stages"]}

    @property
    def source_ids(self) -> list[str]:
        return [s["chunk_id"] for s in self.one("retrieval")["sources"]]


def chat(http: httpx.Client) -> Chat:
    response = http.post(
        "/v1/chat",
        json={"messages": [{"role": "user", "content": QUESTION}], "collection": COLLECTION},
    )
    ok = response.status_code == 200
    return Chat(response, sse_events(response.text) if ok else [])


def stages_of(reply: httpx.Response) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in reply.json()["stages"]}


def ranking(reply: httpx.Response) -> list[tuple[str, float]]:
    return [(r["chunk_id"], r["score"]) for r in reply.json()["results"]]


def health(http: httpx.Client) -> tuple[int, dict[str, Any]]:
    reply = http.get("/v1/health")
    return reply.status_code, reply.json()


def assert_answered_chat(conversation: Chat, mode: str) -> None:
    assert conversation.response.status_code == 200, conversation.response.text
    names = conversation.names
    assert names[0] == "retrieval" and names[-1] == "done", names
    assert "error" not in names, conversation.response.text
    assert conversation.done["mode"] == mode, conversation.done
    assert conversation.done["answer"].strip()


def assert_unavailable(reply: httpx.Response, dependency: str) -> None:
    """A clean 503 naming ``dependency``, in time: JSON, no stack trace, no detail leak."""
    assert reply.status_code == 503, reply.text
    error = reply.json()["error"]
    assert error["code"] == "unavailable", error
    assert error["dependency"] == dependency, error
    assert dependency in error["message"], error
    assert error["request_id"] == reply.headers["x-request-id"]
    assert "Traceback" not in reply.text and 'File "' not in reply.text
    # a hang is what this guards against: the client's own timeout (60 s) fails it


# --- the cases ----------------------------------------------------------------------------


def test_all_up_no_stage_falls_back(matrix: Matrix) -> None:
    """The baseline the faults are judged against: every dependency serving, the
    cross-encoder rescoring, the LLM analysing and answering."""
    status, body = health(matrix.http)
    assert status == 200 and body["status"] == "ok", body
    deps = body["dependencies"]
    for name in ("orchestrator", "retriever", "embedder", "reranker", "llm", "redis"):
        assert deps[name]["status"] == "serving", (name, deps[name])
    assert body["limits"]["backend"] == "redis" and body["limits"]["state"] == "ok"

    reply = search(matrix.http)
    assert reply.status_code == 200, reply.text
    stages = stages_of(reply)
    assert not any(s["fallback"] for s in stages.values()), stages
    assert int(stages["rerank"]["details"]["candidates_used"]) >= 2
    assert reply.json()["results"][0]["source_id"] in DOCS

    served = matrix.llm.served
    conversation = chat(matrix.http)
    assert_answered_chat(conversation, "generated")
    assert not any(s["fallback"] for s in conversation.stages.values()), conversation.stages
    assert "[1]" in conversation.done["answer"]
    assert matrix.llm.served >= served + 2, "the analysis and the answer asked the LLM"


def test_reranker_killed_fused_order_then_rescored_after_restart(matrix: Matrix) -> None:
    fused = search(matrix.http, rerank=False)
    assert fused.status_code == 200 and len(fused.json()["results"]) >= 3, fused.text
    fused_order = ranking(fused)
    others = {k: v for k, v in matrix.pids().items() if k != "reranker"}

    matrix.cluster.kill("reranker")

    reply = search(matrix.http)
    assert reply.status_code == 200, reply.text
    assert ranking(reply) == fused_order, "without the reranker: the fused order, unchanged"
    rerank = stages_of(reply)["rerank"]
    assert rerank["fallback"] is True, rerank
    assert rerank["dependency"] == "reranker" and "reranker" in rerank["reason"], rerank

    conversation = chat(matrix.http)
    assert_answered_chat(conversation, "generated")
    sources = conversation.source_ids
    assert sources and sources == [cid for cid, _ in fused_order][: len(sources)]
    rerank = conversation.stages["rerank"]
    assert rerank["fallback"] is True and "reranker" in rerank["reason"], rerank

    status, body = health(matrix.http)
    assert status == 200 and body["status"] == "degraded", body
    assert body["dependencies"]["reranker"]["status"] == "not_serving"

    matrix.restart("reranker")

    reply = eventually(
        lambda: search(matrix.http),
        lambda r: r.status_code == 200 and not stages_of(r)["rerank"]["fallback"],
        timeout_s=RECOVERY_S,
    )
    assert reply.status_code == 200, reply.text
    rerank = stages_of(reply)["rerank"]
    assert rerank["fallback"] is False, rerank
    assert ranking(reply) != fused_order, "the cross-encoder's scores, not the fused ones"
    conversation = chat(matrix.http)
    assert_answered_chat(conversation, "generated")
    assert conversation.stages["rerank"]["fallback"] is False
    status, body = health(matrix.http)
    assert body["dependencies"]["reranker"]["status"] == "serving", body
    assert {k: v for k, v in matrix.pids().items() if k != "reranker"} == others


def assert_bm25_fallback(stages: dict[str, dict[str, Any]]) -> None:
    """Retrieval ran BM25 alone and says why: the embedder could not embed the query."""
    retrieval = stages["retrieval"]
    assert retrieval["fallback"] is True, retrieval
    assert retrieval["dependency"] == "embedder", retrieval
    assert "BM25 only" in retrieval["reason"] and "embedder" in retrieval["reason"], retrieval
    details = retrieval["details"]
    assert int(details["bm25_hits"]) >= 1, details
    assert details["candidates_out"] == details["bm25_hits"], details  # one path fused
    assert "dense_ms" not in details and details["dense_input"] == "none", details


def test_embedder_killed_bm25_answers_then_hybrid_again(matrix: Matrix) -> None:
    before = search(matrix.http)
    assert before.status_code == 200, before.text
    assert not stages_of(before)["retrieval"]["fallback"]
    others = {k: v for k, v in matrix.pids().items() if k != "embedder"}

    matrix.cluster.kill("embedder")

    reply = search(matrix.http)
    assert reply.status_code == 200, reply.text
    assert_bm25_fallback(stages_of(reply))
    # BM25's matches only: no document without a word of the question
    found = {r["source_id"] for r in reply.json()["results"]}
    assert "kitchen.md" in found and not found & {"garden.md", "finance.md"}, found
    conversation = chat(matrix.http)
    assert_answered_chat(conversation, "generated")
    assert_bm25_fallback(conversation.stages)
    assert conversation.source_ids, "the answer had BM25's excerpts"
    citations = conversation.stages["citations"]  # the similarity check cannot run
    assert citations["fallback"] is True and citations["dependency"] == "embedder", citations
    assert "unchecked" in citations["reason"], citations

    status, body = health(matrix.http)
    assert status == 200 and body["status"] == "degraded", body
    assert body["dependencies"]["embedder"]["status"] == "not_serving"

    matrix.restart("embedder")

    reply = eventually(
        lambda: search(matrix.http),
        lambda r: r.status_code == 200 and not stages_of(r)["retrieval"]["fallback"],
        timeout_s=RECOVERY_S,
    )
    assert reply.status_code == 200, reply.text
    assert [r["chunk_id"] for r in reply.json()["results"]] == [
        r["chunk_id"] for r in before.json()["results"]
    ], "the hybrid ranking again"
    conversation = chat(matrix.http)
    assert_answered_chat(conversation, "generated")
    assert not conversation.stages["retrieval"]["fallback"]
    assert {k: v for k, v in matrix.pids().items() if k != "embedder"} == others


def test_embedder_frozen_bm25_within_its_deadline_then_hybrid_again(matrix: Matrix) -> None:
    """A hung embedder (SIGSTOP: the connection stays open, nothing answers) costs one
    query deadline, not the request's: the chat that meets it first falls back after
    EMBEDDER_QUERY_TIMEOUT_S and its citation check does not wait again; the search
    after it does not wait at all (the recorded outage)."""
    embedder = matrix.cluster.children["embedder"].process
    assert embedder is not None
    os.kill(embedder.pid, signal.SIGSTOP)
    try:
        conversation = chat(matrix.http)  # the client's timeout (60 s) fails a hang
        reply = search(matrix.http)
    finally:
        os.kill(embedder.pid, signal.SIGCONT)
    assert_answered_chat(conversation, "generated")
    assert_bm25_fallback(conversation.stages)
    citations = conversation.stages["citations"]
    assert citations["fallback"] is True and citations["dependency"] == "embedder", citations
    assert reply.status_code == 200, reply.text
    assert_bm25_fallback(stages_of(reply))
    # the search after it did not wait at all: the outage was recorded (no clock read here)
    retrieval = stages_of(reply)["retrieval"]
    assert "failed recently" in retrieval["reason"], retrieval
    # nothing waited for the deadline (a loaded machine reads 0.1 ms for the check itself)
    assert float(retrieval["details"]["embed_ms"]) < EMBEDDER_QUERY_TIMEOUT_S * 1e3 / 2, retrieval

    reply = eventually(
        lambda: search(matrix.http),
        lambda r: r.status_code == 200 and not stages_of(r)["retrieval"]["fallback"],
        timeout_s=RECOVERY_S,
    )
    assert not stages_of(reply)["retrieval"]["fallback"], reply.text


def test_llm_stopped_extractive_answers_then_generated_again(matrix: Matrix) -> None:
    others = matrix.pids()

    matrix.llm.stop()

    conversation = chat(matrix.http)
    assert_answered_chat(conversation, "extractive")
    assert re.search(r"\[\d+\]", conversation.done["answer"]), "extractive answers are cited"
    for name in ("analysis", "answer"):
        stage = conversation.stages[name]
        assert stage["fallback"] is True, stage
        assert stage["dependency"].startswith("llm"), stage
        assert "LLM" in stage["reason"], stage
    reply = search(matrix.http)
    assert reply.status_code == 200, reply.text
    assert stages_of(reply)["analysis"]["fallback"] is True
    assert stages_of(reply)["rerank"]["fallback"] is False

    status, body = health(matrix.http)
    assert status == 200 and body["status"] == "degraded", body
    assert body["dependencies"]["llm"]["status"] == "not_serving"

    matrix.llm.start()

    conversation = chat(matrix.http)
    assert_answered_chat(conversation, "generated")
    assert conversation.stages["analysis"]["fallback"] is False, conversation.stages
    assert conversation.stages["answer"]["fallback"] is False, conversation.stages
    assert matrix.llm.served >= 2
    status, body = health(matrix.http)
    assert body["dependencies"]["llm"]["status"] == "serving", body
    assert matrix.pids() == others


def test_redis_stopped_serves_fail_open_then_health_ok(matrix: Matrix) -> None:
    others = {k: v for k, v in matrix.pids().items() if k != "redis"}

    matrix.redis.stop()

    # the default policy is open: limits run in process, every request is served,
    # and each response's stage report says so
    reply = search(matrix.http)
    assert reply.status_code == 200, reply.text
    conversation = chat(matrix.http)
    assert_answered_chat(conversation, "generated")
    for stages in (stages_of(reply), conversation.stages):
        limits = stages["limits"]
        assert limits["fallback"] is True and limits["dependency"] == "redis", limits
        assert "per replica" in limits["reason"], limits
    status, body = health(matrix.http)
    assert status == 200 and body["status"] == "degraded", body
    assert body["dependencies"]["redis"]["status"] == "not_serving"
    assert body["limits"]["state"] == "fail_open" and body["limits"]["policy"] == "open"
    assert "REDIS" in body["limits"]["message"]

    matrix.redis.start()

    status, body = eventually(
        lambda: health(matrix.http), lambda h: h[1]["status"] == "ok", timeout_s=RECOVERY_S
    )
    assert status == 200 and body["status"] == "ok", body
    assert body["dependencies"]["redis"]["status"] == "serving"
    assert body["limits"]["state"] == "ok"
    assert search(matrix.http).status_code == 200
    assert {k: v for k, v in matrix.pids().items() if k != "redis"} == others


def test_retriever_and_its_store_killed_503_then_same_results(matrix: Matrix) -> None:
    """With the embedded engine the store lives in the retriever's process: killing it
    (SIGKILL, no flush on the way out) is losing the store; the data must survive."""
    # both searches hybrid: an embedder outage recorded by an earlier case (its "failed
    # recently" window) gives BM25-only scores, which would differ for another reason
    before = eventually(
        lambda: search(matrix.http, rerank=False),
        lambda r: r.status_code == 200 and not stages_of(r)["retrieval"]["fallback"],
        timeout_s=RECOVERY_S,
    )
    assert before.status_code == 200, before.text
    described = matrix.http.get(f"/v1/admin/collections/{COLLECTION}", headers=ADMIN).json()
    others = {k: v for k, v in matrix.pids().items() if k != "retriever"}

    matrix.cluster.kill("retriever")

    reply = search(matrix.http)
    assert_unavailable(reply, "retriever")
    conversation = chat(matrix.http).response
    assert_unavailable(conversation, "retriever")
    status, body = health(matrix.http)
    assert status == 503 and body["status"] == "down", body
    assert body["dependencies"]["retriever"]["status"] == "not_serving"

    matrix.restart("retriever")

    reply = eventually(
        lambda: search(matrix.http, rerank=False),
        lambda r: r.status_code == 200 and not stages_of(r)["retrieval"]["fallback"],
        timeout_s=RECOVERY_S,
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["results"] == before.json()["results"], "the data survived the kill"
    # the gateway's own channel to the retriever (admin routes, collection catalog)
    # reconnects on its own backoff, independently of the orchestrator's
    again = eventually(
        lambda: matrix.http.get(f"/v1/admin/collections/{COLLECTION}", headers=ADMIN),
        lambda r: r.status_code == 200,
        timeout_s=RECOVERY_S,
    )
    assert again.status_code == 200, again.text
    assert (again.json()["chunks"], again.json()["sources"]) == (
        described["chunks"],
        described["sources"],
    )
    assert_answered_chat(chat(matrix.http), "generated")
    assert {k: v for k, v in matrix.pids().items() if k != "retriever"} == others


def test_qdrant_server_unreachable_retriever_refuses_to_serve_then_recovers(
    matrix: Matrix,
) -> None:
    """A retriever configured for a Qdrant server (qdrant-client) that cannot be
    reached never reports SERVING: it exits naming the server, and the gateway answers
    503 naming the retriever. Back on a reachable store, everything answers again."""
    others = {k: v for k, v in matrix.pids().items() if k != "retriever"}
    matrix.cluster.kill("retriever")
    unreachable = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    broken = LocalCluster(
        matrix.run_dir / "qdrant-unreachable",
        matrix.cluster.model_dir,
        matrix.cluster.data_path,
        ports=dict(matrix.cluster.ports),
        extra_env={
            **matrix.cluster.extra_env,
            "GROUNDWIRE_RETRIEVER_QDRANT_URL": unreachable,
            "GROUNDWIRE_RETRIEVER_QDRANT_TIMEOUT_S": "2",
        },
    )
    broken.start(("retriever",))
    try:
        with pytest.raises(ClusterError) as refused:
            broken.wait_ready(timeout_s=60, names=("retriever",))
    finally:
        broken.stop(("retriever",))
    message = str(refused.value)
    assert "retriever exited" in message, message
    assert f"the Qdrant server at {unreachable} cannot be reached" in message, message
    assert not (matrix.run_dir / "qdrant-unreachable" / "retriever.ready").exists()

    reply = search(matrix.http)
    assert_unavailable(reply, "retriever")

    matrix.restart("retriever")

    reply = eventually(
        lambda: search(matrix.http), lambda r: r.status_code == 200, timeout_s=RECOVERY_S
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["results"], reply.text
    assert {k: v for k, v in matrix.pids().items() if k != "retriever"} == others
