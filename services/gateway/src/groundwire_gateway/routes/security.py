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

from groundwire_gateway.auth import Principal, presented_key
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


def public_caller(state: GatewayState) -> Callable[[Request], Awaitable[Principal]]:
    async def caller(request: Request) -> Principal:
        key = presented_key(request.headers.get("authorization"), request.headers.get("x-api-key"))
        return state.auth.public(key, client_ip(request))

    return caller


def admin_caller(
    state: GatewayState,
) -> Callable[[Request, HTTPAuthorizationCredentials | None, str | None], Awaitable[Principal]]:
    async def caller(
        request: Request,
        bearer: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)] = None,
        api_key: Annotated[str | None, Security(API_KEY)] = None,
    ) -> Principal:
        key = presented_key(request.headers.get("authorization"), api_key)
        return state.auth.admin(key, client_ip(request))

    return caller
