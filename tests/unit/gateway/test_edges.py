"""The gateway's edges against the in-memory upstream: search inside the cost
controls, per-tenant daily quotas, /v1/health detail and caching, 404s that do not
enumerate, the body read deadline, the limits mode header and the offline /docs.

``upstream`` (FakeUpstream) and ``make_client`` come from conftest.py."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
from starlette.types import Message

from groundwire_core.context import current_request_id
from groundwire_core.logs import TEXT_FORMAT
from groundwire_gateway.app import create_app
from groundwire_gateway.settings import GatewaySettings

ASK = {"messages": [{"role": "user", "content": "how do I install it"}]}
ACME_KEY = "acme-key-0123456789"
OTHER_KEY = "other-key-0123456789"
ADMIN_KEY = "admin-key-0123456789"
KEYS = f"acme:{ACME_KEY},other:{OTHER_KEY}"


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


# --- search is charged -------------------------------------------------------------------


async def test_search_spends_the_token_budget_and_is_refused_like_chat(
    make_client: Any, upstream: Any, error_json: Any
) -> None:
    client = make_client(api_keys=KEYS, token_budget_per_day=1000)
    upstream.search_llm_tokens = 900  # analysis + listwise, as the orchestrator reports
    first = await client.post("/v1/search", json={"query": "install"}, headers=bearer(ACME_KEY))
    assert first.status_code == 200
    # 1 (query) + 900 (LLM) spent: a second search's LLM work would pass the budget,
    # but admission only knows the query; it fits, and is charged its 900 after
    second = await client.post("/v1/search", json={"query": "again"}, headers=bearer(ACME_KEY))
    assert second.status_code == 200
    searches = len(upstream.calls)
    for path, body in (("/v1/search", {"query": "more"}), ("/v1/chat", ASK)):
        refused = await client.post(path, json=body, headers=bearer(ACME_KEY))
        assert refused.status_code == 429, (path, refused.text)
        assert error_json(refused)["code"] == "token_budget_exceeded"
        assert int(refused.headers["retry-after"]) >= 1
    assert len(upstream.calls) == searches  # refused before any model work
    # another tenant's budget is its own
    other = await client.post("/v1/search", json={"query": "install"}, headers=bearer(OTHER_KEY))
    assert other.status_code == 200


async def test_a_spent_budget_refuses_search_before_the_upstream(
    make_client: Any, upstream: Any, error_json: Any
) -> None:
    client = make_client(api_keys=KEYS, token_budget_per_day=10, chat_token_reserve=0)
    # a chat whose input alone spends the budget (4 + 6 tokens)
    chat = await client.post(
        "/v1/chat",
        json={"messages": [{"role": "user", "content": "x" * 24}]},
        headers=bearer(ACME_KEY),
    )
    assert chat.status_code == 200
    refused = await client.post("/v1/search", json={"query": "q"}, headers=bearer(ACME_KEY))
    assert refused.status_code == 429
    assert error_json(refused)["code"] == "token_budget_exceeded"
    assert upstream.calls == []


async def test_anonymous_callers_cannot_exhaust_a_tenants_quota(
    make_client: Any, error_json: Any
) -> None:
    client = make_client(
        api_keys=KEYS, anonymous_daily_quota=20, daily_quota=50, search_rate_limit_per_min=0
    )
    codes = [
        (await client.post("/v1/search", json={"query": f"q{i}"})).status_code for i in range(20)
    ]
    assert codes == [200] * 20
    spent = await client.post("/v1/search", json={"query": "one more"})
    assert spent.status_code == 429 and error_json(spent)["code"] == "quota_exceeded"
    for i in range(5):  # the keyed tenant is unaffected
        reply = await client.post("/v1/search", json={"query": f"k{i}"}, headers=bearer(ACME_KEY))
        assert reply.status_code == 200
    chat = await client.post("/v1/chat", json=ASK, headers=bearer(ACME_KEY))
    assert chat.status_code == 200


# --- 404 without enumeration --------------------------------------------------------------


async def test_unknown_collection_404_names_others_only_to_keyed_callers(
    make_client: Any, error_json: Any
) -> None:
    client = make_client(api_keys=KEYS)
    body = {"query": "q", "collection": "secret-plans"}
    anonymous = await client.post("/v1/search", json=body)
    assert anonymous.status_code == 404
    message = error_json(anonymous)["message"]
    assert "'secret-plans'" in message
    assert "docs" not in message and "team_notes-2" not in message
    keyed = await client.post("/v1/search", json=body, headers=bearer(ACME_KEY))
    assert keyed.status_code == 404
    assert "docs" in error_json(keyed)["message"]


# --- /v1/health ---------------------------------------------------------------------------


async def test_health_details_only_with_an_admin_key(make_client: Any) -> None:
    client = make_client(admin_api_keys=f"ops:{ADMIN_KEY}", api_keys=KEYS)
    for headers in ({}, bearer(ACME_KEY), bearer("not-a-key-at-all")):
        public = (await client.get("/v1/health", headers=headers)).json()
        assert public["status"] == "ok"
        for dep in public["dependencies"].values():
            assert dep["target"] == "" and dep["message"] == ""
        assert public["dependencies"]["orchestrator"]["status"] == "serving"
    admin = (await client.get("/v1/health", headers=bearer(ADMIN_KEY))).json()
    assert admin["dependencies"]["orchestrator"]["target"] == "127.0.0.1:1"
    assert admin["dependencies"]["redis"]["message"] == "no redis_url: limits run in process"


async def test_health_is_cached_and_concurrent_calls_share_one_round(
    make_client: Any, upstream: Any
) -> None:
    # a TTL far longer than 500 requests take on a loaded machine: one round for all
    client = make_client(health_cache_s=60.0)
    upstream.health_delay_s = 0.05
    replies = await asyncio.gather(*(client.get("/v1/health") for _ in range(500)))
    assert {r.status_code for r in replies} == {200}
    assert upstream.health_calls == 1
    assert (await client.get("/v1/health")).status_code == 200
    assert upstream.health_calls == 1  # still fresh


async def test_a_stale_health_is_asked_again(make_client: Any, upstream: Any) -> None:
    client = make_client(health_cache_s=0.05)
    assert (await client.get("/v1/health")).status_code == 200
    assert upstream.health_calls == 1
    await asyncio.sleep(0.1)  # past the TTL however slow the machine: only waits longer
    assert (await client.get("/v1/health")).status_code == 200
    assert upstream.health_calls == 2


# --- request ids --------------------------------------------------------------------------


class TextLines(logging.Handler):
    """Formats records as the text log does (``rid=… trace=…``), with the request id
    bound when each record is made."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter(TEXT_FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        record.service, record.trace_id = "gateway", "-"
        record.request_id = current_request_id()
        self.lines.append(self.format(record))


async def test_request_ids_and_paths_cannot_forge_log_fields(make_client: Any) -> None:
    client = make_client()
    forged = "x rid=admin trace=0af7651916cd43dd8448eb211c80319c"
    handler = TextLines()
    logger = logging.getLogger("groundwire.gateway")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        response = await client.get("/healthz", headers={"x-request-id": forged})
        # a path that decodes to a space, a forged field and a second line
        forged_path = await client.get("/x%20rid=admin%0Aforged%20line")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    rid = response.headers["x-request-id"]
    assert rid != forged and len(rid) == 32
    assert forged_path.status_code == 404
    assert len(handler.lines) == 2
    assert f"rid={rid} trace=- " in handler.lines[0]
    assert "GET /x%20rid=admin%0Aforged%20line 404" in handler.lines[1]
    # no field of its own (space-separated) and no second line
    assert not any(" rid=admin" in line or "\n" in line for line in handler.lines)


# --- body read deadline -------------------------------------------------------------------


async def test_a_trickling_body_gets_408_within_the_deadline(upstream: Any) -> None:
    app = create_app(GatewaySettings(body_timeout_s=0.2), upstream)
    body = json.dumps({"query": "install it"}).encode()
    sent: list[Message] = []
    chunks = 0

    async def receive() -> Message:
        nonlocal chunks
        chunks += 1
        if chunks == 1:
            return {"type": "http.request", "body": body[:5], "more_body": True}
        await asyncio.sleep(3600)  # the rest never comes
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/search",
        "raw_path": b"/v1/search",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"host", b"gateway")],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 80),
        "root_path": "",
    }
    # the rest of the body never comes: only the 0.2 s read deadline can end the request
    # (wait_for's 5 s fails a hang)
    await asyncio.wait_for(app(scope, receive, send), timeout=5)
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert start["status"] == 408
    headers = dict(start["headers"])
    assert headers[b"connection"] == b"close"
    payload = json.loads(b"".join(m.get("body", b"") for m in sent if "body" in m))
    assert payload["error"]["code"] == "request_timeout"
    assert upstream.calls == []


# --- limits mode, docs --------------------------------------------------------------------


async def test_every_response_says_where_limits_are_decided(make_client: Any) -> None:
    client = make_client()
    for reply in (
        await client.get("/healthz"),
        await client.post("/v1/search", json={"query": "q"}),
        await client.get("/nope"),
    ):
        assert reply.headers["x-ratelimit-mode"] == "in_process"


async def test_docs_load_nothing_from_a_cdn(make_client: Any) -> None:
    client: httpx.AsyncClient = make_client()
    for page, asset in (("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")):
        html = (await client.get(page)).text
        assert f"/docs-assets/{asset}" in html
        assert "cdn." not in html and "fonts.googleapis" not in html
        script = await client.get(f"/docs-assets/{asset}")
        assert script.status_code == 200 and len(script.content) > 100_000
    css = await client.get("/docs-assets/swagger-ui.css")
    assert css.status_code == 200
