"""Route dependencies that identify the caller, and how the OpenAPI document shows them.

Public routes take an optional key (``security: [{}, bearer, apiKey]`` in OpenAPI);
admin routes require an admin key. Both read ``Authorization: Bearer <key>`` or
``X-API-Key``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from groundwire_core.errors import NotFound
from groundwire_core.identity import bind_identity
from groundwire_gateway.auth import Principal, presented_key
from groundwire_gateway.end_users import USER_TOKEN_HEADER
from groundwire_gateway.errors import PermissionDenied
from groundwire_gateway.keystore import Role
from groundwire_gateway.state import GatewayState

BEARER = HTTPBearer(
    auto_error=False, scheme_name="bearer", description="Authorization: Bearer <API key>"
)
API_KEY = APIKeyHeader(
    name="X-API-Key", auto_error=False, scheme_name="apiKey", description="The API key."
)

# Optional authentication, as OpenAPI spells it: no key, or either scheme.
OPTIONAL_AUTH: dict[str, Any] = {"security": [{}, {"bearer": []}, {"apiKey": []}]}


def client_ip(request: Request) -> str:
    return request.client.host if request.client else "unknown"


async def public_principal(state: GatewayState, request: Request) -> Principal:
    """The caller of a public route (the API's and the MCP server's), kept on
    ``request.state.principal`` for the audit of a later refusal. Raises
    Unauthenticated, or Unavailable (redis) when the key store cannot answer."""
    key = presented_key(request.headers.get("authorization"), request.headers.get("x-api-key"))
    principal = await state.auth.public(
        key, client_ip(request), request.headers.get(USER_TOKEN_HEADER)
    )
    request.state.principal = principal
    bind_identity(principal.identity())  # travels down every gRPC hop of this request
    return principal


def public_caller(state: GatewayState) -> Callable[[Request], Awaitable[Principal]]:
    async def caller(request: Request) -> Principal:
        return await public_principal(state, request)

    return caller


def admin_caller(
    state: GatewayState, need: Role = "admin"
) -> Callable[[Request, HTTPAuthorizationCredentials | None, str | None], Awaitable[Principal]]:
    """The dependency of an admin route: a key whose role covers ``need`` (``write``:
    ingest, sync, jobs; ``admin``: collections, keys)."""

    async def caller(
        request: Request,
        bearer: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)] = None,
        api_key: Annotated[str | None, Security(API_KEY)] = None,
    ) -> Principal:
        key = presented_key(request.headers.get("authorization"), api_key)
        principal = await state.auth.admin(key, client_ip(request), need)
        request.state.principal = principal
        bind_identity(principal.identity())
        return principal

    return caller


async def writable(
    state: GatewayState, principal: Principal, name: str, *, create: bool = False
) -> None:
    """Whether ``principal`` may change collection ``name``: the operator any; another
    key only its own tenant's. Raises NotFound for a collection it does not see (as a
    missing one), PermissionDenied for one it sees but does not own, or — ``create``,
    the call would make a missing collection — for one it may not create that way."""
    if principal.operator:
        return
    try:
        owner = await state.catalog.check(name, caller=principal)
    except NotFound:
        if create:
            raise PermissionDenied(
                "create the collection first (POST /v1/admin/collections): ingest and sync "
                "create collections with the operator's keys only"
            ) from None
        raise
    if not principal.owns(owner):
        raise PermissionDenied("this collection is not your tenant's: it may be read only")
