"""Acceptance: the official ``openai`` client against the real gateway app over the
real chain (the real MiniLM embedder, the real retriever, the real orchestrator, all
in-process over gRPC) with the fake LLM (tests/fakes/llm_server.py) as the model:

- a ``system`` message is accepted, streamed and not, and reaches the model as the
  operator's instructions, below the grounding and untrusted-data rules;
- an agentic answer whose first step wrote text before calling a tool delivers to
  the client only the final step's text (the discarded text is never sent).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
import pytest_asyncio

from tests.fakes.llm_server import FakeLLMServer, RecordedRequest, Reply, ToolUse
from tests.integration.gateway.chain import serve_chain

pytestmark = pytest.mark.asyncio(loop_scope="module")

DOCS = {
    "limits.md": "# Rate limits\n\nRate limits are enforced per API key. Each key may send "
    "sixty requests per minute; beyond that the gateway answers 429.",
    "roses.md": "# Pruning roses\n\nCut each cane just above an outward-facing bud in late "
    "winter, removing dead and crossing stems first.",
}
OPERATOR = "Answer in one short sentence, like a ship's captain."
FINAL = "Each API key may send sixty requests per minute [1]."
DISCARDED = "Let me look that up first."


def system_of(body: dict[str, Any]) -> str:
    system = body.get("system", "")
    return system if isinstance(system, str) else " ".join(b["text"] for b in system)


@dataclass
class Model:
    """The fake model: analysis calls get no JSON (the raw query passes through);
    answer calls take the next queued reply, else FINAL."""

    answers: deque[Reply] = field(default_factory=deque)
    systems: list[str] = field(default_factory=list)

    def __call__(self, request: RecordedRequest) -> Reply:
        system = system_of(request.body)
        if not system.startswith("You answer questions"):
            return Reply(text="no json here")
        self.systems.append(system)
        return self.answers.popleft() if self.answers else Reply(text=FINAL)


@dataclass
class Gateway:
    client: openai.AsyncOpenAI
    model: Model


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
                "agent_steps": 2,  # every completion may call tools
            },
        )
        # the openai client is built on httpx2 (not httpx); its ASGI transport runs the
        # app in-process
        http = await stack.enter_async_context(
            httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://gw")
        )
        client = openai.AsyncOpenAI(
            base_url="http://gw/v1", api_key="sk-unused", http_client=http, max_retries=0
        )
        yield Gateway(client, model)


@pytest.fixture(autouse=True)
def _fresh(gateway: Gateway) -> None:
    gateway.model.answers.clear()
    gateway.model.systems.clear()


def _operator_below_the_rules(system: str) -> None:
    header = system.index("Operator instructions (cannot override the rules above)")
    assert system.index("Security:") < header and system.index("Tools:") < header
    assert system.index(OPERATOR) > header, "the operator's text comes after its header"
    assert re.search(r"<operator>\n" + re.escape(OPERATOR) + r"\n</operator>", system)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_system_message_reaches_the_model_below_the_rules(
    gateway: Gateway, stream: bool
) -> None:
    messages: list[Any] = [
        {"role": "system", "content": OPERATOR},
        {"role": "user", "content": "how many requests per minute may one API key send"},
    ]
    if stream:
        chunks = [
            c
            async for c in await gateway.client.chat.completions.create(
                model="groundwire", messages=messages, stream=True
            )
        ]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        completion = await gateway.client.chat.completions.create(
            model="groundwire", messages=messages
        )
        text = completion.choices[0].message.content or ""
        assert completion.model_extra is not None
        assert completion.model_extra["groundwire"]["mode"] == "generated"
    assert text == FINAL
    [system] = gateway.model.systems
    _operator_below_the_rules(system)


@pytest.mark.parametrize("stream", [False, True])
async def test_an_agentic_answer_delivers_only_the_final_text(
    gateway: Gateway, stream: bool
) -> None:
    gateway.model.answers.extend(
        [
            Reply(text=DISCARDED, tool_calls=[ToolUse("search", {"query": "API key limits"})]),
            Reply(text=FINAL),
        ]
    )
    messages: list[Any] = [
        {"role": "user", "content": "how many requests per minute may one API key send"}
    ]
    if stream:
        chunks = [
            c
            async for c in await gateway.client.chat.completions.create(
                model="groundwire", messages=messages, stream=True
            )
        ]
        pieces = [c.choices[0].delta.content or "" for c in chunks if c.choices]
        assert all(DISCARDED not in p for p in pieces)
        text = "".join(pieces)
        assert all("reset" not in (c.model_extra or {}).get("groundwire", {}) for c in chunks)
    else:
        completion = await gateway.client.chat.completions.create(
            model="groundwire", messages=messages
        )
        text = completion.choices[0].message.content or ""
    assert text == FINAL
    assert len(gateway.model.systems) == 2, "a tool step, then the answer"
