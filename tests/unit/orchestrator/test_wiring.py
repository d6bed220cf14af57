"""Settings, the settings -> providers mapping, and the proto conversions."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from groundwire.orchestrator.v1 import orchestrator_pb2
from groundwire_core.errors import InvalidInput
from groundwire_orchestrator import convert
from groundwire_orchestrator.domain import (
    AnswerDone,
    AnswerReset,
    Citation,
    CitationsDone,
    NumberedSource,
    Verification,
)
from groundwire_orchestrator.llm.factory import build_llm
from groundwire_orchestrator.llm.observed import ObservedLLM
from groundwire_orchestrator.settings import OrchestratorSettings
from tests.unit.orchestrator.doubles import Scripted, ScriptedLLM, chunk


def test_settings_read_the_prefixed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("GROUNDWIRE_ORCHESTRATOR_AGENT_STEPS", "2")
    monkeypatch.setenv("GROUNDWIRE_ORCHESTRATOR_CITATION_SUPPORT_THRESHOLD", "0.6")
    s = OrchestratorSettings()
    assert isinstance(s.anthropic_api_key, SecretStr)
    assert "sk-test" not in repr(s) and "sk-test" not in s.model_dump_json()
    assert (s.agent_steps, s.citation_support_threshold) == (2, 0.6)


def test_defaults_mean_no_llm() -> None:
    s = OrchestratorSettings()
    assert build_llm(s) is None
    assert (s.rerank_threshold, s.rerank_keep, s.candidates, s.agent_steps) == (0.5, 20, 50, 0)


def test_unknown_or_repeated_provider_in_order_is_rejected() -> None:
    with pytest.raises(ValidationError, match="gemini"):
        OrchestratorSettings(llm_order="anthropic,gemini")
    with pytest.raises(ValidationError, match="twice"):
        OrchestratorSettings(llm_order="openai,openai")


def test_an_openai_endpoint_needs_a_model_name() -> None:
    with pytest.raises(ValidationError, match="without a model"):
        OrchestratorSettings(openai_base_url="http://127.0.0.1:8000/v1")


def test_settings_build_the_providers_in_their_order() -> None:
    s = OrchestratorSettings(
        anthropic_api_key=SecretStr("k"),
        anthropic_base_url="http://a",
        openai_base_url="http://o/v1",
        openai_fast_model="small",
        llm_order="openai,anthropic",
        llm_timeout_s=7.0,
    )
    llm = build_llm(s)
    assert isinstance(llm, ObservedLLM) and llm.names == ("openai", "anthropic")
    only = build_llm(OrchestratorSettings(anthropic_api_key=SecretStr("k")))
    assert only is not None and only.names == ("anthropic",)


async def test_observed_llm_remembers_the_last_outcome() -> None:
    from groundwire_core.errors import Overloaded
    from groundwire_orchestrator.llm.base import ChatMessage, LLMRequest

    inner = ScriptedLLM(strong=["ok", Scripted(error=Overloaded("busy", dependency="llm:f"))])
    llm = ObservedLLM(inner, ("f",))
    request = LLMRequest("s", (ChatMessage("user", "q"),))
    assert [e async for e in llm.stream(request, timeout_s=1)]
    assert llm.last is not None and llm.last.ok
    with pytest.raises(Overloaded):
        [e async for e in llm.stream(request, timeout_s=1)]
    assert llm.last is not None and not llm.last.ok and "busy" in llm.last.message


def test_turns_need_a_role() -> None:
    turns = convert.turns_from_proto(
        [orchestrator_pb2.Message(role=orchestrator_pb2.ROLE_USER, content="q")]
    )
    assert turns[0].role == "user"
    with pytest.raises(InvalidInput):
        convert.turns_from_proto([orchestrator_pb2.Message(content="q")])


def test_events_convert() -> None:
    src = NumberedSource(4, chunk(1, "x"))
    event = convert.event_to_proto(
        CitationsDone((src,), (Citation(4, "X [4].", Verification.UNSUPPORTED, 0.2),))
    )
    assert event.citations.sources[0].number == 4
    assert event.citations.citations[0].status == orchestrator_pb2.VERIFICATION_STATUS_UNSUPPORTED
    done = convert.event_to_proto(AnswerDone("extractive", "a", 2)).done
    assert (done.mode, done.unsupported_citations) == (orchestrator_pb2.ANSWER_MODE_EXTRACTIVE, 2)
    assert convert.event_to_proto(AnswerReset("why")).reset.reason == "why"


@pytest.mark.parametrize(
    ("llm", "reranker", "methods", "proves"),
    [
        (False, False, ("similarity",), False),
        (True, False, ("llm", "similarity"), True),
        # a reranker that does not answer serves no NLI model: skipped, not failed on
        (False, True, ("nli", "similarity"), False),
        (True, True, ("nli", "llm", "similarity"), True),
    ],
)
async def test_the_verifier_chain_follows_the_settings_and_what_is_ready(
    llm: bool, reranker: bool, methods: tuple[str, ...], proves: bool
) -> None:
    from groundwire_core.clients.embedder import EmbedderClient
    from groundwire_core.grpc.client import create_channel
    from groundwire_orchestrator.clients.reranker import RerankerClient
    from groundwire_orchestrator.clients.retriever import RetrieverClient
    from groundwire_orchestrator.text.passages import PassageVectors
    from groundwire_orchestrator.wiring import build_pipeline, build_verifiers

    s = OrchestratorSettings(verify_before_show="auto")
    provider = ScriptedLLM() if llm else None
    async with create_channel("127.0.0.1:1") as channel:  # nothing listens there
        embedder = EmbedderClient(channel, timeout_s=1.0)
        client = RerankerClient(channel) if reranker else None
        chain = build_verifiers(
            s, llm=provider, passages=PassageVectors(embedder), reranker=client
        )
        assert chain.methods == methods
        assert await chain.proves_now() is proves
        ready = [v.method for v in await chain.available()]
        assert ready == [m for m in methods if m != "nli"]
        pipeline = build_pipeline(
            s, embedder=embedder, retriever=RetrieverClient(channel, timeout_s=1.0),
            reranker=client, llm=provider,
        )
        assert pipeline.config.verify_before_show == "auto"
    with pytest.raises(ValidationError, match="magic"):
        OrchestratorSettings(citation_verifiers="llm,magic")
