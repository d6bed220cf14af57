"""Scoped API keys (#24): the store behaves alike on SQLite and PostgreSQL, keys
are never stored or logged in the clear (acceptance 4), the admin API creates, lists
and revokes them per tenant, roles gate the routes, and each admin action or refusal
is an audit event counted in a metric."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from groundwire_core.database import create_engine, session_factory, upgrade
from groundwire_gateway.db.base import MIGRATIONS
from groundwire_gateway.keystore import (
    DatabaseKeyStore,
    KeyStore,
    digest_of,
    key_id_of,
    new_key,
)
from tests.unit.gateway.conftest import ClientFactory, FakeUpstream

OPERATOR = "operator-secret-key-1"
SETTINGS = {"admin_api_keys": f"ops:{OPERATOR}"}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[tuple[KeyStore, AsyncEngine]]:
    """The key store on each database (SQLite file, PostgreSQL), and its engine."""
    engine = create_engine(database_url)
    await upgrade(engine, MIGRATIONS)
    s = DatabaseKeyStore(session_factory(engine), cache_s=0)
    yield s, engine
    await s.close()
    await engine.dispose()


async def stored_bytes(engine: AsyncEngine) -> bytes:
    """Every value of every row of the gateway's key and tenant tables."""
    out = b""
    async with engine.connect() as conn:
        for table in ("gateway_tenants", "gateway_api_keys"):
            for row in await conn.execute(text(f"SELECT * FROM {table}")):
                out += repr(tuple(row)).encode()
    return out


async def test_the_store_never_holds_a_key(store: tuple[KeyStore, AsyncEngine]) -> None:
    s, engine = store
    key_a, rec_a = new_key("acme", "read", frozenset({"handbook"}), "ci bot")
    key_b, rec_b = new_key("beta", "admin", None)
    await s.add(rec_a)
    await s.add(rec_b)
    assert key_id_of(key_a) == rec_a.key_id and key_a.startswith("gwk_")
    assert await s.find(digest_of(key_a)) == rec_a
    assert await s.find(digest_of(key_a + "x")) is None
    assert [k.key_id for k in await s.list("acme")] == [rec_a.key_id]
    assert {k.key_id for k in await s.list()} == {rec_a.key_id, rec_b.key_id}
    assert await s.revoke(rec_a.key_id, tenant="beta") is None, "another tenant's key"
    raw = await stored_bytes(engine)
    for key in (key_a, key_b):
        secret = key.rsplit("_", 1)[1]
        assert key.encode() not in raw and secret.encode() not in raw
    assert rec_a.digest.encode() in raw, "the digest is what is stored"
    assert await s.revoke(rec_a.key_id, tenant="acme") == rec_a
    assert b"acme" in raw, "the tenant has a row"
    assert await s.find(digest_of(key_a)) is None
    assert await s.revoke(rec_a.key_id) is None


async def test_keys_are_created_used_listed_and_revoked_without_leaving_the_answer(
    make_client: ClientFactory, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    upstream.add_collection("handbook", [], tenant="acme")
    caplog.set_level(logging.INFO)
    client = make_client(**SETTINGS)
    created = await client.post(
        "/v1/admin/keys", json={"tenant": "acme", "role": "admin"}, headers=bearer(OPERATOR)
    )
    assert created.status_code == 201, created.text
    acme_admin = created.json()["key"]
    assert created.json()["tenant"] == "acme" and created.json()["role"] == "admin"
    # the tenant admin makes a read key of its own tenant; not one of another tenant
    read = await client.post("/v1/admin/keys", json={"role": "read"}, headers=bearer(acme_admin))
    assert read.status_code == 201 and read.json()["tenant"] == "acme"
    reader = read.json()["key"]
    other = await client.post(
        "/v1/admin/keys", json={"role": "read", "tenant": "beta"}, headers=bearer(acme_admin)
    )
    assert other.status_code == 403
    # the read key searches its tenant's collection, may not ingest or manage keys
    search = await client.post(
        "/v1/search", json={"query": "q", "collection": "handbook"}, headers=bearer(reader)
    )
    assert search.status_code == 200, search.text
    ingest = await client.post(
        "/v1/admin/collections/handbook/documents",
        json={"documents": [{"source_id": "a.md", "content": "x"}]},
        headers=bearer(reader),
    )
    assert ingest.status_code == 403
    assert (await client.get("/v1/admin/keys", headers=bearer(reader))).status_code == 403
    # listings never carry a key
    listing = await client.get("/v1/admin/keys", headers=bearer(acme_admin))
    assert {k["role"] for k in listing.json()["keys"]} == {"admin", "read"}
    assert reader not in listing.text and acme_admin not in listing.text
    # revoked: refused at once
    key_id = read.json()["key_id"]
    assert (
        await client.delete(f"/v1/admin/keys/{key_id}", headers=bearer(acme_admin))
    ).status_code == 204
    again = await client.post(
        "/v1/search", json={"query": "q", "collection": "handbook"}, headers=bearer(reader)
    )
    assert again.status_code == 401
    # acceptance 4: no key in any log line (audit lines included)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for key in (acme_admin, reader, OPERATOR):
        assert key not in logged and key.rsplit("_", 1)[-1] not in logged


async def test_admin_actions_and_refusals_are_audit_events_with_a_metric(
    make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="groundwire.audit")
    client = make_client(**SETTINGS)
    made = await client.post("/v1/admin/keys", json={"role": "write"}, headers=bearer(OPERATOR))
    assert made.status_code == 201
    refused = await client.get("/v1/admin/keys", headers=bearer("gwk_00000000_" + "x" * 43))
    assert refused.status_code == 401
    events = [json.loads(r.getMessage()) for r in caplog.records if r.name == "groundwire.audit"]
    print(*events, sep="\n")
    create = next(e for e in events if e["event"] == "key.create")
    assert create["outcome"] == "ok" and create["tenant"] == "ops"
    assert create["key_id"].startswith("static:") and create["request_id"]
    assert set(create) >= {"event", "tenant", "key_id", "route", "outcome", "request_id"}
    denied = next(e for e in events if e["event"] == "denied")
    assert denied["outcome"] == "unauthenticated" and denied["route"] == "/v1/admin/keys"
    metrics = (await client.get("/metrics")).text
    assert 'groundwire_gateway_audit_events_total{event="key.create",outcome="ok"} 1.0' in metrics
    assert 'event="denied",outcome="unauthenticated"' in metrics


async def test_write_keys_change_only_their_own_tenants_collections(
    make_client: ClientFactory, upstream: FakeUpstream
) -> None:
    upstream.add_collection("acme-docs", [], tenant="acme")
    upstream.add_collection("beta-docs", [], tenant="beta")
    upstream.add_collection("docs", [])  # public: read by all, changed by the operator
    client = make_client(**SETTINGS)
    made = await client.post(
        "/v1/admin/keys", json={"role": "write", "tenant": "acme"}, headers=bearer(OPERATOR)
    )
    writer = made.json()["key"]
    doc = {"documents": [{"source_id": "a.md", "content": "x"}]}
    url = "/v1/admin/collections/{}/documents?wait=true"
    assert (await client.post(url.format("acme-docs"), json=doc, headers=bearer(writer))).is_success
    beta = await client.post(url.format("beta-docs"), json=doc, headers=bearer(writer))
    assert beta.status_code == 404 and "beta" not in beta.text.replace("beta-docs'", "")
    public = await client.post(url.format("docs"), json=doc, headers=bearer(writer))
    assert public.status_code == 403
    create = await client.post(
        url.format("new-one"), json={**doc, "create_collection": True}, headers=bearer(writer)
    )
    assert create.status_code == 403, "collections are created by admin keys, not by ingest"
    drop = await client.delete("/v1/admin/collections/acme-docs", headers=bearer(writer))
    assert drop.status_code == 403, "dropping needs the admin role"
