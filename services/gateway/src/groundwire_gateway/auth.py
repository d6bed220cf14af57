"""API keys: who is calling (tenant), whether they may, and the rate-limit identity.

Keys come from settings as ``tenant:key`` lists. Only SHA-256 digests are kept in
memory after start-up, and a presented key is compared with every configured one
in constant time (no early exit), so response timing says nothing about the keys.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from groundwire_gateway.errors import PermissionDenied, Unauthenticated
from groundwire_gateway.settings import GatewaySettings, parse_tenant_keys

PUBLIC_TENANT = "public"


@dataclass(frozen=True)
class Principal:
    """The caller of one request."""

    tenant: str
    """The key's tenant, or ``public`` for a caller without a key."""
    client: str
    """Rate-limit identity: ``key:<tenant>:<fingerprint>`` or ``ip:<address>``."""
    admin: bool = False


class KeyRing:
    """Digests of the configured keys, by tenant."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._entries = [(tenant, _digest(key)) for tenant, key in pairs]

    def __bool__(self) -> bool:
        return bool(self._entries)

    def tenant_of(self, presented: str) -> str | None:
        """The tenant owning ``presented``, or None. Constant time in the key."""
        digest = _digest(presented)
        found: str | None = None
        for tenant, expected in self._entries:
            if hmac.compare_digest(digest, expected):
                found = tenant
        return found


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def presented_key(authorization: str | None, x_api_key: str | None) -> str | None:
    """The key a request carries: ``Authorization: Bearer <key>`` or ``X-API-Key``."""
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    if x_api_key and x_api_key.strip():
        return x_api_key.strip()
    return None


class Authenticator:
    """Decides who a request is from, per route class (public or admin)."""

    def __init__(self, settings: GatewaySettings) -> None:
        self._admin = KeyRing(parse_tenant_keys(settings.admin_api_keys.get_secret_value()))
        self._public = KeyRing(parse_tenant_keys(settings.api_keys.get_secret_value()))
        self._require = settings.require_api_key

    def public(self, key: str | None, client_ip: str) -> Principal:
        """The caller of a public route. No key is fine unless keys are required.
        Where tenant keys are configured, a key that is present must be valid (401);
        where none are, an unknown key is ignored (OpenAI clients always send one)."""
        admin_tenant = self._admin.tenant_of(key) if key is not None else None
        tenant = (self._public.tenant_of(key) if key is not None else None) or admin_tenant
        if tenant is None:
            if key is not None and (self._public or self._require):
                raise Unauthenticated("the API key is not valid")
            if self._require:
                raise Unauthenticated("an API key is required (Authorization: Bearer <key>)")
            return Principal(PUBLIC_TENANT, f"ip:{client_ip}")
        assert key is not None
        return Principal(
            tenant, f"key:{tenant}:{_digest(key).hex()[:12]}", admin_tenant is not None
        )

    def admin(self, key: str | None, client_ip: str) -> Principal:
        """The caller of an admin route: an admin key or nothing (401 / 403)."""
        if not self._admin:
            raise Unauthenticated(
                "the admin routes are disabled: no admin API keys are configured "
                "(GROUNDWIRE_GATEWAY_ADMIN_API_KEYS)"
            )
        if key is None:
            raise Unauthenticated("an admin API key is required (Authorization: Bearer <key>)")
        tenant = self._admin.tenant_of(key)
        if tenant is None:
            if self._public.tenant_of(key) is not None:
                raise PermissionDenied("this API key may not use the admin routes")
            raise Unauthenticated("the API key is not valid")
        return Principal(tenant, f"key:{tenant}:{_digest(key).hex()[:12]}", admin=True)
