"""POST /v1/chat (SSE), POST /v1/chat/completions (OpenAI shape) and GET /v1/models
against the in-memory upstream: event order and payloads, validation at the edge,
errors before and during the stream, limits, and cancellation of abandoned chats."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from groundwire_core.errors import BackendFailure, NotFound, Overloaded, Unavailable
from groundwire_gateway import models
from groundwire_gateway.app import create_app
from groundwire_gateway.settings import GatewaySettings

ASK = {"messages": [{"role": "user", "content": "How do I install it?"}]}


@pytest.fixture
def client(make_client: Any) -> httpx.AsyncClient:
    c: httpx.AsyncClient = make_client()
    return c


async def test_chat_streams_typed_events_in_order(
    client: httpx.AsyncClient, upstream: Any, parse_sse: Any
) -> None:
    response = await client.post("/v1/chat", json=ASK, headers={"x-request-id": "chat-1"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-request-id"] == "chat-1"
    events = parse_sse(response.text)
    names = [n for n, _ in events]
    assert names == ["retrieval", "delta", "delta", "delta", "delta", "citations", "stages", "done"]
    payloads = [json.loads(d) for _, d in events]
    assert [s["number"] for s in payloads[0]["sources"]] == [1, 2]
    assert payloads[0]["sources"][0]["url"] == "https://docs.example.com/install"
    assert "".join(p["text"] for p in payloads[1:5]) == payloads[-1]["answer"]
    assert payloads[5]["citations"][0]["status"] == "supported"
    assert [s["name"] for s in payloads[6]["stages"]] == ["retrieval", "rerank", "answer"]
    assert payloads[6]["stages"][1]["fallback"] is True
    assert payloads[-1]["mode"] == "generated"
    ask = upstream.asks[-1]
    assert ask["collection"] == "docs"
    assert ask["messages"] == [("user", "How do I install it?")]


async def test_chat_passes_conversation_collection_filters_and_options(
    client: httpx.AsyncClient, upstream: Any
) -> None:
    body = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "part one"},
                    {"type": "text", "text": "part two"},
                ],
            },
        ],
        "collection": "team_notes-2",
        "filters": [{"field": "type", "any_of": ["guide"]}],
        "listwise_rerank": True,
        "max_agent_steps": 3,
    }
    response = await client.post("/v1/chat", json=body)
    assert response.status_code == 200, response.text
    ask = upstream.asks[-1]
    assert ask["messages"] == [
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "part one\npart two"),
    ]
    assert (ask["collection"], ask["filters"]) == ("team_notes-2", [("type", ["guide"])])
    assert (ask["listwise_rerank"], ask["max_agent_steps"]) == (True, 3)


def _conversation(n: int) -> list[dict[str, str]]:
    roles = ["user", "assistant"]
    msgs = [{"role": roles[i % 2], "content": f"m{i}"} for i in range(n)]
    msgs[-1]["role"] = "user"
    return msgs


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"messages": _conversation(21)}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "user", "content": "x" * 4001}]}, "messages.0.content"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "x" * 4001}]}]},
            "messages.0.content",
        ),
        ({"messages": [{"role": "system", "content": "be evil"}]}, "messages.0.role"),
        (
            {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]},
            "last message must be from the user",
        ),
        ({"messages": [{"role": "user", "content": "   "}]}, "blank"),
        ({"messages": [{"role": "user", "content": "q"}], "collection": "Bad!"}, "collection"),
        ({"messages": [{"role": "user", "content": "q"}], "max_agent_steps": 99}, "max_agent"),
        ({"messages": [{"role": "user", "content": "q"}], "extra": 1}, "extra"),
    ],
    ids=[
        "21-messages",
        "no-messages",
        "4001-chars",
        "4001-char-part",
        "system-role",
        "last-not-user",
        "blank",
        "bad-collection",
        "too-many-steps",
        "unknown-field",
    ],
)
async def test_invalid_chats_are_422_before_any_work(
    client: httpx.AsyncClient, upstream: Any, error_json: Any, body: dict[str, Any], where: str
) -> None:
    response = await client.post("/v1/chat", json=body)
    assert response.status_code == 422, response.text
    error = error_json(response)
    assert error["code"] == "invalid_input"
    assert where in error["message"]
    assert upstream.asks == []


async def test_twenty_messages_of_4000_chars_pass_the_schema_but_not_the_token_budget(
    make_client: Any, upstream: Any, error_json: Any
) -> None:
    client = make_client(max_input_tokens=6000)
    msgs = _conversation(20)
    for m in msgs:
        m["content"] = "y" * 4000
    response = await client.post("/v1/chat", json={"messages": msgs})
    assert response.status_code == 422
    error = error_json(response)
    assert error["code"] == "invalid_input"
    assert "about 20080 input tokens" in error["message"] and "approximate" in error["message"]
    assert upstream.asks == []
    roomy = make_client(max_input_tokens=30_000)
    assert (await roomy.post("/v1/chat", json={"messages": msgs})).status_code == 200


async def test_unknown_collection_is_404_and_unknown_filter_field_is_422(
    client: httpx.AsyncClient, upstream: Any, error_json: Any
) -> None:
    response = await client.post("/v1/chat", json={**ASK, "collection": "nope"})
    assert response.status_code == 404
    error = error_json(response)
    assert error["code"] == "not_found" and "'nope'" in error["message"]
    assert "docs" not in error["message"]  # an anonymous caller learns nothing else
    response = await client.post(
        "/v1/chat", json={**ASK, "filters": [{"field": "colour", "any_of": ["red"]}]}
    )
    assert response.status_code == 422
    message = error_json(response)["message"]
    assert "'colour' is not a filterable field of 'docs'" in message
    assert "doc_type" in message
    assert upstream.asks == []


async def test_known_collections_are_cached_briefly(make_client: Any, upstream: Any) -> None:
    client = make_client(collection_cache_s=60)
    for _ in range(5):
        assert (await client.post("/v1/chat", json=ASK)).status_code == 200
    assert upstream.list_calls == 1
    uncached = make_client(collection_cache_s=0)
    for _ in range(3):
        assert (await uncached.post("/v1/chat", json=ASK)).status_code == 200
    assert upstream.list_calls == 4
    assert upstream.counted_lists == 0  # the cheap listing: no chunk counted per request


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (Unavailable("orchestrator is unavailable", dependency="orchestrator"), 503, "unavailable"),
        (NotFound("no collection 'docs'"), 404, "not_found"),
        (Overloaded("llm busy", retry_after_s=3, dependency="llm"), 429, "overloaded"),
        (RuntimeError("secret internals"), 500, "internal"),
    ],
)
async def test_failure_before_the_first_event_is_an_http_error(
    client: httpx.AsyncClient,
    upstream: Any,
    error_json: Any,
    error: BaseException,
    status: int,
    code: str,
) -> None:
    upstream.error = error
    response = await client.post("/v1/chat", json=ASK)
    assert response.status_code == status
    assert error_json(response)["code"] == code
    assert "secret" not in response.text
    assert upstream.streams[-1].cancelled is False  # it had already ended


async def test_failure_mid_stream_is_one_error_event(
    client: httpx.AsyncClient, upstream: Any, parse_sse: Any
) -> None:
    upstream.script = [*upstream.script[:3], BackendFailure("the llm failed", dependency="llm")]
    response = await client.post("/v1/chat", json=ASK, headers={"x-request-id": "mid"})
    assert response.status_code == 200
    events = parse_sse(response.text)
    assert [n for n, _ in events] == ["retrieval", "delta", "delta", "error"]
    error = json.loads(events[-1][1])
    assert error == {
        "code": "backend_failure",
        "message": "the llm failed",
        "dependency": "llm",
        "retry_after_s": None,
        "request_id": "mid",
    }
    metrics = (await client.get("/metrics")).text
    assert 'groundwire_gateway_errors_total{code="backend_failure",route="/v1/chat"} 1.0' in metrics


async def test_unexpected_failure_mid_stream_leaks_nothing(
    client: httpx.AsyncClient, upstream: Any, parse_sse: Any
) -> None:
    upstream.script = [*upstream.script[:2], RuntimeError("secret internals")]
    response = await client.post("/v1/chat", json=ASK)
    events = parse_sse(response.text)
    assert events[-1][0] == "error"
    assert json.loads(events[-1][1])["code"] == "internal"
    assert "secret" not in response.text and "Traceback" not in response.text


async def test_stream_that_ends_without_done_ends_with_an_error_event(
    client: httpx.AsyncClient, upstream: Any, parse_sse: Any
) -> None:
    upstream.script = upstream.script[:2]
    events = parse_sse((await client.post("/v1/chat", json=ASK)).text)
    assert [n for n, _ in events] == ["retrieval", "delta", "error"]
    assert json.loads(events[-1][1])["code"] == "backend_failure"


async def test_reset_is_forwarded(client: httpx.AsyncClient, upstream: Any, parse_sse: Any) -> None:
    upstream.script.insert(2, models.ResetEvent(reason="searching again"))
    events = parse_sse((await client.post("/v1/chat", json=ASK)).text)
    assert ("reset", json.dumps({"reason": "searching again"}, separators=(",", ":"))) in events


async def test_rate_limit_is_429_with_retry_after_and_counted(
    make_client: Any, upstream: Any, error_json: Any
) -> None:
    client = make_client(rate_limit_per_min=3)
    statuses = [(await client.post("/v1/chat", json=ASK)).status_code for _ in range(3)]
    assert statuses == [200, 200, 200]
    response = await client.post("/v1/chat", json=ASK)
    assert response.status_code == 429
    assert 1 <= int(response.headers["retry-after"]) <= 60
    assert error_json(response)["code"] == "rate_limited"
    assert len(upstream.asks) == 3
    # search has its own window
    assert (await client.post("/v1/search", json={"query": "q"})).status_code == 200
    metrics = (await client.get("/metrics")).text
    assert 'groundwire_gateway_limit_rejections_total{reason="rate_limited"} 1.0' in metrics


async def test_api_keys_have_their_own_windows(make_client: Any) -> None:
    client = make_client(rate_limit_per_min=1, api_keys="acme:acme-key-123,beta:beta-key-456")
    auth = {"authorization": "Bearer acme-key-123"}
    assert (await client.post("/v1/chat", json=ASK, headers=auth)).status_code == 200
    assert (await client.post("/v1/chat", json=ASK, headers=auth)).status_code == 429
    other = {"x-api-key": "beta-key-456"}
    assert (await client.post("/v1/chat", json=ASK, headers=other)).status_code == 200
    assert (await client.post("/v1/chat", json=ASK)).status_code == 200  # by IP
    bad = {"authorization": "Bearer wrong-key-000"}
    response = await client.post("/v1/chat", json=ASK, headers=bad)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"


async def test_required_keys(make_client: Any, error_json: Any) -> None:
    client = make_client(api_keys="acme:acme-key-123", require_api_key=True)
    response = await client.post("/v1/chat", json=ASK)
    assert response.status_code == 401
    assert error_json(response)["code"] == "unauthenticated"
    ok = await client.post("/v1/chat", json=ASK, headers={"x-api-key": "acme-key-123"})
    assert ok.status_code == 200


async def test_token_budget_charges_input_and_answer(make_client: Any, error_json: Any) -> None:
    # input: ceil(20/4) + 4 = 9 tokens; answer: 47 characters -> 12 tokens
    client = make_client(token_budget_per_day=30, chat_token_reserve=0)
    body = {"messages": [{"role": "user", "content": "q" * 20}]}
    assert (await client.post("/v1/chat", json=body)).status_code == 200  # 9 + 12 = 21 used
    response = await client.post("/v1/chat", json=body)  # 21 + 9 > 30
    assert response.status_code == 429
    assert error_json(response)["code"] == "token_budget_exceeded"
    assert int(response.headers["retry-after"]) <= 86_400


async def test_chat_slots_cap_inflight_chats(
    make_client: Any, upstream: Any, error_json: Any
) -> None:
    client = make_client(max_inflight_chats=1)
    upstream.delay_s = 0.05
    first = asyncio.create_task(client.post("/v1/chat", json=ASK))
    await asyncio.wait_for(upstream.asked.wait(), timeout=5)
    second = await client.post("/v1/chat", json=ASK)
    assert second.status_code == 429
    assert error_json(second)["code"] == "too_many_inflight"
    assert (await first).status_code == 200
    # the slot was released at the end of the stream
    assert (await client.post("/v1/chat", json=ASK)).status_code == 200


async def test_daily_quota_counts_only_admitted_requests(make_client: Any, error_json: Any) -> None:
    client = make_client(anonymous_daily_quota=3, rate_limit_per_min=1)
    assert (await client.post("/v1/chat", json=ASK)).status_code == 200
    for _ in range(5):  # refused by the rate limit: they must not spend the quota
        assert (await client.post("/v1/chat", json=ASK)).status_code == 429
    assert (await client.post("/v1/search", json={"query": "q"})).status_code == 200
    assert (await client.post("/v1/search", json={"query": "q"})).status_code == 200
    response = await client.post("/v1/search", json={"query": "q"})
    assert response.status_code == 429
    assert error_json(response)["code"] == "quota_exceeded"


async def test_abandoned_stream_cancels_the_ask_and_frees_the_slot(upstream: Any) -> None:
    # Raw ASGI: the client disconnects once the first delta went out (httpx's ASGI
    # transport buffers whole responses, so it cannot show this).
    settings = GatewaySettings(max_inflight_chats=1)
    app = create_app(settings, upstream)
    upstream.delay_s = 0.2
    body = json.dumps(ASK).encode()
    gone = asyncio.Event()
    requested = False
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if b"event: delta" in message.get("body", b""):
                gone.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat",
        "raw_path": b"/v1/chat",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"host", b"gateway")],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 80),
        "root_path": "",
    }
    started = time.monotonic()
    await asyncio.wait_for(app(scope, receive, send), timeout=5)
    assert time.monotonic() - started < 1.0, "the script had 8 events 0.2 s apart"
    stream = upstream.streams[-1]
    assert stream.cancelled and not stream.done
    assert b"event: done" not in b"".join(chunks)
    # the one chat slot was freed: the next chat on the same app is admitted
    upstream.delay_s = 0.0
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        assert (await client.post("/v1/chat", json=ASK)).status_code == 200
        metrics = (await client.get("/metrics")).text
    assert "groundwire_gateway_cancelled_chats_total 1.0" in metrics
    assert "groundwire_gateway_inflight_chats 0.0" in metrics


# --- OpenAI-compatible ---------------------------------------------------------------------


async def test_completion_not_streamed(client: httpx.AsyncClient, upstream: Any) -> None:
    body = {"model": "groundwire", "messages": ASK["messages"], "temperature": 0.2}
    response = await client.post("/v1/chat/completions", json=body, headers={"x-request-id": "c1"})
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["object"] == "chat.completion" and data["id"] == "chatcmpl-c1"
    assert data["choices"][0]["message"] == {
        "role": "assistant",
        "content": "".join(["Install it ", "with pip [1]", "; clients get ", "15 chats [2]."]),
    }
    assert data["choices"][0]["finish_reason"] == "stop"
    assert [c["url"] for c in data["citations"]] == [
        "https://docs.example.com/install",
        "https://docs.example.com/limits",
    ]
    assert data["usage"]["total_tokens"] == (
        data["usage"]["prompt_tokens"] + data["usage"]["completion_tokens"]
    )
    assert data["groundwire"]["mode"] == "generated"
    assert [s["name"] for s in data["groundwire"]["stages"]] == ["retrieval", "rerank", "answer"]
    models.ChatCompletion.model_validate(data)


async def test_completion_streamed(
    client: httpx.AsyncClient, upstream: Any, parse_sse: Any
) -> None:
    body = {
        "model": "groundwire:team_notes-2",
        "messages": ASK["messages"],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200
    events = parse_sse(response.text)
    assert events[-1] == ("message", "[DONE]")
    chunks = [json.loads(d) for _, d in events[:-1]]
    for chunk in chunks:
        models.ChatCompletionChunk.model_validate(chunk)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Install it with pip [1]; clients get 15 chats [2]."
    final = chunks[-2]
    assert final["choices"][0]["finish_reason"] == "stop"
    assert [c["number"] for c in final["citations"]] == [1, 2]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
    assert upstream.asks[-1]["collection"] == "team_notes-2"


async def test_completion_stream_error_is_an_openai_error_chunk(
    client: httpx.AsyncClient, upstream: Any, parse_sse: Any
) -> None:
    upstream.script = [*upstream.script[:2], Unavailable("llm down", dependency="llm")]
    body = {"model": "groundwire", "messages": ASK["messages"], "stream": True}
    events = parse_sse((await client.post("/v1/chat/completions", json=body)).text)
    last = json.loads(events[-1][1])
    assert last["error"]["code"] == "unavailable" and last["error"]["message"] == "llm down"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"model": "gpt-4o"}, 422, "invalid_input"),
        ({"model": "groundwire:Bad"}, 422, "invalid_input"),
        ({"model": "groundwire", "n": 2}, 422, "invalid_input"),
        ({"model": "groundwire", "tools": []}, 422, "invalid_input"),
        ({"model": "groundwire:nope"}, 404, "not_found"),
    ],
)
async def test_completion_rejections(
    client: httpx.AsyncClient,
    upstream: Any,
    error_json: Any,
    body: dict[str, Any],
    status: int,
    code: str,
) -> None:
    response = await client.post("/v1/chat/completions", json={**body, "messages": ASK["messages"]})
    assert response.status_code == status, response.text
    assert error_json(response)["code"] == code
    assert upstream.asks == []


async def test_models_lists_every_collection(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/models")
    assert response.status_code == 200
    ids = [m["id"] for m in response.json()["data"]]
    assert ids == ["groundwire", "groundwire:docs", "groundwire:team_notes-2"]


async def test_completion_system_messages_are_the_operators_instructions(
    client: httpx.AsyncClient, upstream: Any
) -> None:
    body = {
        "model": "groundwire",
        "messages": [
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "bonjour"},
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": "How do I install it?", "name": "ann"},
        ],
    }
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    ask = upstream.asks[-1]
    assert ask["messages"] == [
        ("user", "hi"),
        ("assistant", "bonjour"),
        ("user", "How do I install it?"),
    ]
    assert ask["instructions"] == "Answer in French.\n\nBe brief."
    conversation = models.conversation_tokens(
        [models.ChatMessage(role=r, content=t) for r, t in ask["messages"]]
    )
    instructions = models.approx_tokens(ask["instructions"]) + models.TOKENS_PER_MESSAGE
    assert response.json()["usage"]["prompt_tokens"] == conversation + instructions


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "system", "content": "Answer in French."}],
        [
            {"role": "user", "content": "q"},
            {"role": "system", "content": "x"},
            {"role": "assistant", "content": "a"},
        ],
        [{"role": "tool", "content": "x"}, {"role": "user", "content": "q"}],
    ],
)
async def test_completion_conversations_without_a_last_user_message_are_422(
    client: httpx.AsyncClient, upstream: Any, error_json: Any, messages: list[Any]
) -> None:
    response = await client.post(
        "/v1/chat/completions", json={"model": "groundwire", "messages": messages}
    )
    assert response.status_code == 422, response.text
    assert upstream.asks == []


async def test_long_instructions_count_against_the_input_budget(
    make_client: Any, upstream: Any, error_json: Any
) -> None:
    client = make_client(max_input_tokens=100)
    body = {
        "model": "groundwire",
        "messages": [
            {"role": "system", "content": "x" * 1000},
            {"role": "user", "content": "How do I install it?"},
        ],
    }
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 422 and "input tokens" in error_json(response)["message"]


async def test_completion_stream_never_keeps_text_a_reset_discards(
    client: httpx.AsyncClient, upstream: Any, parse_sse: Any
) -> None:
    body = {"model": "groundwire", "messages": ASK["messages"], "stream": True}
    # a reset before any text (nothing was sent): ignored, the answer streams
    upstream.script.insert(1, models.ResetEvent(reason="searching again"))
    events = parse_sse((await client.post("/v1/chat/completions", json=body)).text)
    chunks = [json.loads(d) for _, d in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Install it with pip [1]; clients get 15 chats [2]."
    assert all("reset" not in (c.get("groundwire") or {}) for c in chunks)
    # a reset after text (the model failed mid-answer): the stream ends in an error,
    # the one thing an OpenAI client does not keep as the answer
    upstream.script = [e for e in upstream.script if not isinstance(e, models.ResetEvent)]
    upstream.script.insert(3, models.ResetEvent(reason="the language model failed"))
    events = parse_sse((await client.post("/v1/chat/completions", json=body)).text)
    last = json.loads(events[-1][1])
    assert last["error"]["code"] == "backend_failure"
    assert "the text streamed so far is void" in last["error"]["message"]
    assert ("message", "[DONE]") not in events
