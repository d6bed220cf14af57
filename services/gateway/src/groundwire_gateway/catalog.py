"""Known collections and their filterable fields, asked of the retriever and cached
briefly, so that the edge rejects an unknown collection or filter field before any
model work and without a retriever call per request.

The catalog is fed by the retriever's cheap listing (``ListCollections`` without
``counts``: names and filterable fields from the stored specs). The counts count and
facet every chunk (~0.75 s per collection at 100k chunks): they belong to the admin
listing, never to a request path.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

from groundwire_core.errors import InvalidInput, NotFound
from groundwire_gateway import models

ListCollections = Callable[[], Awaitable[list[models.CollectionOut]]]
"""The cheap listing: every collection with its filterable fields, no counts."""


class Viewer(Protocol):
    """Who asks (``auth.Principal``): which tenants' collections exist for it."""

    def sees(self, collection: str, owner: str) -> bool: ...


class _Entry:
    __slots__ = ("fields", "tenant")

    def __init__(self, fields: frozenset[str], tenant: str) -> None:
        self.fields = fields
        self.tenant = tenant


class Catalog:
    """A short-lived cache of the retriever's collections (names and filterable
    fields), from one listing. Concurrent misses share one fetch."""

    def __init__(
        self,
        list_collections: ListCollections,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._list = list_collections
        self._ttl = ttl_s
        self._clock = clock
        self._listing: tuple[float, Mapping[str, _Entry]] | None = None
        self._lock = asyncio.Lock()

    async def check(
        self,
        collection: str,
        filters: Sequence[models.FieldFilter] = (),
        *,
        reveal: bool = False,
        caller: Viewer | None = None,
    ) -> str:
        """The collection's owning tenant. Raises NotFound for an unknown collection —
        or one ``caller`` may not see: the same answer, so another tenant's names do
        not leak — and InvalidInput for a filter on a field the collection does not
        declare filterable; Unavailable (retriever) when neither the cache nor the
        retriever can answer.

        The NotFound names the known collections (those ``caller`` sees) only with
        ``reveal`` (a caller with an API key): an anonymous caller must not learn what
        else is served."""
        listing = await self._visible(caller)
        if collection not in listing:
            if not reveal:
                raise NotFound(f"no collection '{collection}'")
            known = ", ".join(sorted(listing)[:20]) or "none"
            raise NotFound(f"no collection '{collection}' (known: {known})")
        fields = listing[collection].fields
        for f in filters:
            if f.field not in fields:
                allowed = ", ".join(sorted(fields)) or "none"
                raise InvalidInput(
                    f"filters: '{f.field}' is not a filterable field of '{collection}' "
                    f"(filterable: {allowed})"
                )
        return listing[collection].tenant

    async def names(self, caller: Viewer | None = None) -> frozenset[str]:
        """The known collections (those ``caller`` sees, when given). Raises
        Unavailable (retriever) on a miss it cannot fill."""
        return frozenset(await self._visible(caller))

    async def _visible(self, caller: Viewer | None) -> Mapping[str, _Entry]:
        listing = await self._collections()
        if caller is None:
            return listing
        return {name: e for name, e in listing.items() if caller.sees(name, e.tenant)}

    async def _collections(self) -> Mapping[str, _Entry]:
        cached = self._listing
        if cached is not None and self._clock() - cached[0] < self._ttl:
            return cached[1]
        async with self._lock:
            cached = self._listing
            if cached is not None and self._clock() - cached[0] < self._ttl:
                return cached[1]
            listing = {
                c.name: _Entry(frozenset(c.filterable), c.tenant) for c in await self._list()
            }
            self._listing = (self._clock(), listing)
            return listing

    def invalidate(self) -> None:
        """Forgets everything (after this replica created or dropped a collection)."""
        self._listing = None
