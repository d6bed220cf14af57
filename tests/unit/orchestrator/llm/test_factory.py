"""build_providers / build_llm: which providers the settings configure, in which order."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from groundwire_orchestrator.llm.anthropic import AnthropicProvider
from groundwire_orchestrator.llm.factory import build_llm, build_providers, provider_order
from groundwire_orchestrator.llm.observed import ObservedLLM
from groundwire_orchestrator.llm.openai_compat import OpenAICompatProvider
from groundwire_orchestrator.settings import OrchestratorSettings


def test_nothing_configured_means_no_llm() -> None:
    assert build_llm(OrchestratorSettings()) is None
    # env vars set to "" are unset
    empty = OrchestratorSettings(
        anthropic_api_key=SecretStr(""), anthropic_base_url="", openai_base_url=""
    )
    assert build_providers(empty) == [] and build_llm(empty) is None


def test_an_anthropic_key_alone_makes_a_one_provider_chain() -> None:
    settings = OrchestratorSettings(anthropic_api_key=SecretStr("sk-test"), llm_timeout_s=7)
    (provider,) = build_providers(settings)
    assert isinstance(provider, AnthropicProvider)
    llm = build_llm(settings)
    assert isinstance(llm, ObservedLLM)
    assert (llm.name, llm.names) == ("anthropic", ("anthropic",))


def test_order_decides_the_failover_order_and_skips_the_unconfigured() -> None:
    both = OrchestratorSettings(
        anthropic_api_key=SecretStr("sk"),
        openai_base_url="http://127.0.0.1:8000/v1",
        openai_strong_model="qwen",
        llm_order="openai, anthropic",
    )
    assert [type(p) for p in build_providers(both)] == [OpenAICompatProvider, AnthropicProvider]
    llm = build_llm(both)
    assert llm is not None and llm.names == ("openai", "anthropic")
    only_openai = OrchestratorSettings(
        openai_base_url="http://127.0.0.1:8000/v1", openai_fast_model="qwen"
    )
    assert [p.name for p in build_providers(only_openai)] == ["openai"]
    left_out = OrchestratorSettings(anthropic_api_key=SecretStr("sk"), llm_order="openai")
    assert build_llm(left_out) is None


def test_an_openai_endpoint_needs_a_model_name() -> None:
    # the settings refuse it first; the factory's own guard holds without them
    unchecked = OrchestratorSettings.model_construct(openai_base_url="http://127.0.0.1:8000/v1")
    with pytest.raises(ValueError, match="openai_strong_model"):
        build_providers(unchecked)


@pytest.mark.parametrize("order", ["anthropic,gemini", ("anthropic", "anthropic")])
def test_a_bad_order_is_refused(order: str | tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        provider_order(order)


def test_order_parsing() -> None:
    assert provider_order(" Anthropic ,openai,") == ("anthropic", "openai")
    assert provider_order(("openai",)) == ("openai",)
