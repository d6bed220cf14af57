"""Builds the configured LLM from the orchestrator's settings: the providers that have
settings, built once, chained for failover and observed.

The settings are the one configuration layer: each provider's own config is made
from them here, and nothing here reads the environment. Empty strings count as unset
(an env var set to ""); a provider is configured when it has a key or a base URL. No
provider configured means no LLM: :func:`build_llm` returns None and the chain
answers extractively.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import SecretStr

from groundwire_orchestrator.llm.base import LLMProvider
from groundwire_orchestrator.llm.failover import FailoverLLM
from groundwire_orchestrator.llm.observed import ObservedLLM

if TYPE_CHECKING:  # settings imports this module for its defaults
    from groundwire_orchestrator.settings import OrchestratorSettings

PROVIDERS = ("anthropic", "openai")
ANTHROPIC_FAST_MODEL = "claude-haiku-5-5"
ANTHROPIC_STRONG_MODEL = "claude-sonnet-5-5"
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"


def _given(value: str | SecretStr | None) -> bool:
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    return value is not None and value.strip() != ""


def _text(value: str | None) -> str | None:
    return value.strip() if value is not None and value.strip() else None


def _secret(value: SecretStr | None) -> SecretStr | None:
    return value if _given(value) else None


def provider_order(order: str | tuple[str, ...]) -> tuple[str, ...]:
    """Names of the failover order; ValueError on an unknown or repeated name."""
    names = order.split(",") if isinstance(order, str) else list(order)
    cleaned = tuple(n.strip().lower() for n in names if n.strip())
    unknown = [n for n in cleaned if n not in PROVIDERS]
    if unknown:
        raise ValueError(f"unknown LLM provider(s) {unknown}; known: {list(PROVIDERS)}")
    if len(set(cleaned)) != len(cleaned):
        raise ValueError(f"LLM order names a provider twice: {list(cleaned)}")
    return cleaned


def build_providers(settings: OrchestratorSettings) -> list[LLMProvider]:
    """The configured providers in failover order (constructing opens nothing). An
    OpenAI-compatible endpoint with only a fast model name uses it for both roles.

    Errors: ValueError for an unknown name in ``llm_order`` or an OpenAI-compatible
    endpoint without a model name.
    """
    # The SDKs are imported only when a provider is configured: a service without an
    # LLM starts without paying for them.
    from groundwire_orchestrator.llm.anthropic import AnthropicConfig, AnthropicProvider
    from groundwire_orchestrator.llm.openai_compat import OpenAICompatConfig, OpenAICompatProvider

    s = settings
    providers: list[LLMProvider] = []
    for name in provider_order(s.llm_order):
        if name == "anthropic" and (_given(s.anthropic_api_key) or _given(s.anthropic_base_url)):
            providers.append(
                AnthropicProvider(
                    AnthropicConfig(
                        api_key=_secret(s.anthropic_api_key),
                        base_url=_text(s.anthropic_base_url),
                        fast_model=s.anthropic_fast_model,
                        strong_model=s.anthropic_strong_model,
                    )
                )
            )
        elif name == "openai" and (_given(s.openai_api_key) or _given(s.openai_base_url)):
            strong = _text(s.openai_strong_model) or _text(s.openai_fast_model)
            if strong is None:
                raise ValueError(
                    "an OpenAI-compatible endpoint is configured without a model name: "
                    "set openai_strong_model (GROUNDWIRE_ORCHESTRATOR_OPENAI_STRONG_MODEL)"
                )
            providers.append(
                OpenAICompatProvider(
                    OpenAICompatConfig(
                        base_url=_text(s.openai_base_url) or OPENAI_DEFAULT_BASE_URL,
                        api_key=_secret(s.openai_api_key),
                        strong_model=strong,
                        fast_model=_text(s.openai_fast_model),
                    )
                )
            )
    return providers


def build_llm(settings: OrchestratorSettings) -> ObservedLLM | None:
    """The LLM the chain uses: the configured providers as a failover chain (even one
    alone, so a provider that does not start answering within ``llm_timeout_s`` fails
    the same way everywhere), observed; None when none is configured. Opens nothing.

    Errors: ValueError as :func:`build_providers`.
    """
    providers = build_providers(settings)
    if not providers:
        return None
    chain = FailoverLLM(providers, attempt_timeout_s=settings.llm_timeout_s)
    return ObservedLLM(chain, tuple(p.name for p in providers))
