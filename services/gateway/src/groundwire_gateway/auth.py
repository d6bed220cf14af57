"""API keys: who is calling (tenant, key id, role), whether they may, and the
rate-limit identity.

Two kinds of keys, one answer (:class:`Principal`):

- **static keys** from settings (``tenant:key`` lists, as before): an ``api_keys``
  key reads its tenant's collections; an ``admin_api_keys`` key is the *operator*:
  every route, every tenant. Only SHA-256 digests are kept after start-up, and a
  presented key is compared with every one in constant time (no early exit).
- **created keys** (``gwk_<id>_<secret>``, see :mod:`keystore`), each with a tenant, a
  role and optionally a set of collections: ``read`` = search, chat, completions,
  models, sources and document views; ``write`` = that plus ingest, sync and jobs of
  its tenant's collections; ``admin`` = everything of its tenant (collections, keys).

A request may also carry an end user's signed token (``X-Groundwire-User-Token``),
verified by :class:`end_users.EndUserVerifier`; the retriever filters documents by it.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, replace

from groundwire_core.identity import Identity
from groundwire_gateway.audit import Auditor
from groundwire_gateway.end_users import EndUser, EndUserVerifier, identity_for
from groundwire_gateway.errors import PermissionDenied, Unauthenticated
from groundwire_gateway.keystore import ROLES, KeyStore, Role, key_id_of
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
    """Role admin (a tenant admin, or the operator)."""
    key_id: str | None = None
    """A short public id of the key (never the key); None without a key."""
    role: Role | None = None
    """read, write or admin; None for an anonymous caller."""
    collections: frozenset[str] | None = None
    """The collections the key is limited to; None = all of its tenant's."""
    operator: bool = False
    """A static admin key from settings: every tenant's collections."""
    end_user: EndUser | None = None

    def may(self, need: Role) -> bool:
        """Whether the role covers ``need`` (admin > write > read; anonymous reads)."""
        have = ROLES.index(self.role) if self.role is not None else 0
        return have >= ROLES.index(need)

    def sees(self, collection: str, owner: str) -> bool:
        """Whether a collection owned by tenant ``owner`` exists for this caller: the
        operator sees all; anyone else its own tenant's and the ``public`` ones (those
        every caller sees, anonymous ones included), within its key's set."""
        if self.operator:
            return True
        if owner not in (self.tenant, PUBLIC_TENANT):
            return False
        return self.collections is None or collection in self.collections

    def covers(self, tenant: str, collections: frozenset[str] | None) -> bool:
        """Whether a key of ``tenant`` limited to ``collections`` (None: all of its
        tenant's) lies within this caller's own scope, so that it may mint, list or
        revoke it: the operator any; a tenant's key its own tenant's keys, and a key
        limited to some collections only keys limited to a subset of them (never an
        unscoped key)."""
        if self.operator:
            return True
        if tenant != self.tenant:
            return False
        if self.collections is None:
            return True
        return collections is not None and collections <= self.collections

    def owns(self, owner: str) -> bool:
        """Whether it may change a collection of tenant ``owner`` (write, drop): the
        operator any; a tenant's key only its own tenant's (``public`` ones are the
        operator's)."""
        return self.operator or (owner == self.tenant and self.tenant != PUBLIC_TENANT)

    def identity(self) -> Identity:
        """What this caller carries down the hops: the operator sees every document; a
        tenant's admin every document of its own tenant's collections (the retriever
        applies that rule with the owner it stores, ``Identity.sees_all``); anyone
        else, and a tenant's admin elsewhere, what its end user's entries reach."""
        found = identity_for(self.tenant, self.end_user, unrestricted=self.operator)
        return replace(found, admin=self.admin and not self.operator)

    def require(self, need: Role) -> None:
        """Raises PermissionDenied unless the role covers ``need``."""
        if not self.may(need):
            raise PermissionDenied(f"this API key may not do this (it needs the {need} role)")


class KeyRing:
    """Digests of the configured keys, by tenant."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._entries = [(tenant, _digest(key)) for tenant, key in pairs]

    def __bool__(self) -> bool:
        return bool(self._entries)

    def tenant_of(self, presented: str) -> str | None:
        """The tenant owning ``presented``, or None. Constant time in the key."""
        return self.tenant_of_digest(_digest(presented))

    def tenant_of_digest(self, digest: bytes) -> str | None:
        """The tenant owning the key of SHA-256 ``digest``, or None (constant time)."""
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

    def __init__(
        self,
        settings: GatewaySettings,
        store: KeyStore | None = None,
        audit: Auditor | None = None,
    ) -> None:
        # one verifier for the gateway's life: its key file is read once, on first use
        self._end_users = EndUserVerifier(settings)
        self.audit = audit or Auditor()
        self._admin = KeyRing(parse_tenant_keys(settings.admin_api_keys.get_secret_value()))
        self._public = KeyRing(parse_tenant_keys(settings.api_keys.get_secret_value()))
        self._require = settings.require_api_key
        self.store = store

    async def _known(self, key: str) -> Principal | None:
        """The principal of a valid key (static or created), or None."""
        digest = _digest(key)  # hashed once: both rings, the fingerprint, the store
        admin_tenant = self._admin.tenant_of_digest(digest)
        tenant = self._public.tenant_of_digest(digest) or admin_tenant
        fingerprint = digest.hex()[:12]
        if tenant is not None:
            operator = admin_tenant is not None
            return Principal(
                tenant,
                f"key:{tenant}:{fingerprint}",
                admin=operator,
                key_id=f"static:{fingerprint[:8]}",
                role="admin" if operator else "read",
                operator=operator,
            )
        if self.store is None or key_id_of(key) is None:
            return None
        record = await self.store.find(digest.hex())  # keystore.digest_of(key)
        if record is None:
            return None
        return Principal(
            record.tenant,
            f"key:{record.tenant}:{record.key_id}",
            admin=record.role == "admin",
            key_id=record.key_id,
            role=record.role,
            collections=record.collections,
        )

    async def public(
        self, key: str | None, client_ip: str, user_token: str | None = None
    ) -> Principal:
        """The caller of a public route. No key is fine unless keys are required.
        A key that is present must be valid (401) where keys exist at all; where none
        do, an unknown key is ignored (OpenAI clients always send one). Raises
        Unauthenticated, or Unavailable (redis) when the key store cannot answer."""
        found = await self._known(key) if key is not None else None
        if found is None:
            if key is not None and (self._public or self._require or self._created(key)):
                raise Unauthenticated("the API key is not valid")
            if self._require:
                raise Unauthenticated("an API key is required (Authorization: Bearer <key>)")
            found = Principal(PUBLIC_TENANT, f"ip:{client_ip}")
        if user_token:
            end_user = self._end_users.verify(user_token)
            return replace(found, end_user=end_user)
        return found

    def _created(self, key: str) -> bool:
        # a key in the created format is never "an OpenAI client's placeholder"
        return self.store is not None and key_id_of(key) is not None

    async def admin(self, key: str | None, client_ip: str, need: Role = "admin") -> Principal:
        """The caller of an admin route: a key whose role covers ``need`` (401 / 403).
        Raises Unauthenticated, PermissionDenied, or Unavailable (redis)."""
        if not self._admin and not (key is not None and self._created(key)):
            raise Unauthenticated(
                "the admin routes are disabled: no admin API keys are configured "
                "(GROUNDWIRE_GATEWAY_ADMIN_API_KEYS)"
            )
        if key is None:
            raise Unauthenticated("an admin API key is required (Authorization: Bearer <key>)")
        found = await self._known(key)
        if found is None:
            raise Unauthenticated("the API key is not valid")
        if not found.may(need):
            raise PermissionDenied("this API key may not use the admin routes")
        return found
