"""API keys: parsing from settings, tenants, admin vs public, and secrets never shown."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from groundwire_gateway.auth import Authenticator, KeyRing, presented_key
from groundwire_gateway.errors import PermissionDenied, Unauthenticated
from groundwire_gateway.settings import GatewaySettings, parse_tenant_keys

ADMIN = "ops:admin-secret-1"
PUBLIC = "acme:acme-secret-1,acme:acme-secret-2,beta:beta-secret-1"


def test_key_lists_parse() -> None:
    assert parse_tenant_keys(" acme:k-123456 , beta:k-abcdefg,") == [
        ("acme", "k-123456"),
        ("beta", "k-abcdefg"),
    ]
    assert parse_tenant_keys("") == []


@pytest.mark.parametrize(
    "raw", ["nocolon", "bad tenant:k-123456", "acme:short", "a:k-123456,b:k-123456", "a:k 123456"]
)
def test_malformed_key_lists_are_refused_without_echoing_them(raw: str) -> None:
    with pytest.raises(ValidationError) as caught:
        GatewaySettings(api_keys=raw)
    assert "k-123456" not in str(caught.value) and "short" not in str(caught.value)


def test_settings_never_show_keys() -> None:
    s = GatewaySettings(admin_api_keys=ADMIN, api_keys=PUBLIC)
    assert "admin-secret" not in repr(s) and "acme-secret" not in str(s.model_dump())


def test_keyring_finds_the_tenant() -> None:
    ring = KeyRing(parse_tenant_keys(PUBLIC))
    assert ring.tenant_of("acme-secret-2") == "acme"
    assert ring.tenant_of("beta-secret-1") == "beta"
    assert ring.tenant_of("acme-secret-3") is None
    assert ring.tenant_of("") is None
    assert not KeyRing([])


@pytest.mark.parametrize(
    ("authorization", "x_api_key", "key"),
    [
        ("Bearer abc", None, "abc"),
        ("bearer  abc ", None, "abc"),
        ("Basic dXNlcg==", None, None),
        ("Basic dXNlcg==", "k", "k"),
        (None, "k2", "k2"),
        ("Bearer ", "  ", None),
        (None, None, None),
    ],
)
def test_presented_key(authorization: str | None, x_api_key: str | None, key: str | None) -> None:
    assert presented_key(authorization, x_api_key) == key


async def test_public_routes() -> None:
    auth = Authenticator(GatewaySettings(admin_api_keys=ADMIN, api_keys=PUBLIC))
    anonymous = await auth.public(None, "10.0.0.1")
    assert (anonymous.tenant, anonymous.client, anonymous.admin) == ("public", "ip:10.0.0.1", False)
    one = await auth.public("acme-secret-1", "10.0.0.1")
    two = await auth.public("acme-secret-2", "10.0.0.2")
    assert one.tenant == two.tenant == "acme"
    assert one.client != two.client and one.client.startswith("key:acme:")
    assert "secret" not in one.client
    assert (await auth.public("admin-secret-1", "10.0.0.1")).admin
    with pytest.raises(Unauthenticated):
        await auth.public("nope-nope-nope", "10.0.0.1")


async def test_unknown_keys_are_ignored_where_no_tenant_keys_exist() -> None:
    # OpenAI clients always send a key; a keyless deployment must not refuse them
    auth = Authenticator(GatewaySettings(admin_api_keys=ADMIN))
    caller = await auth.public("sk-anything-at-all", "10.0.0.1")
    assert (caller.tenant, caller.client) == ("public", "ip:10.0.0.1")
    assert (await auth.public("admin-secret-1", "10.0.0.1")).tenant == "ops"
    strict = Authenticator(GatewaySettings(admin_api_keys=ADMIN, require_api_key=True))
    with pytest.raises(Unauthenticated):
        await strict.public("sk-anything-at-all", "10.0.0.1")


async def test_required_keys() -> None:
    auth = Authenticator(GatewaySettings(api_keys=PUBLIC, require_api_key=True))
    with pytest.raises(Unauthenticated):
        await auth.public(None, "10.0.0.1")
    assert (await auth.public("beta-secret-1", "10.0.0.1")).tenant == "beta"


async def test_admin_routes() -> None:
    auth = Authenticator(GatewaySettings(admin_api_keys=ADMIN, api_keys=PUBLIC))
    assert (await auth.admin("admin-secret-1", "10.0.0.1")).tenant == "ops"
    with pytest.raises(PermissionDenied):
        await auth.admin("acme-secret-1", "10.0.0.1")
    with pytest.raises(Unauthenticated):
        await auth.admin(None, "10.0.0.1")
    with pytest.raises(Unauthenticated):
        await auth.admin("nope-nope-nope", "10.0.0.1")


async def test_admin_routes_are_off_without_admin_keys() -> None:
    auth = Authenticator(GatewaySettings(api_keys=PUBLIC))
    with pytest.raises(Unauthenticated) as caught:
        await auth.admin("acme-secret-1", "10.0.0.1")
    assert "GROUNDWIRE_GATEWAY_ADMIN_API_KEYS" in caught.value.message
