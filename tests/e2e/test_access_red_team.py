"""Red team for end users and document access (issue #24, acceptance 1 and 2), through
the real services (local cluster as processes, MiniLM, embedded Qdrant, no LLM).

``handbook`` holds public documents and one restricted to ``group:eng``; ``vault`` is
a restricted collection. Every attempt — search, chat, chat completions, models, the
document view, the admin sources listing and the MCP tools, with no key, a tenant key,
an outsider's token, and expired, forged and wrong-audience tokens — is listed with
its result, and no response of an outsider contains any text, title, id or count of
the restricted document. The table is the structure to extend (H10's tenants suite
covers the keys and routes side).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import jwt
import pytest
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from groundwire_cli.cluster import LocalCluster

pytestmark = pytest.mark.e2e

ADMIN_KEY = "e2e-admin-key-red-team-access"
TEAM_KEY = "e2e-team-key-red-team-access"
SECRET_KEY = "the-app-and-the-gateway-share-this-secret-0123"
HANDBOOK, VAULT = "handbook", "vault"
SECRET_SOURCE = "override-runbook.md"
SECRET_TITLE = "Quota override runbook"
SECRET_CODE = "KESTREL-7731"
SECRET_DOC = (
    f"# {SECRET_TITLE}\n\nTo lift a tenant's request quota, engineers run the quota "
    f"override with the code {SECRET_CODE} and note it in the incident log. The quota "
    "override lasts one day and resets at midnight UTC."
)
PUBLIC_DOCS = {
    "quotas.md": "# Quotas\n\nEvery tenant has a daily request quota that resets at midnight "
    "UTC. A request over the quota is answered 429 until the reset.",
    "keys.md": "# API keys\n\nAPI keys are created by an admin and shown once. A key belongs "
    "to one tenant and carries a role: read, write or admin.",
    "limits.md": "# Rate limits\n\nEach key may send sixty requests per minute; beyond that "
    "the gateway answers 429 with a Retry-After header.",
}
QUESTION = "how do engineers lift a tenant's request quota with the override code"
LEAKS = (SECRET_CODE, SECRET_SOURCE, SECRET_TITLE, "override-runbook")


def _token(**over: Any) -> str:
    # a day: minted at collection, used whenever the suite reaches this file
    claims: dict[str, Any] = {"aud": "groundwire", "exp": int(time.time()) + 86_400}
    claims.update(over)
    key = claims.pop("key", SECRET_KEY)
    return jwt.encode({k: v for k, v in claims.items() if v is not None}, key, algorithm="HS256")


BOB = _token(sub="bob", groups=["eng"])
CAROL = _token(sub="carol", groups=["sales"])
CALLERS: dict[str, dict[str, str]] = {
    "no key": {},
    "tenant key": {"authorization": f"Bearer {TEAM_KEY}"},
    "outsider token": {"authorization": f"Bearer {TEAM_KEY}", "x-groundwire-user-token": CAROL},
    "expired token": {
        "authorization": f"Bearer {TEAM_KEY}",
        "x-groundwire-user-token": _token(sub="bob", groups=["eng"], exp=int(time.time()) - 60),
    },
    "forged token": {
        "authorization": f"Bearer {TEAM_KEY}",
        "x-groundwire-user-token": _token(
            sub="bob", groups=["eng"], key="an-attacker-guessed-secret-0123456789ab"
        ),
    },
    "wrong-audience token": {
        "authorization": f"Bearer {TEAM_KEY}",
        "x-groundwire-user-token": _token(sub="bob", groups=["eng"], aud="another-app"),
    },
    "forged identity headers": {
        "authorization": f"Bearer {TEAM_KEY}",
        "groundwire-user": "bob",
        "groundwire-groups": "eng",
        "groundwire-unrestricted": "1",
    },
}
INSIDER = {"authorization": f"Bearer {TEAM_KEY}", "x-groundwire-user-token": BOB}
BAD_TOKENS = {"expired token", "forged token", "wrong-audience token"}
NO_END_USER = {"no key", "tenant key", "forged identity headers"}  # refused by `vault`


@dataclass(frozen=True)
class Attempt:
    route: str
    method: str
    path: str
    body: dict[str, Any] | None = None
    params: dict[str, str] = field(default_factory=dict)


ATTEMPTS = (
    Attempt(
        "search", "POST", "/v1/search", {"query": QUESTION, "collection": HANDBOOK, "limit": 50}
    ),
    Attempt(
        "search by document",
        "POST",
        "/v1/search",
        {"query": QUESTION, "collection": HANDBOOK, "group_by": "document"},
    ),
    Attempt(
        "chat",
        "POST",
        "/v1/chat",
        {"messages": [{"role": "user", "content": QUESTION}], "collection": HANDBOOK},
    ),
    Attempt(
        "chat completions",
        "POST",
        "/v1/chat/completions",
        {"model": f"groundwire:{HANDBOOK}", "messages": [{"role": "user", "content": QUESTION}]},
    ),
    Attempt("models", "GET", "/v1/models"),
    Attempt(
        "document view",
        "GET",
        "/v1/sources/view",
        params={"collection": HANDBOOK, "source_id": SECRET_SOURCE},
    ),
    Attempt(
        "search restricted collection",
        "POST",
        "/v1/search",
        {"query": QUESTION, "collection": VAULT},
    ),
)


@pytest.fixture(scope="module")
def gateway(minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    run = tmp_path_factory.mktemp("access-red-team")
    cluster = LocalCluster.with_free_ports(
        run,
        minilm_dir,
        run / "qdrant",
        extra_env={
            "GROUNDWIRE_GATEWAY_ADMIN_API_KEYS": f"ops:{ADMIN_KEY}",
            "GROUNDWIRE_GATEWAY_API_KEYS": f"public:{TEAM_KEY}",
            "GROUNDWIRE_GATEWAY_USER_TOKEN_SECRET": SECRET_KEY,
            "GROUNDWIRE_GATEWAY_DEFAULT_COLLECTION": HANDBOOK,
        },
    )
    admin = {"authorization": f"Bearer {ADMIN_KEY}"}
    with cluster:
        cluster.start()
        cluster.wait_ready(timeout_s=120)
        with httpx.Client(base_url=cluster.gateway_url, headers=admin, timeout=120) as http:
            for body in (
                {"name": HANDBOOK},
                {"name": VAULT, "restricted": True, "default_access": ["group:eng"]},
            ):
                assert http.post("/v1/admin/collections", json=body).status_code == 201, body
            docs = [{"source_id": k, "content": v} for k, v in PUBLIC_DOCS.items()]
            docs.append(
                {"source_id": SECRET_SOURCE, "content": SECRET_DOC, "access": ["group:eng"]}
            )
            for name in (HANDBOOK, VAULT):
                done = http.post(
                    f"/v1/admin/collections/{name}/documents",
                    params={"wait": "true"},
                    json={"documents": docs},
                )
                assert done.status_code == 200, done.text
                assert done.json()["ingested"] == len(docs)
        yield cluster.gateway_url


def _without_ids(text: str) -> str:
    """A response body less its request id (different on every response)."""
    return re.sub(r'"request_id":"[0-9a-f]+"', "", text)


def _send(http: httpx.Client, attempt: Attempt, headers: dict[str, str]) -> httpx.Response:
    return http.request(
        attempt.method, attempt.path, json=attempt.body, params=attempt.params, headers=headers
    )


def test_no_outsider_sees_the_restricted_document(gateway: str) -> None:
    report: list[str] = []
    with httpx.Client(base_url=gateway, timeout=120) as http:
        for attempt in ATTEMPTS:
            for caller, headers in CALLERS.items():
                response = _send(http, attempt, headers)
                report.append(f"{attempt.route:<30} {caller:<24} -> {response.status_code}")
                # an id the caller sent may come back (a 404 names what was asked for);
                # the answer must then be the one a source that does not exist gets
                text = response.text
                if attempt.params.get("source_id") == SECRET_SOURCE:
                    text = text.replace(SECRET_SOURCE, "")
                    missing = _send(
                        http,
                        Attempt(
                            "",
                            "GET",
                            attempt.path,
                            None,
                            {**attempt.params, "source_id": "nope.md"},
                        ),
                        headers,
                    )
                    assert response.status_code == missing.status_code, caller
                    assert _without_ids(text) == _without_ids(missing.text.replace("nope.md", ""))
                for leaked in LEAKS:
                    assert leaked not in text, (attempt.route, caller, leaked)
                if caller in BAD_TOKENS:
                    assert response.status_code == 401, (attempt.route, caller)
                    assert "user token" in response.json()["error"]["message"]
                if attempt.route == "search restricted collection" and caller in NO_END_USER:
                    assert response.status_code == 403, (caller, response.text)
                    assert VAULT not in response.json()["error"]["message"]
    print("\n".join(["", *report]))


def test_a_group_member_sees_it_and_an_outsider_gets_none_of_its_chunks(gateway: str) -> None:
    search = ATTEMPTS[0]
    with httpx.Client(base_url=gateway, timeout=120) as http:
        inside = _send(http, search, INSIDER).json()["results"]
        outside = _send(http, search, CALLERS["outsider token"]).json()["results"]
        vault = _send(http, ATTEMPTS[-1], INSIDER)
        view = _send(http, ATTEMPTS[5], INSIDER)
    secret = [r for r in inside if r["source_id"] == SECRET_SOURCE]
    assert secret and SECRET_CODE in " ".join(r["text"] for r in secret)
    # the two rankings may differ beyond the secret's chunks: a caller who cannot see
    # every chunk is ranked without BM25, whose term statistics would count hidden words
    # (issue #31, defect 9; tests/integration/retriever/test_bm25_red_team.py)
    assert not {r["chunk_id"] for r in outside} & {r["chunk_id"] for r in secret}
    assert all(r["source_id"] != SECRET_SOURCE for r in outside)
    assert vault.status_code == 200 and any(
        r["source_id"] == SECRET_SOURCE for r in vault.json()["results"]
    )
    assert view.status_code == 200 and SECRET_CODE in view.text


async def test_mcp_tools_follow_the_same_access(gateway: str) -> None:
    report: list[str] = []
    for caller, headers in (("outsider token", CALLERS["outsider token"]), ("insider", INSIDER)):
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            McpClient(streamable_http_client(f"{gateway}/mcp", http_client=http)) as client,
        ):
            texts = []
            for name, arguments in (
                ("search", {"query": QUESTION, "limit": 10}),
                ("ask", {"question": QUESTION}),
                ("read_document", {"source_id": SECRET_SOURCE}),
                ("list_collections", {}),
            ):
                result = await client.call_tool(name, arguments)
                text = str(result.structured_content) + str(result.content)
                report.append(f"mcp {name:<18} {caller:<16} -> error={result.is_error}")
                if name == "read_document" and caller != "insider":
                    # the id it asked for comes back in the error, as for a missing one
                    missing = await client.call_tool(name, {"source_id": "nope.md"})
                    assert result.is_error and missing.is_error
                    text = text.replace(SECRET_SOURCE, "")
                    assert text == (str(missing.structured_content) + str(missing.content)).replace(
                        "nope.md", ""
                    )
                texts.append(text)
        seen = "\n".join(texts)
        if caller == "insider":
            assert SECRET_CODE in seen
        else:
            for leaked in LEAKS:
                assert leaked not in seen, (caller, leaked)
    print("\n".join(["", *report]))
