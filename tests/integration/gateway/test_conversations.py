"""Conversations and feedback through a real gateway over HTTP (uvicorn on port 0, the
in-memory upstream behind it, its system of record on SQLite and a real PostgreSQL):
a chat is stored with its citations, feedback on it is recorded, and the report — the
admin route and `groundwire report --collection C` — lists it among the answers marked
wrong (issue 29, acceptance 4); another tenant and another end user cannot read it
through any route that returns conversations, nor learn that it exists."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import httpx
import httpx2
import jwt
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from groundwire_cli.__main__ import main
from groundwire_gateway.app import create_app
from groundwire_gateway.settings import GatewaySettings
from groundwire_gateway.state import UpstreamApi
from tests.unit.gateway.conftest import FakeUpstream, sse_events

OPERATOR = "operator-secret-key-1"
ACME = "acme-read-key-0001"
GLOBEX = "globex-read-key-0001"
SECRET = "end-user-token-secret-0123456789abcdef"
QUESTION = "How do I install Groundwire?"


def token(user: str) -> str:
    # a day: the module-level headers are made at collection, and a full suite reaches
    # this file many minutes later (600 s had expired by then in CI)
    claims = {"sub": user, "aud": "groundwire", "exp": int(time.time()) + 86_400}
    return jwt.encode(claims, SECRET, algorithm="HS256")


def serve(settings: GatewaySettings) -> Iterator[str]:
    app = create_app(settings, cast(UpstreamApi, FakeUpstream()))
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started, "the gateway did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def settings_for(database_url: str, **extra: Any) -> GatewaySettings:
    return GatewaySettings(
        database_url=database_url,
        api_keys=f"acme:{ACME},globex:{GLOBEX}",
        admin_api_keys=f"ops:{OPERATOR}",
        user_token_secret=SECRET,
        **extra,
    )


@pytest.fixture
def gateway(database_url: str) -> Iterator[str]:
    yield from serve(settings_for(database_url))


def headers(key: str | None = None, user: str | None = None) -> dict[str, str]:
    out = {}
    if key is not None:
        out["Authorization"] = f"Bearer {key}"
    if user is not None:
        out["X-Groundwire-User-Token"] = token(user)
    return out


ALICE = headers(ACME, "alice")
BOB = headers(ACME, "bob")
ACME_APP = headers(ACME)
OUTSIDERS = {
    "another end user": BOB,
    "another tenant": headers(GLOBEX),
    "another tenant's user of the same name": headers(GLOBEX, "alice"),
    "an anonymous caller": headers(),
}


def chat(
    url: str, who: dict[str, str], question: str = QUESTION, conversation_id: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": question}]}
    if conversation_id is not None:
        body["conversation_id"] = conversation_id
    response = httpx.post(f"{url}/v1/chat", json=body, headers=who, timeout=60)
    assert response.status_code == 200, response.text
    events = sse_events(response.text)
    assert events[-1][0] == "done", events
    done: dict[str, Any] = json.loads(events[-1][1])
    return done


def admin_key(url: str, tenant: str) -> str:
    response = httpx.post(
        f"{url}/v1/admin/keys",
        json={"role": "admin", "tenant": tenant},
        headers=headers(OPERATOR),
        timeout=30,
    )
    assert response.status_code == 201, response.text
    key: str = response.json()["key"]
    return key


def run_cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        main(argv)
    return int(done.value.code or 0)


def test_a_chat_is_stored_rated_and_reported_as_wrong(
    gateway: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first = chat(gateway, ALICE)
    answer_id, conversation_id = first["answer_id"], first["conversation_id"]
    assert len(answer_id) == 32 and len(conversation_id) == 32
    second = chat(gateway, ALICE, "And on Windows?", conversation_id)
    assert second["conversation_id"] == conversation_id and second["answer_id"] != answer_id

    response = httpx.post(
        f"{gateway}/v1/chat/completions",
        json={"model": "groundwire", "messages": [{"role": "user", "content": QUESTION}]},
        headers=ALICE,
        timeout=60,
    )
    extra = response.json()["groundwire"]
    assert len(extra["answer_id"]) == 32 and extra["conversation_id"] != conversation_id

    listed = httpx.get(f"{gateway}/v1/conversations", headers=ALICE).json()["conversations"]
    assert [(c["id"], c["turns"]) for c in listed] == [
        (extra["conversation_id"], 1),
        (conversation_id, 2),
    ]
    stored = httpx.get(f"{gateway}/v1/conversations/{conversation_id}", headers=ALICE).json()
    assert stored["title"] == QUESTION and stored["collection"] == "docs"
    turn = stored["answers"][0]
    assert (turn["id"], turn["question"], turn["mode"], turn["via"]) == (
        answer_id,
        QUESTION,
        "generated",
        "chat",
    )
    assert turn["answer"] == first["answer"]
    assert [(c["number"], c["status"]) for c in turn["citations"]] == [(1, "supported")]
    assert [s["source_id"] for s in turn["sources"]] == ["install.md", "limits.md"]
    assert {"retrieval", "rerank", "answer"} <= {s["name"] for s in turn["stages"]}
    assert turn["latency_ms"] >= 0 and turn["rating"] is None and not turn["low_evidence"]

    rated = httpx.post(
        f"{gateway}/v1/feedback",
        json={"answer_id": answer_id, "rating": "down", "comment": "the command is pipx"},
        headers=ALICE,
    )
    assert rated.status_code == 200, rated.text
    assert rated.json()["rating"] == "down"
    again = httpx.get(f"{gateway}/v1/conversations/{conversation_id}", headers=ALICE).json()
    assert again["answers"][0]["rating"] == "down"

    acme_admin = admin_key(gateway, "acme")
    report = httpx.get(
        f"{gateway}/v1/admin/report",
        params={"collection": "docs"},
        headers=headers(acme_admin),
    ).json()
    assert report["tenant"] == "acme" and report["answers"] == 3 and report["rated_down"] == 1
    assert report["most_asked"][0]["question"] == QUESTION
    assert report["most_asked"][0]["count"] == 2
    assert report["marked_wrong"] == [
        {
            "question": QUESTION,
            "count": 1,
            "last_at": report["marked_wrong"][0]["last_at"],
            "answer_ids": [answer_id],
            "comments": ["the command is pipx"],
        }
    ]

    monkeypatch.setenv("GROUNDWIRE_ADMIN_KEY", acme_admin)
    assert run_cli(["report", "--collection", "docs", "--gateway", gateway]) == 0
    out = capsys.readouterr().out
    assert "docs (acme): 3 answers stored" in out
    wrong = out[out.index("Marked wrong") :]
    assert QUESTION in wrong and answer_id in wrong and '"the command is pipx"' in wrong
    assert "Most asked: 2" in out and f"   2 asked {QUESTION}" in out

    globex_admin = admin_key(gateway, "globex")
    monkeypatch.setenv("GROUNDWIRE_ADMIN_KEY", globex_admin)
    assert run_cli(["report", "--collection", "docs", "--gateway", gateway]) == 0
    out = capsys.readouterr().out
    assert "docs (globex): 0 answers stored" in out and QUESTION not in out


def _without_request_id(response: httpx.Response) -> tuple[int, dict[str, Any]]:
    body = response.json()
    body["error"].pop("request_id", None)
    return response.status_code, body


def test_no_route_shows_a_conversation_to_another_tenant_or_end_user(gateway: str) -> None:
    done = chat(gateway, ALICE)
    conversation_id, answer_id = done["conversation_id"], done["answer_id"]
    missing = "0" * 32

    # the owner and her tenant's own key read it (the control)
    for reader in (ALICE, ACME_APP, headers(OPERATOR)):
        found = httpx.get(f"{gateway}/v1/conversations/{conversation_id}", headers=reader)
        assert found.status_code == 200 and found.json()["answers"][0]["id"] == answer_id

    for who, outsider in OUTSIDERS.items():
        listed = httpx.get(f"{gateway}/v1/conversations", headers=outsider)
        assert listed.status_code == 200, who
        assert conversation_id not in listed.text and QUESTION not in listed.text, who

        read = httpx.get(f"{gateway}/v1/conversations/{conversation_id}", headers=outsider)
        absent = httpx.get(f"{gateway}/v1/conversations/{missing}", headers=outsider)
        assert read.status_code == 404, who
        assert _without_request_id(read) == _without_request_id(absent), who

        rated = httpx.post(
            f"{gateway}/v1/feedback",
            json={"answer_id": answer_id, "rating": "down"},
            headers=outsider,
        )
        rated_missing = httpx.post(
            f"{gateway}/v1/feedback",
            json={"answer_id": missing, "rating": "down"},
            headers=outsider,
        )
        assert rated.status_code == 404, who
        assert _without_request_id(rated) == _without_request_id(rated_missing), who

        joined = httpx.post(
            f"{gateway}/v1/chat",
            json={
                "messages": [{"role": "user", "content": "What did she ask?"}],
                "conversation_id": conversation_id,
            },
            headers=outsider,
            timeout=60,
        )
        assert joined.status_code == 404, who
        assert QUESTION not in joined.text, who

    # an end-user id longer than the column (a token's claim has no bound) still owns its own
    long_user = headers(ACME, "u" * 300)
    theirs = chat(gateway, long_user)["conversation_id"]
    assert httpx.get(f"{gateway}/v1/conversations/{theirs}", headers=long_user).status_code == 200
    assert httpx.get(f"{gateway}/v1/conversations/{theirs}", headers=BOB).status_code == 404
    shorter = headers(ACME, "u" * 299)
    assert httpx.get(f"{gateway}/v1/conversations/{theirs}", headers=shorter).status_code == 404

    # nothing an outsider tried was recorded against her answer or conversation
    mine = httpx.get(f"{gateway}/v1/conversations/{conversation_id}", headers=ALICE).json()
    assert [a["id"] for a in mine["answers"]] == [answer_id]
    assert mine["answers"][0]["rating"] is None

    globex_admin = admin_key(gateway, "globex")
    report = httpx.get(
        f"{gateway}/v1/admin/report", params={"collection": "docs"}, headers=headers(globex_admin)
    )
    assert report.status_code == 200 and QUESTION not in report.text
    assert report.json()["answers"] == 0
    refused = httpx.get(
        f"{gateway}/v1/admin/report", params={"collection": "docs"}, headers=ACME_APP
    )
    assert refused.status_code in (401, 403) and QUESTION not in refused.text


def test_retention_zero_stores_nothing(database_url: str) -> None:
    for url in serve(settings_for(database_url, conversation_retention_days=0)):
        done = chat(url, ALICE)
        assert done["answer_id"] is None and done["conversation_id"] is None
        listed = httpx.get(f"{url}/v1/conversations", headers=ALICE).json()
        assert listed == {"conversations": []}
        report = httpx.get(
            f"{url}/v1/admin/report", params={"collection": "docs"}, headers=headers(OPERATOR)
        ).json()
        assert report["answers"] == 0 and report["retention_days"] == 0


async def test_an_mcp_answer_is_stored_for_its_caller(gateway: str) -> None:
    async with (
        httpx2.AsyncClient(headers=ALICE, timeout=60) as http,
        Client(streamable_http_client(f"{gateway}/mcp", http_client=http)) as client,
    ):
        asked = await client.call_tool("ask", {"question": QUESTION})
    assert not asked.is_error and asked.structured_content is not None
    answer_id = asked.structured_content["answer_id"]
    async with httpx.AsyncClient(base_url=gateway) as api:
        (listed,) = (await api.get("/v1/conversations", headers=ALICE)).json()["conversations"]
        stored = (await api.get(f"/v1/conversations/{listed['id']}", headers=ALICE)).json()
        assert (await api.get("/v1/conversations", headers=BOB)).json()["conversations"] == []
    (turn,) = stored["answers"]
    assert (turn["id"], turn["via"], turn["question"]) == (answer_id, "mcp", QUESTION)
    assert [c["number"] for c in turn["citations"]] == [1]
