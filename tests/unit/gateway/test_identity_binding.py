"""The gateway binds the caller's identity for the upstream calls of a request: the
tenant, the end user of a verified token, admin as unrestricted; a bad token is a
401 before any upstream call; a client's own ``groundwire-*`` headers are ignored;
nothing outlives the request."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, cast

import httpx
import jwt
import pytest

from groundwire_core.identity import Identity, current_identity
from groundwire_gateway import models
from groundwire_gateway.app import create_app
from groundwire_gateway.settings import GatewaySettings
from groundwire_gateway.state import UpstreamApi
from tests.unit.gateway.conftest import FakeUpstream, SearchReply

SECRET = "app-and-gateway-share-this-secret-0123456789"
ADMIN_KEY = "operator-admin-key-0123456789"


class RecordingUpstream(FakeUpstream):
    """The fake upstream, noting the identity each search would carry."""

    def __init__(self) -> None:
        super().__init__()
        self.identities: list[Identity | None] = []

    async def search(self, body: models.SearchBody, collection: str) -> SearchReply:
        self.identities.append(current_identity())
        return await super().search(body, collection)


@pytest.fixture
async def gateway() -> AsyncIterator[tuple[httpx.AsyncClient, RecordingUpstream]]:
    upstream = RecordingUpstream()
    settings = GatewaySettings(user_token_secret=SECRET, admin_api_keys=f"ops:{ADMIN_KEY}")
    app = create_app(settings, cast(UpstreamApi, upstream))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        yield client, upstream


def _token(**over: Any) -> str:
    claims = {"sub": "bob", "groups": ["eng"], "aud": "groundwire", "exp": time.time() + 60}
    claims.update(over)
    return jwt.encode(claims, SECRET, algorithm="HS256")


async def _search(client: httpx.AsyncClient, **headers: str) -> httpx.Response:
    return await client.post("/v1/search", json={"query": "install"}, headers=headers)


async def test_anonymous_and_end_user_identities(
    gateway: tuple[httpx.AsyncClient, RecordingUpstream],
) -> None:
    client, upstream = gateway
    assert (await _search(client)).status_code == 200
    user = await _search(client, **{"x-groundwire-user-token": _token()})
    assert user.status_code == 200
    admin = await _search(client, authorization=f"Bearer {ADMIN_KEY}")
    assert admin.status_code == 200
    anonymous, bob, operator = upstream.identities
    assert anonymous == Identity(tenant="public")
    assert bob == Identity(tenant="public", user="bob", groups=frozenset({"eng"}))
    assert operator is not None and operator.unrestricted
    assert current_identity() is None, "nothing outlives the request"


@pytest.mark.parametrize(
    "token",
    [_token(exp=time.time() - 3600), _token(aud="elsewhere"), _token()[:-4] + "AAAA"],
    ids=["expired", "wrong-audience", "forged"],
)
async def test_bad_tokens_are_401_before_any_upstream_call(
    gateway: tuple[httpx.AsyncClient, RecordingUpstream], token: str
) -> None:
    client, upstream = gateway
    response = await _search(client, **{"x-groundwire-user-token": token})
    assert response.status_code == 401
    assert "user token" in response.json()["error"]["message"]
    assert "bob" not in response.text
    assert upstream.identities == []


async def test_client_identity_headers_are_ignored(
    gateway: tuple[httpx.AsyncClient, RecordingUpstream],
) -> None:
    client, upstream = gateway
    forged = {
        "groundwire-user": "root",
        "groundwire-groups": "eng,admins",
        "groundwire-unrestricted": "1",
        "groundwire-tenant": "acme",
    }
    assert (await _search(client, **forged)).status_code == 200
    assert upstream.identities == [Identity(tenant="public")]
