"""build_llm: which providers the settings configure, in which order."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from groundwire_orchestrator.llm.anthropic import AnthropicProvider
from groundwire_orchestrator.llm.factory import LLMConfig, build_llm, provider_order
from groundwire_orchestrator.llm.failover import FailoverLLM
from groundwire_orchestrator.llm.openai_compat import OpenAICompatProvider


def test_nothing_configured_means_no_llm() -> None:
    assert build_llm(LLMConfig()) is None
    # env vars set to "" are unset
    empty = LLMConfig(anthropic_api_key=SecretStr(""), anthropic_base_url="", openai_base_url="  ")
    assert build_llm(empty) is None


def test_an_anthropic_key_alone_makes_a_one_provider_chain() -> None:
    llm = build_llm(LLMConfig(anthropic_api_key=SecretStr("sk-test"), timeout_s=7))
    assert isinstance(llm, FailoverLLM)
    assert llm.name == "anthropic"
    (provider,) = llm.providers
    assert isinstance(provider, AnthropicProvider)


def test_order_decides_the_failover_order_and_skips_the_unconfigured() -> None:
    both = LLMConfig(
        anthropic_api_key=SecretStr("sk"),
        openai_base_url="http://127.0.0.1:8000/v1",
        openai_strong_model="qwen",
        order="openai, anthropic",
    )
    llm = build_llm(both)
    assert llm is not None
    assert [type(p) for p in llm.providers] == [OpenAICompatProvider, AnthropicProvider]
    only_openai = LLMConfig(openai_base_url="http://127.0.0.1:8000/v1", openai_strong_model="qwen")
    llm = build_llm(only_openai)
    assert llm is not None
    assert [p.name for p in llm.providers] == ["openai"]
    left_out = LLMConfig(anthropic_api_key=SecretStr("sk"), order=("openai",))
    assert build_llm(left_out) is None


def test_an_openai_endpoint_needs_a_model_name() -> None:
    with pytest.raises(ValueError, match="openai_strong_model"):
        build_llm(LLMConfig(openai_base_url="http://127.0.0.1:8000/v1"))


@pytest.mark.parametrize("order", ["anthropic,gemini", ("anthropic", "anthropic")])
def test_a_bad_order_is_refused(order: str | tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        provider_order(order)


def test_order_parsing() -> None:
    assert provider_order(" Anthropic ,openai,") == ("anthropic", "openai")
    assert provider_order(("openai",)) == ("openai",)
