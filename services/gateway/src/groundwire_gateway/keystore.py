"""Scoped API keys created through the admin API: stored hashed, in the system of record.

A key is ``gwk_<key id>_<secret>``: the key id (8 hex characters) is public — listed,
logged, revoked by — and the secret is 32 random bytes, shown once at creation. Only
the SHA-256 digest of the whole key is stored. A plain hash is enough here (no salt,
no slow KDF): those defend guessable passwords, and a 256-bit random secret cannot be
guessed from its digest; the digest is also the lookup index, so a request costs one
indexed read and response timing depends on nothing secret.

The keys live in the gateway's tables (``db/keys.py``: PostgreSQL in compose and
Kubernetes, SQLite in the embedded default), so a Redis restart loses none, and every
replica reads the same rows. Each replica caches a found key for ``key_cache_s``
(default 2 s): a key revoked through one replica is refused by every other one within
that bound, and by the revoking one at once. A cache, not a notification: it needs no
channel between replicas that could be down, and the bound holds whatever happens to
one (a lost notification would leave a revoked key working indefinitely).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol, cast

from sqlalchemy.exc import SQLAlchemyError

from groundwire_core.database import SessionFactory
from groundwire_core.errors import Unavailable
from groundwire_gateway.db import keys as rows

Role = Literal["read", "write", "admin"]
ROLES: tuple[Role, ...] = ("read", "write", "admin")
KEY_PREFIX = "gwk_"
_KEY = re.compile(r"^gwk_([0-9a-f]{8})_[A-Za-z0-9_-]{20,}$")


@dataclass(frozen=True)
class StoredKey:
    """One created key as stored: everything but the key itself."""

    key_id: str
    tenant: str
    role: Role
    collections: frozenset[str] | None
    """The collections it may use; None = all of its tenant's."""
    digest: str
    """SHA-256 of the whole key, hex."""
    created_at: float
    name: str = ""


def digest_of(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def key_id_of(key: str) -> str | None:
    """The key id a presented key claims, or None when it is not a created key."""
    m = _KEY.match(key)
    return m.group(1) if m else None


def new_key(
    tenant: str, role: Role, collections: frozenset[str] | None, name: str = ""
) -> tuple[str, StoredKey]:
    """A fresh key and its stored record. The key is returned to be shown once."""
    key_id = secrets.token_hex(4)
    key = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    return key, StoredKey(key_id, tenant, role, collections, digest_of(key), time.time(), name)


class KeyStore(Protocol):
    """Where created keys live. Methods raise Unavailable (``database``) when the store
    cannot answer."""

    async def add(self, record: StoredKey) -> None: ...

    async def find(self, digest: str) -> StoredKey | None:
        """The key with this digest, or None."""
        ...

    async def list(self, tenant: str | None = None) -> list[StoredKey]:
        """The keys of ``tenant`` (None = every tenant), oldest first."""
        ...

    async def revoke(self, key_id: str, tenant: str | None = None) -> StoredKey | None:
        """Revokes the key (only if it belongs to ``tenant`` when given); the revoked
        record, or None when there was no such live key."""
        ...

    async def close(self) -> None: ...


class KeyIdTaken(Exception):
    """Another key has this key id already (32 random bits: rare): make another key."""


_DB_ERRORS = (SQLAlchemyError, OSError)


def _unavailable(error: BaseException) -> Unavailable:
    return Unavailable(
        f"the key store (the system of record) is unreachable ({type(error).__name__})",
        dependency="database",
    )


def _stored(record: rows.KeyRecord) -> StoredKey:
    return StoredKey(
        record.key_id,
        record.tenant,
        cast(Role, record.role),
        record.collections,
        record.digest,
        record.created_at,
        record.name,
    )


class DatabaseKeyStore:
    """Keys in the system of record, with a per-replica cache of found keys.

    ``cache_s``: how long a found key is answered from memory (0 = every request
    reads the database). Unknown digests are never cached, so the cache holds live
    keys only and a new key works on every replica at once. At most ``cache_size``
    entries (the oldest is dropped)."""

    def __init__(
        self,
        sessions: SessionFactory,
        cache_s: float = 2.0,
        cache_size: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sessions = sessions
        self._cache_s = cache_s
        self._cache_size = cache_size
        self._clock = clock
        self._cache: dict[str, tuple[float, StoredKey]] = {}

    async def add(self, record: StoredKey) -> None:
        """Stores ``record`` (and its tenant's row). Raises KeyIdTaken or Unavailable."""
        try:
            async with self._sessions() as session, session.begin():
                await rows.add_key(
                    session,
                    rows.KeyRecord(
                        record.key_id,
                        record.tenant,
                        record.role,
                        record.collections,
                        record.digest,
                        record.created_at,
                        record.name,
                    ),
                )
        except rows.KeyIdTaken as taken:
            raise KeyIdTaken(record.key_id) from taken
        except _DB_ERRORS as error:
            raise _unavailable(error) from error

    async def find(self, digest: str) -> StoredKey | None:
        now = self._clock()
        cached = self._cache.get(digest)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            async with self._sessions() as session:
                found = await rows.find_key(session, digest)
        except _DB_ERRORS as error:
            raise _unavailable(error) from error
        if found is None:
            self._cache.pop(digest, None)
            return None
        record = _stored(found)
        if self._cache_s > 0:
            if len(self._cache) >= self._cache_size:
                self._cache.pop(next(iter(self._cache)))
            self._cache[digest] = (now + self._cache_s, record)
        return record

    async def list(self, tenant: str | None = None) -> list[StoredKey]:
        try:
            async with self._sessions() as session:
                return [_stored(r) for r in await rows.list_keys(session, tenant)]
        except _DB_ERRORS as error:
            raise _unavailable(error) from error

    async def revoke(self, key_id: str, tenant: str | None = None) -> StoredKey | None:
        try:
            async with self._sessions() as session, session.begin():
                revoked = await rows.revoke_key(session, key_id, tenant)
        except _DB_ERRORS as error:
            raise _unavailable(error) from error
        if revoked is None:
            return None
        self._cache.pop(revoked.digest, None)  # this replica refuses it at once
        return _stored(revoked)

    async def close(self) -> None:
        self._cache.clear()
