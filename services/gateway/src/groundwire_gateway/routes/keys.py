"""Admin routes for scoped API keys: create (the key is in that answer only), list,
revoke. A tenant's admin key manages its own tenant's keys; the operator's static
admin keys manage every tenant's. Every call is an audit event."""

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from groundwire_core.errors import NotFound, Unavailable
from groundwire_gateway import models
from groundwire_gateway.auth import Principal
from groundwire_gateway.errors import PermissionDenied
from groundwire_gateway.keystore import KeyIdTaken, KeyStore, Role, StoredKey, new_key
from groundwire_gateway.routes import ADMIN_ERRORS
from groundwire_gateway.routes.security import admin_caller
from groundwire_gateway.state import GatewayState

KeyIdPath = Annotated[str, Path(pattern=r"^[0-9a-f]{8}$", description="The key's id.")]


class KeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Role = Field(
        description="read: search, chat, models, sources; write: also ingest, sync and "
        "jobs; admin: everything of the tenant (collections, keys)."
    )
    tenant: str | None = Field(
        None,
        pattern=models.TENANT_PATTERN,
        description="The key's tenant; default the caller's. Only the operator's admin "
        "keys may name another tenant.",
    )
    collections: list[Annotated[str, Field(pattern=models.COLLECTION_PATTERN)]] | None = Field(
        None,
        max_length=100,
        description="Collections the key is limited to (of its tenant); default all.",
    )
    name: str = Field("", max_length=100, description="A label for people (who it is for).")


class KeyOut(BaseModel):
    key_id: str = Field(description="The key's public id: listed, logged, revoked by.")
    tenant: str
    role: Role
    collections: list[str] | None
    name: str
    created_at: float = Field(description="Unix time.")


class KeyCreated(KeyOut):
    key: str = Field(description="The API key. Shown in this answer only: store it now.")


class KeyList(BaseModel):
    keys: list[KeyOut]


def _out(record: StoredKey) -> KeyOut:
    cols = sorted(record.collections) if record.collections is not None else None
    return KeyOut(
        key_id=record.key_id,
        tenant=record.tenant,
        role=record.role,
        collections=cols,
        name=record.name,
        created_at=record.created_at,
    )


def _store(state: GatewayState) -> KeyStore:
    if state.auth.store is None:
        raise Unavailable("this gateway has no key store", dependency="keys")
    return state.auth.store


def router(state: GatewayState) -> APIRouter:
    api = APIRouter(prefix="/v1/admin/keys", tags=["admin"], responses=ADMIN_ERRORS)
    caller = admin_caller(state)
    audit = state.auth.audit

    @api.post(
        "",
        status_code=201,
        response_model=KeyCreated,
        summary="Create an API key (the key is shown in this answer only).",
    )
    async def create_key(
        body: KeyCreate, admin: Annotated[Principal, Depends(caller)], request: Request
    ) -> KeyCreated:
        tenant = body.tenant or admin.tenant
        if tenant != admin.tenant and not admin.operator:
            audit.record(
                "key.create",
                tenant=admin.tenant,
                key_id=admin.key_id,
                route=request.url.path,
                outcome="permission_denied",
            )
            raise PermissionDenied("a tenant's admin key creates keys of its own tenant only")
        cols = body.collections  # each a collection name: KeyCreate checked the pattern
        scope = frozenset(cols) if cols is not None else None
        if not admin.covers(tenant, scope):
            audit.record(
                "key.create",
                tenant=admin.tenant,
                key_id=admin.key_id,
                route=request.url.path,
                outcome="permission_denied",
            )
            raise PermissionDenied(
                "a key limited to some collections creates keys limited to those only"
            )
        key, record = new_key(tenant, body.role, scope, body.name)
        try:
            await _store(state).add(record)
        except KeyIdTaken:  # 32 random bits collided with a stored key id: once more
            key, record = new_key(tenant, body.role, scope, body.name)
            await _store(state).add(record)
        audit.record(
            "key.create",
            tenant=admin.tenant,
            key_id=admin.key_id,
            route=request.url.path,
            outcome="ok",
            detail=f"created {record.key_id} ({record.role}) for tenant {tenant}",
        )
        return KeyCreated(**_out(record).model_dump(), key=key)

    @api.get("", response_model=KeyList, summary="List API keys (never the keys themselves).")
    async def list_keys(
        admin: Annotated[Principal, Depends(caller)],
        request: Request,
        tenant: Annotated[
            str | None,
            Query(pattern=models.TENANT_PATTERN, description="Only this tenant's (operator only)."),
        ] = None,
    ) -> KeyList:
        scope = tenant if admin.operator else admin.tenant
        listed = await _store(state).list(scope)
        records = [r for r in listed if admin.covers(r.tenant, r.collections)]
        audit.record(
            "key.list",
            tenant=admin.tenant,
            key_id=admin.key_id,
            route=request.url.path,
            outcome="ok",
        )
        return KeyList(keys=[_out(r) for r in records])

    @api.delete("/{key_id}", status_code=204, summary="Revoke an API key (at once).")
    async def revoke_key(
        key_id: KeyIdPath, admin: Annotated[Principal, Depends(caller)], request: Request
    ) -> Response:
        store = _store(state)
        removed: StoredKey | None = None
        if admin.collections is None or any(  # a scoped key revokes keys within its scope
            r.key_id == key_id and admin.covers(r.tenant, r.collections)
            for r in await store.list(admin.tenant)
        ):
            removed = await store.revoke(key_id, None if admin.operator else admin.tenant)
        audit.record(
            "key.revoke",
            tenant=admin.tenant,
            key_id=admin.key_id,
            route=request.url.path,
            outcome="ok" if removed else "not_found",
            detail=f"revoked {key_id}" if removed else "",
        )
        if removed is None:
            raise NotFound(f"no key '{key_id}'")  # another tenant's reads the same
        return Response(status_code=204)

    return api
