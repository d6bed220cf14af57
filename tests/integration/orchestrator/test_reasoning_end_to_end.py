"""Acceptance (issue 33, 2 and 3) through the real gateway app over the real chain
(MiniLM embedder, retriever, orchestrator over gRPC) with the fake LLM as a reasoning
model: ``<think>`` blocks split across deltas, an unterminated block, and thinking sent
apart (OpenAI-compatible ``reasoning_content``, Anthropic ``thinking``), from both
providers. No reasoning text reaches any SSE event of /v1/chat, the final answer, the
OpenAI-compatible response (whole or streamed), MCP ``ask`` or the stored
conversation; citations are checked on the answer alone. A model that rejects tools is
asked once more without them, and the stage report says so."""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx2
import pytest
import pytest_asyncio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.fakes.llm_server import FakeLLMServer, RecordedRequest, Reply
from tests.integration.gateway.chain import serve_chain
from tests.unit.gateway.conftest import sse_events

pytestmark = pytest.mark.asyncio(loop_scope="module")

Kind = Literal["anthropic", "openai"]
DOCS = {
    "limits.md": "# Rate limits\n\nRate limits are enforced per API key. Each key may send "
    "sixty requests per minute; beyond that the gateway answers 429.",
    "roses.md": "# Pruning roses\n\nCut each cane just above an outward-facing bud in late "
    "winter, removing dead and crossing stems first.",
}
QUESTION = "how many requests per minute may one API key send"
SECRET = "MUSING-7F3A"
"""Only ever in the model's thinking: it must appear in no output."""


def _excerpt(request: RecordedRequest, phrase: str) -> int:
    blob = json.dumps(request.body["messages"])
    for match in re.finditer(r'<excerpt n=\\"(\d+)\\"[^>]*>(.*?)</excerpt>', blob, re.DOTALL):
        if phrase in match.group(2):
            return int(match.group(1))
    raise AssertionError(f"no excerpt contains {phrase!r}")


def thinking_reply(request: RecordedRequest) -> Reply:
    """Thinks in a split <think> block (citing the wrong excerpt, with a claim no
    source makes), thinks apart, answers citing the right one, and leaves a last
    block unterminated."""
    good = _excerpt(request, "sixty requests per minute")
    bad = _excerpt(request, "Cut each cane")
    return Reply(
        text=[
            "<thi",
            "nk>The roses excerpt says keys get ",
            f"{SECRET} requests [{bad}]. Hmm.</th",
            "ink>\n\n",
            f"Each API key may send sixty requests per minute [{good}].",
            f" <think>{SECRET} trailing",
        ],
        reasoning=f"Apart: {SECRET} [{bad}].",
    )


def system_of(body: dict[str, Any]) -> str:
    if "system" in body:
        system = body["system"]
        return system if isinstance(system, str) else " ".join(b["text"] for b in system)
    return " ".join(m["content"] for m in body["messages"] if m["role"] == "system")


@dataclass
class Model:
    """Analysis calls get no JSON (the raw query passes through); answer calls take
    the next queued reply (a 529 sends the chain on to the OpenAI-compatible API),
    else a thinking reply."""

    answers: deque[Reply | Callable[[RecordedRequest], Reply]] = field(default_factory=deque)

    def __call__(self, request: RecordedRequest) -> Reply:
        if not system_of(request.body).startswith("You answer questions"):
            return Reply(text="no json here")
        item = self.answers.popleft() if self.answers else thinking_reply
        return item if isinstance(item, Reply) else item(request)


@dataclass
class Gateway:
    http: httpx2.AsyncClient
    llm: FakeLLMServer
    model: Model

    def route(self, kind: Kind) -> None:
        if kind == "openai":
            self.model.answers.append(Reply(status=529, error_message="Overloaded"))


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def gateway(
    minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Gateway]:
    async with AsyncExitStack() as stack:
        model = Model()
        llm = await stack.enter_async_context(FakeLLMServer(default=model))
        app = await serve_chain(
            stack,
            minilm_dir=minilm_dir,
            data_path=tmp_path_factory.mktemp("qdrant"),
            docs=DOCS,
            llm_url=llm.url,
            orchestrator={
                "analysis_timeout_s": 1.0,
                "openai_base_url": llm.openai_url,
                "openai_strong_model": "oa-strong",
                "llm_order": "anthropic,openai",
            },
        )
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                transport=httpx2.ASGITransport(app=app), base_url="http://gw", timeout=60
            )
        )
        yield Gateway(http, llm, model)


@pytest.fixture(autouse=True)
def _fresh(gateway: Gateway) -> None:
    gateway.model.answers.clear()
    gateway.llm.requests.clear()
    gateway.llm.reject_tools = False


def _answered_by(gateway: Gateway, kind: Kind) -> None:
    """The answer came from ``kind``'s API, with its thinking in it."""
    answers = [r for r in gateway.llm.requests if system_of(r.body).startswith("You answer")]
    assert answers[-1].api == kind


CHAT = {"messages": [{"role": "user", "content": QUESTION}]}
KINDS = ["anthropic", "openai"]


ANSWER = "Each API key may send sixty requests per minute [1]."


def _event(events: list[tuple[str, str]], name: str) -> Any:
    [data] = [d for n, d in events if n == name]
    return json.loads(data)


def _answer_stage(stages: Any) -> dict[str, Any]:
    [answer] = [s for s in stages["stages"] if s["name"] == "answer"]
    details: dict[str, Any] = answer["details"]
    return details


@pytest.mark.parametrize("kind", KINDS)
async def test_chat_sse_and_the_stored_conversation_carry_no_reasoning(
    gateway: Gateway, kind: Kind
) -> None:
    gateway.route(kind)
    response = await gateway.http.post("/v1/chat", json=CHAT)
    assert response.status_code == 200, response.text
    _answered_by(gateway, kind)
    assert SECRET not in response.text, "no SSE event carries the thinking"
    events = sse_events(response.text)
    assert [n for n, _ in events][-1] == "done"
    done = json.loads(events[-1][1])
    assert done["mode"] == "generated" and done["answer"] == ANSWER
    streamed = "".join(json.loads(d)["text"] for n, d in events if n == "delta")
    assert streamed.strip() == ANSWER, "the space before the unterminated block streams"
    # the citation check saw the answer alone: the thinking's [n] to the roses is not
    # among the citations, and the answer's one is supported
    cited = _event(events, "citations")
    assert [c["number"] for c in cited["citations"]] == [1]
    assert [s["source_id"] for s in cited["sources"]] == ["limits.md"]
    assert done["unsupported_citations"] == 0
    assert int(_answer_stage(_event(events, "stages"))["reasoning_chars"]) > len(SECRET)

    stored = await gateway.http.get(f"/v1/conversations/{done['conversation_id']}")
    assert stored.status_code == 200, stored.text
    assert SECRET not in stored.text and "<think" not in stored.text
    assert [a["answer"] for a in stored.json()["answers"]] == [ANSWER]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stream", [False, True])
async def test_the_openai_compatible_response_carries_no_reasoning(
    gateway: Gateway, kind: Kind, stream: bool
) -> None:
    gateway.route(kind)
    body = {"model": "groundwire", "stream": stream, **CHAT}
    response = await gateway.http.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    _answered_by(gateway, kind)
    assert SECRET not in response.text and "think>" not in response.text
    if stream:
        chunks = [json.loads(d) for _, d in sse_events(response.text) if d != "[DONE]"]
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    else:
        text = response.json()["choices"][0]["message"]["content"]
    assert text.strip() == ANSWER


@pytest.mark.parametrize("kind", KINDS)
async def test_mcp_ask_carries_no_reasoning(gateway: Gateway, kind: Kind) -> None:
    gateway.route(kind)
    async with Client(streamable_http_client("http://gw/mcp", http_client=gateway.http)) as c:
        asked = await c.call_tool("ask", {"question": QUESTION})
    _answered_by(gateway, kind)
    assert not asked.is_error and asked.structured_content is not None
    assert SECRET not in json.dumps(asked.structured_content)
    assert SECRET not in json.dumps([block.model_dump() for block in asked.content])
    assert asked.structured_content["answer"] == ANSWER
    assert [c["number"] for c in asked.structured_content["citations"]] == [1]


async def test_a_model_without_tools_answers_from_the_seeded_passages(
    gateway: Gateway,
) -> None:
    gateway.llm.reject_tools = True
    response = await gateway.http.post("/v1/chat", json={**CHAT, "max_agent_steps": 2})
    assert response.status_code == 200, response.text
    answers = [r for r in gateway.llm.requests if system_of(r.body).startswith("You answer")]
    assert ["tools" in r.body for r in answers] == [True, False], "one retry, without tools"
    events = sse_events(response.text)
    done = json.loads(events[-1][1])
    assert done["mode"] == "generated" and done["answer"] == ANSWER
    details = _answer_stage(_event(events, "stages"))
    assert details["tools_retry"].startswith("retried without tools: anthropic does not")
    assert SECRET not in response.text
