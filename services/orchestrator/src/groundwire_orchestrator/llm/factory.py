"""Builds the configured LLM: the providers that have settings, chained for failover.

The orchestrator's settings map onto :class:`LLMConfig` in ``__main__``; nothing
here reads the environment. No key and no base URL for any provider means no LLM:
:func:`build_llm` returns None and the chain runs without one.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import SecretStr

from groundwire_orchestrator.llm.base import LLMProvider
from groundwire_orchestrator.llm.failover import FailoverLLM

PROVIDERS = ("anthropic", "openai")
ANTHROPIC_FAST_MODEL = "claude-haiku-5-5"
ANTHROPIC_STRONG_MODEL = "claude-sonnet-5-5"
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"


@dataclass(frozen=True)
class LLMConfig:
    """Every LLM knob, one field per ``GROUNDWIRE_ORCHESTRATOR_*`` setting.

    Empty strings count as unset (an env var set to ""). A provider is configured
    when it has a key or a base URL.
    """

    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    """None: the public API."""
    anthropic_fast_model: str = ANTHROPIC_FAST_MODEL
    anthropic_strong_model: str = ANTHROPIC_STRONG_MODEL
    openai_base_url: str | None = None
    """Including the version path, e.g. ``http://127.0.0.1:8000/v1``; None with a key:
    OpenAI's own API."""
    openai_api_key: SecretStr | None = None
    openai_fast_model: str | None = None
    """None: the strong model serves both roles."""
    openai_strong_model: str | None = None
    """Required when the OpenAI-compatible provider is configured."""
    order: str | tuple[str, ...] = PROVIDERS
    """Failover order: names from :data:`PROVIDERS`, or one comma-separated string."""
    timeout_s: float | None = 20.0
    """How long one provider may take to start answering (its first streamed event,
    or its whole reply for ``complete``) before the next one is tried. Each call's
    total budget is the ``timeout_s`` its caller passes. None: no per-provider cap."""


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


def build_providers(config: LLMConfig) -> list[LLMProvider]:
    """The configured providers in failover order (constructing opens nothing).

    Errors: ValueError for an unknown name in ``order`` or an OpenAI-compatible
    endpoint without a strong model name.
    """
    # The SDKs are imported only when a provider is configured: a service without an
    # LLM starts without paying for them.
    from groundwire_orchestrator.llm.anthropic import AnthropicConfig, AnthropicProvider
    from groundwire_orchestrator.llm.openai_compat import OpenAICompatConfig, OpenAICompatProvider

    providers: list[LLMProvider] = []
    for name in provider_order(config.order):
        if name == "anthropic" and (
            _given(config.anthropic_api_key) or _given(config.anthropic_base_url)
        ):
            providers.append(
                AnthropicProvider(
                    AnthropicConfig(
                        api_key=_secret(config.anthropic_api_key),
                        base_url=_text(config.anthropic_base_url),
                        fast_model=config.anthropic_fast_model,
                        strong_model=config.anthropic_strong_model,
                    )
                )
            )
        elif name == "openai" and (_given(config.openai_api_key) or _given(config.openai_base_url)):
            strong = _text(config.openai_strong_model)
            if strong is None:
                raise ValueError(
                    "an OpenAI-compatible endpoint is configured without a model name: "
                    "set openai_strong_model (GROUNDWIRE_ORCHESTRATOR_OPENAI_STRONG_MODEL)"
                )
            providers.append(
                OpenAICompatProvider(
                    OpenAICompatConfig(
                        base_url=_text(config.openai_base_url) or OPENAI_DEFAULT_BASE_URL,
                        api_key=_secret(config.openai_api_key),
                        strong_model=strong,
                        fast_model=_text(config.openai_fast_model),
                    )
                )
            )
    return providers


def build_llm(config: LLMConfig) -> FailoverLLM | None:
    """The LLM the chain uses: the configured providers as a failover chain (even
    one alone, so a provider that does not start answering within
    ``config.timeout_s`` fails the same way everywhere); None when none is configured.

    Errors: ValueError as :func:`build_providers`.
    """
    providers = build_providers(config)
    if not providers:
        return None
    return FailoverLLM(providers, attempt_timeout_s=config.timeout_s)
