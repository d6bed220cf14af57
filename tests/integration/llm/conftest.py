"""The real SDKs against the fake LLM APIs (tests/fakes/llm_server.py), on port 0."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal

import pytest
from pydantic import SecretStr

from groundwire_orchestrator.llm.anthropic import AnthropicConfig, AnthropicProvider
from groundwire_orchestrator.llm.base import LLMProvider, warm_up
from groundwire_orchestrator.llm.openai_compat import OpenAICompatConfig, OpenAICompatProvider
from tests.fakes.llm_server import FakeLLMServer

Kind = Literal["anthropic", "openai"]
KEY = "sk-fake-test"
FAST = {"anthropic": "claude-haiku-5-5", "openai": "small-model"}
STRONG = {"anthropic": "claude-sonnet-5-5", "openai": "big-model"}


def make_provider(kind: Kind, fake: FakeLLMServer, key: str | None = KEY) -> LLMProvider:
    secret = SecretStr(key) if key is not None else None
    if kind == "anthropic":
        return AnthropicProvider(
            AnthropicConfig(
                api_key=secret,
                base_url=fake.url,
                fast_model=FAST[kind],
                strong_model=STRONG[kind],
            )
        )
    return OpenAICompatProvider(
        OpenAICompatConfig(
            base_url=fake.openai_url,
            api_key=secret,
            fast_model=FAST[kind],
            strong_model=STRONG[kind],
        )
    )


@pytest.fixture
async def fake() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as server:
        yield server


@pytest.fixture(params=["anthropic", "openai"])
def kind(request: pytest.FixtureRequest) -> Kind:
    value: Kind = request.param
    return value


@pytest.fixture
async def llm(kind: Kind, fake: FakeLLMServer) -> AsyncIterator[LLMProvider]:
    """Each provider, through its real SDK, against the fake of its API; warmed up,
    as the service does at startup, so deadlines measure the call alone."""
    provider = make_provider(kind, fake)
    await warm_up(provider)
    yield provider
    await provider.aclose()
