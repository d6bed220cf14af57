"""Several retriever replicas on one Qdrant server: the write lease and the shared state.

``VersionedStore`` keeps each collection's revision state (pending and retired
revisions, the current generation) in memory and hides points by it. With several
replicas the state must be shared and its writes serialised. Both live in one Qdrant
collection, ``groundwire.leases`` (user names cannot contain ``.``), one point per
collection name:

``{"collection", "holder", "token", "expires_at", "generation", "meta"}``

* **The lease.** A replica writes a collection only while it holds the point's lease.
  It takes it with one conditional update (``set_payload`` on a filter that matches
  the point only while ``token`` still has the value it read and the lease is free,
  expired or its own), which Qdrant applies atomically on the point, and reads the
  point back: exactly one of two racing replicas finds its own name there. Taking
  the lease from another holder increments ``token`` (the *fencing token*).
* **Fencing.** Every save of the revision state is itself a conditional update that
  matches only while ``token`` and ``holder`` are still the writer's. A writer that
  paused past its lease (a GC pause, a frozen VM) and lost it to another finds its
  save matched nothing and gets ``Unavailable``: its late write cannot undo the new
  holder's. The points it may still write land under its own pending revision, which
  its last successful save recorded as pending; the new holder keeps every pending
  revision it did not write hidden, so those points are never shown.
* **Bounded staleness.** Every replica re-reads the state every ``refresh_s`` and
  stops serving a collection (``Unavailable``) once its last successful read is
  older than ``stale_after_s``. A writer therefore waits ``grace_s`` (longer than
  ``stale_after_s``) after each change of what is hidden before it writes points
  under a newly hidden revision or deletes retired ones: by then every replica that
  still serves has seen the change (time-based, as in RCU with a grace period).

The lease's expiry is wall-clock time, so replicas' clocks may differ by at most
``CLOCK_SKEW_S`` (NTP keeps them far closer). A writer that dies leaves the lease
to expire after ``lease_s``; one that finishes releases it at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from qdrant_client import QdrantClient, models

from groundwire_core.errors import Unavailable
from groundwire_retriever.store.engine import StoredCollection

log = logging.getLogger(__name__)

STATE_COLLECTION = "groundwire.leases"
CLOCK_SKEW_S = 1.0
_POLL_S = 0.05
_NOBODY = "-"  # the holder of a lease never taken (an empty keyword is not matchable)
_STRONG = models.WriteOrdering.STRONG  # lease writes go through each shard's leader


def _default_holder() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class ReplicaPolicy:
    """How a replica shares a Qdrant server with others (see the module docstring)."""

    refresh_s: float = 1.0
    stale_after_s: float = 5.0
    grace_s: float = 7.0
    lease_s: float = 15.0
    holder: str = field(default_factory=_default_holder)

    def __post_init__(self) -> None:
        if not 0 < self.refresh_s < self.stale_after_s < self.grace_s:
            raise ValueError("replicas need 0 < refresh_s < stale_after_s < grace_s")
        if self.lease_s <= 0:
            raise ValueError("lease_s must be positive")


@dataclass(frozen=True)
class SharedState:
    """A collection's state as the last writer saved it."""

    generation: str
    meta: Mapping[str, Any]


class ClientSession(Protocol):
    def __call__(self, action: str) -> contextlib.AbstractContextManager[QdrantClient]: ...


class WriteLeases:
    """The lease, the fenced state saves and the state reads, on one Qdrant server.

    ``session`` yields the client with errors mapped (``QdrantEngine.session``);
    ``catalog`` lists the collections' current generations (``QdrantEngine.catalog``);
    ``replication_factor``: copies of the state collection on a cluster.
    """

    def __init__(
        self,
        session: ClientSession,
        policy: ReplicaPolicy,
        *,
        catalog: Callable[[], dict[str, StoredCollection]],
        replication_factor: int = 1,
    ) -> None:
        self._session = session
        self._replication_factor = replication_factor
        self.policy = policy
        self.catalog = catalog
        """Every collection's current generation and metadata, read now."""
        self._tokens: dict[str, int] = {}
        # threads of this replica share its lease: taken by the first, released by the last
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._holds: dict[str, int] = {}
        self._valid_until: dict[str, float] = {}  # monotonic; see ``held``

    def ensure(self) -> None:
        """Create the state collection unless it exists (replicas racing to create it
        may see one refusal: the collection is there either way)."""
        with self._session("create the replica state") as client:
            if not client.collection_exists(STATE_COLLECTION):
                with contextlib.suppress(Exception):
                    client.create_collection(
                        STATE_COLLECTION,
                        vectors_config={},
                        # on a cluster: readable and writable while a node is down
                        replication_factor=self._replication_factor,
                    )

    @contextlib.contextmanager
    def holding(self, name: str) -> Iterator[int]:
        """Hold the write lease of ``name`` for the block: waits up to ``lease_s`` (plus
        the clock-skew margin) for another holder to finish or expire. Yields the
        fencing token.

        Raises Unavailable when the lease stays taken."""
        with self._guard:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if not self._holds.get(name):
                self._acquire(name)
            self._holds[name] = self._holds.get(name, 0) + 1
            token = self._tokens[name]
        try:
            yield token
        finally:
            with lock:
                self._holds[name] -= 1
                if not self._holds[name]:
                    self._release(name, token)

    def held(self, name: str) -> bool:
        """Whether a thread of this replica holds the lease and it cannot have expired
        yet (counted from before the last take or renewal was sent): its own view is
        then the newest, no other replica can have written."""
        return bool(self._holds.get(name)) and time.monotonic() < self._valid_until.get(name, 0.0)

    def save(self, name: str, generation: str, meta: Mapping[str, Any]) -> None:
        """Save the state of ``name`` iff this replica still holds its lease (fenced).

        Raises Unavailable when another replica took the lease over."""
        token = self._tokens.get(name)
        if token is None:
            raise Unavailable(f"collection {name!r}: this replica holds no write lease")
        payload = {
            "generation": generation,
            "meta": dict(meta),
            "expires_at": time.time() + self.policy.lease_s,
        }
        sent = time.monotonic()
        with self._session(f"save the state of collection {name!r}") as client:
            self._set_if(client, name, token, self.policy.holder, payload)
            now = self._read(client, name)
        if now.get("token") != token or now.get("holder") != self.policy.holder:
            self._tokens.pop(name, None)
            raise Unavailable(
                f"collection {name!r}: this replica lost its write lease (token {token}) to "
                f"{now.get('holder')!r} (token {now.get('token')}); the write was refused, "
                "retry it"
            )
        self._valid_until[name] = sent + self.policy.lease_s

    def states(self) -> dict[str, SharedState]:
        """Every collection's last saved state, by name."""
        found: dict[str, SharedState] = {}
        offset: models.ExtendedPointId | None = None
        with self._session("read the replica state") as client:
            while True:
                records, offset = client.scroll(
                    STATE_COLLECTION, limit=256, offset=offset, with_payload=True
                )
                for record in records:
                    payload = record.payload or {}
                    meta = payload.get("meta")
                    if isinstance(meta, Mapping) and payload.get("generation"):
                        found[str(payload["collection"])] = SharedState(
                            str(payload["generation"]), meta
                        )
                if offset is None:
                    return found

    # ------------------------------------------------------------ internals

    @staticmethod
    def _point_id(name: str) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"groundwire-lease:{name}"))

    def _set_if(
        self, client: QdrantClient, name: str, token: int, holder: str, payload: dict[str, Any]
    ) -> None:
        """Set ``payload`` on the point of ``name`` iff its ``token`` and ``holder`` are
        still these: one conditional update, which Qdrant applies atomically."""
        match = models.Filter(
            must=[
                models.HasIdCondition(has_id=[self._point_id(name)]),
                models.FieldCondition(key="token", match=models.MatchValue(value=token)),
                models.FieldCondition(key="holder", match=models.MatchValue(value=holder)),
            ]
        )
        client.set_payload(
            STATE_COLLECTION,
            payload=payload,
            points=models.FilterSelector(filter=match),
            wait=True,
            ordering=_STRONG,
        )

    def _read(self, client: QdrantClient, name: str) -> dict[str, Any]:
        records = client.retrieve(STATE_COLLECTION, [self._point_id(name)], with_payload=True)
        return dict(records[0].payload or {}) if records else {}

    def _acquire(self, name: str) -> int:
        # long enough for a holder that died right after a renewal to expire
        deadline = time.monotonic() + self.policy.lease_s + 2 * CLOCK_SKEW_S
        with self._session(f"take the write lease of collection {name!r}") as client:
            blank = {"collection": name, "holder": _NOBODY, "token": 0, "expires_at": 0.0}
            client.upsert(
                STATE_COLLECTION,
                points=[models.PointStruct(id=self._point_id(name), vector={}, payload=blank)],
                update_mode=models.UpdateMode.INSERT_ONLY,  # only the first replica's lands
                wait=True,
                ordering=_STRONG,
            )
        while True:
            with self._session(f"take the write lease of collection {name!r}") as client:
                taken, holder = self._try_take(client, name)
            if taken is not None:
                return taken
            if time.monotonic() >= deadline:
                raise Unavailable(
                    f"collection {name!r} is being written by replica {holder!r}; "
                    "retry the write later"
                )
            time.sleep(_POLL_S)  # outside the session: local mode serialises calls

    def _try_take(self, client: QdrantClient, name: str) -> tuple[int | None, str]:
        """One conditional take: (the new token, "") or (None, the holder in the way)."""
        me = self.policy.holder
        seen = self._read(client, name)
        token, holder = int(seen.get("token", 0)), str(seen.get("holder", ""))
        free = float(seen.get("expires_at", 0.0)) + CLOCK_SKEW_S < time.time()
        if holder not in (me, _NOBODY) and not free:
            return None, holder
        # a takeover from another holder fences it; our own lease keeps its token
        new = token if holder == me and self._tokens.get(name) == token else token + 1
        lease = {"holder": me, "token": new, "expires_at": time.time() + self.policy.lease_s}
        sent = time.monotonic()
        self._set_if(client, name, token, holder, lease)
        now = self._read(client, name)
        if now.get("holder") != me or now.get("token") != new:
            return None, str(now.get("holder", ""))  # another replica won the race
        if holder not in (me, _NOBODY):
            log.warning(
                "collection %s: took the write lease over from %s (token %d)", name, holder, new
            )
        self._tokens[name] = new
        self._valid_until[name] = sent + self.policy.lease_s
        return new, ""

    def _release(self, name: str, token: int) -> None:
        """Expire the lease now, keeping the token (matches nothing once fenced)."""
        try:
            with self._session(f"release the write lease of collection {name!r}") as client:
                self._set_if(client, name, token, self.policy.holder, {"expires_at": 0.0})
        except Exception:  # it expires by itself
            log.exception("collection %s: could not release the write lease", name)
