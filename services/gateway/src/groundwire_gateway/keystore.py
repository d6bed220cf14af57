"""Scoped API keys created through the admin API: stored hashed, behind one interface.

A key is ``gwk_<key id>_<secret>``: the key id (8 hex characters) is public — listed,
logged, revoked by — and the secret is 32 random bytes, shown once at creation. Only
the SHA-256 digest of the whole key is stored. A plain hash is enough here (no salt,
no slow KDF): those defend guessable passwords, and a 256-bit random secret cannot be
guessed from its digest; the digest is also the lookup index, so a request costs one
indexed read and response timing depends on nothing secret.

Two stores with the same behaviour: :class:`RedisKeyStore` where the gateway has a
Redis URL (every replica sees a key at once, and a revocation at once), else
:class:`SqliteKeyStore`, a local file (the embedded, one-replica default).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import secrets
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import redis.asyncio as aioredis

from groundwire_core.errors import Unavailable

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

    def to_json(self) -> str:
        cols = sorted(self.collections) if self.collections is not None else None
        return json.dumps(
            {
                "key_id": self.key_id,
                "tenant": self.tenant,
                "role": self.role,
                "collections": cols,
                "digest": self.digest,
                "created_at": self.created_at,
                "name": self.name,
            }
        )

    @classmethod
    def from_json(cls, raw: str | bytes) -> StoredKey:
        d = json.loads(raw)
        cols = d["collections"]
        return cls(
            d["key_id"],
            d["tenant"],
            d["role"],
            frozenset(cols) if cols is not None else None,
            d["digest"],
            float(d["created_at"]),
            d.get("name", ""),
        )


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
    """Where created keys live. Methods raise Unavailable (``keys``) when the store
    cannot answer."""

    async def add(self, record: StoredKey) -> None: ...

    async def find(self, digest: str) -> StoredKey | None:
        """The key with this digest, or None."""
        ...

    async def list(self, tenant: str | None = None) -> list[StoredKey]:
        """The keys of ``tenant`` (None = every tenant), oldest first."""
        ...

    async def revoke(self, key_id: str, tenant: str | None = None) -> StoredKey | None:
        """Removes the key (only if it belongs to ``tenant`` when given); the removed
        record, or None when there was none."""
        ...

    async def close(self) -> None: ...


class SqliteKeyStore:
    """Keys in a local SQLite file (``:memory:`` for a throw-away store). Reads are
    one indexed lookup, fast enough to run on the event loop."""

    def __init__(self, path: str) -> None:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS api_keys (digest TEXT PRIMARY KEY, key_id TEXT "
            "UNIQUE NOT NULL, tenant TEXT NOT NULL, record TEXT NOT NULL)"
        )
        if path != ":memory:":
            Path(path).chmod(0o600)  # digests only, but nobody else's business
        self._lock = asyncio.Lock()

    async def add(self, record: StoredKey) -> None:
        async with self._lock:
            self._db.execute(
                "INSERT INTO api_keys VALUES (?, ?, ?, ?)",
                (record.digest, record.key_id, record.tenant, record.to_json()),
            )

    async def find(self, digest: str) -> StoredKey | None:
        row = self._db.execute("SELECT record FROM api_keys WHERE digest = ?", (digest,)).fetchone()
        return StoredKey.from_json(row[0]) if row else None

    async def list(self, tenant: str | None = None) -> list[StoredKey]:
        rows = self._db.execute("SELECT record FROM api_keys").fetchall()
        keys = [StoredKey.from_json(r[0]) for r in rows]
        return sorted(
            (k for k in keys if tenant is None or k.tenant == tenant), key=lambda k: k.created_at
        )

    async def revoke(self, key_id: str, tenant: str | None = None) -> StoredKey | None:
        async with self._lock:
            row = self._db.execute(
                "SELECT record FROM api_keys WHERE key_id = ?", (key_id,)
            ).fetchone()
            if row is None:
                return None
            record = StoredKey.from_json(row[0])
            if tenant is not None and record.tenant != tenant:
                return None
            self._db.execute("DELETE FROM api_keys WHERE key_id = ?", (key_id,))
            return record

    async def close(self) -> None:
        self._db.close()


class RedisKeyStore:
    """Keys in Redis, shared by every replica: ``<prefix>:apikey:<digest>`` holds a
    record, ``<prefix>:apikeys`` maps key id -> digest for listing and revoking."""

    def __init__(self, url: str, prefix: str, timeout_s: float) -> None:
        self._redis = aioredis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, decode_responses=True
        )
        self._prefix = prefix

    def _record_key(self, digest: str) -> str:
        return f"{self._prefix}:apikey:{digest}"

    @property
    def _index(self) -> str:
        return f"{self._prefix}:apikeys"

    async def add(self, record: StoredKey) -> None:
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.set(self._record_key(record.digest), record.to_json())
                pipe.hset(self._index, record.key_id, record.digest)
                await pipe.execute()
        except (aioredis.RedisError, OSError) as error:
            raise Unavailable("the key store (redis) is unreachable", dependency="redis") from error

    async def find(self, digest: str) -> StoredKey | None:
        try:
            raw = await self._redis.get(self._record_key(digest))
        except (aioredis.RedisError, OSError) as error:
            raise Unavailable("the key store (redis) is unreachable", dependency="redis") from error
        return StoredKey.from_json(raw) if raw else None

    async def list(self, tenant: str | None = None) -> list[StoredKey]:
        try:
            digests = await self._redis.hvals(self._index)
            raws = await self._redis.mget([self._record_key(str(d)) for d in digests])
        except (aioredis.RedisError, OSError) as error:
            raise Unavailable("the key store (redis) is unreachable", dependency="redis") from error
        keys = [StoredKey.from_json(r) for r in raws if r]
        return sorted(
            (k for k in keys if tenant is None or k.tenant == tenant), key=lambda k: k.created_at
        )

    async def revoke(self, key_id: str, tenant: str | None = None) -> StoredKey | None:
        try:
            digest = await self._redis.hget(self._index, key_id)
            if digest is None:
                return None
            raw = await self._redis.get(self._record_key(str(digest)))
            record = StoredKey.from_json(raw) if raw else None
            if record is not None and tenant is not None and record.tenant != tenant:
                return None
            await self._redis.delete(self._record_key(str(digest)))
            await self._redis.hdel(self._index, key_id)
        except (aioredis.RedisError, OSError) as error:
            raise Unavailable("the key store (redis) is unreachable", dependency="redis") from error
        return record

    async def close(self) -> None:
        await self._redis.aclose()


def open_store(redis_url: str | None, keys_path: str, prefix: str, timeout_s: float) -> KeyStore:
    """Redis when the gateway has one (shared by replicas), else the SQLite file."""
    if redis_url:
        return RedisKeyStore(redis_url, prefix, timeout_s)
    return SqliteKeyStore(keys_path or ":memory:")
