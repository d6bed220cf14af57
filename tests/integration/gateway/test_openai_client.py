"""Acceptance: the official ``openai`` Python client, pointed at a gateway process,
gets completions (streamed and not) with citations, lists models, and sees our
errors as its own exception types."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

TENANT_KEY = "openai-tenant-key-1"
QUESTION = [{"role": "user", "content": "How do I install it and what are the limits?"}]
ANSWER = "Install it with one pip command [1]; each client gets 15 chats a minute [2]."


@pytest.fixture(scope="module")
def client(gateways: Any, fake_upstream: Any) -> Iterator[Any]:
    (gw,) = gateways.start(
        **fake_upstream.env(), API_KEYS=f"acme:{TENANT_KEY}", REQUIRE_API_KEY="true"
    )
    with openai.OpenAI(base_url=f"{gw.url}/v1", api_key=TENANT_KEY, max_retries=0, timeout=20) as c:
        yield c


def test_completion(client: Any) -> None:
    completion = client.chat.completions.create(model="groundwire", messages=QUESTION)
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.role == "assistant"
    assert completion.choices[0].message.content == ANSWER
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.total_tokens == (
        completion.usage.prompt_tokens + completion.usage.completion_tokens
    )
    extra = completion.model_extra
    assert [c["url"] for c in extra["citations"]] == [
        "https://docs.example.com/install",
        "https://docs.example.com/limits",
    ]
    assert extra["groundwire"]["mode"] == "generated"
    assert [s["name"] for s in extra["groundwire"]["stages"]] == [
        "analysis",
        "retrieval",
        "rerank",
        "answer",
    ]


def test_streamed_completion(client: Any) -> None:
    stream = client.chat.completions.create(
        model="groundwire:notes",
        messages=QUESTION,
        stream=True,
        stream_options={"include_usage": True},
        temperature=0.3,
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ANSWER
    with_content = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(with_content) == 6  # one chunk per delta: it streamed
    final = next(c for c in chunks if c.choices and c.choices[0].finish_reason == "stop")
    assert [s["number"] for s in final.model_extra["citations"]] == [1, 2]
    assert final.model_extra["groundwire"]["collection"] == "notes"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_collection_through_extra_body_and_models(client: Any) -> None:
    completion = client.chat.completions.create(
        model="groundwire", messages=QUESTION, extra_body={"collection": "notes"}
    )
    assert completion.model_extra["groundwire"]["collection"] == "notes"
    ids = [m.id for m in client.models.list()]
    assert ids[0] == "groundwire" and "groundwire:docs" in ids and "groundwire:notes" in ids


def test_errors_are_the_clients_exceptions(client: Any, gateways: Any) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as unknown:
        client.chat.completions.create(model="gpt-4o", messages=QUESTION)
    assert "model" in str(unknown.value)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="groundwire:nowhere", messages=QUESTION)
    with pytest.raises(openai.UnprocessableEntityError):
        client.chat.completions.create(
            model="groundwire", messages=[{"role": "system", "content": "obey"}]
        )
    with (
        openai.OpenAI(
            base_url=client.base_url, api_key="not-a-key-at-all", max_retries=0
        ) as stranger,
        pytest.raises(openai.AuthenticationError),
    ):
        stranger.chat.completions.create(model="groundwire", messages=QUESTION)


def test_mid_stream_error_raises(client: Any) -> None:
    stream = client.chat.completions.create(
        model="groundwire",
        messages=[{"role": "user", "content": "this will fail"}],
        stream=True,
    )
    with pytest.raises(openai.APIError) as caught:
        for _ in stream:
            pass
    assert "the llm failed" in str(caught.value)


def test_rate_limit_is_a_rate_limit_error(gateways: Any, fake_upstream: Any) -> None:
    # a keyless deployment: the key every OpenAI client sends is ignored
    (gw,) = gateways.start(**fake_upstream.env(), RATE_LIMIT_PER_MIN="1")
    with openai.OpenAI(base_url=f"{gw.url}/v1", api_key="sk-unused", max_retries=0) as limited:
        limited.chat.completions.create(model="groundwire", messages=QUESTION)
        with pytest.raises(openai.RateLimitError) as caught:
            limited.chat.completions.create(model="groundwire", messages=QUESTION)
    assert int(caught.value.response.headers["retry-after"]) >= 1
