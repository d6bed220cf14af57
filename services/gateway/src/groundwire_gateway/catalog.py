"""Known collections and their filterable fields, asked of the retriever and cached
briefly, so that the edge rejects an unknown collection or filter field before any
model work and without a retriever call per request."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

from groundwire_core.errors import InvalidInput, NotFound
from groundwire_gateway import models

ListCollections = Callable[[], Awaitable[list[models.CollectionOut]]]
DescribeCollection = Callable[[str], Awaitable[models.CollectionOut]]


class Catalog:
    """A short-lived cache of the retriever's collections (names and filterable
    fields). Concurrent misses share one fetch."""

    def __init__(
        self,
        list_collections: ListCollections,
        describe_collection: DescribeCollection,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._list = list_collections
        self._describe = describe_collection
        self._ttl = ttl_s
        self._clock = clock
        self._names: tuple[float, frozenset[str]] | None = None
        self._fields: dict[str, tuple[float, frozenset[str]]] = {}
        self._lock = asyncio.Lock()

    async def check(
        self, collection: str, filters: Sequence[models.FieldFilter] = (), *, reveal: bool = False
    ) -> None:
        """Raises NotFound for an unknown collection and InvalidInput for a filter on
        a field the collection does not declare filterable; Unavailable (retriever)
        when neither the cache nor the retriever can answer.

        The NotFound names the known collections only with ``reveal`` (a caller with
        an API key): an anonymous caller must not learn what else is served."""
        names = await self.names()
        if collection not in names:
            if not reveal:
                raise NotFound(f"no collection '{collection}'")
            known = ", ".join(sorted(names)[:20]) or "none"
            raise NotFound(f"no collection '{collection}' (known: {known})")
        if not filters:
            return
        fields = await self.fields(collection)
        for f in filters:
            if f.field not in fields:
                allowed = ", ".join(sorted(fields)) or "none"
                raise InvalidInput(
                    f"filters: '{f.field}' is not a filterable field of '{collection}' "
                    f"(filterable: {allowed})"
                )

    async def names(self) -> frozenset[str]:
        cached = self._names
        if cached is not None and self._clock() - cached[0] < self._ttl:
            return cached[1]
        async with self._lock:
            cached = self._names
            if cached is not None and self._clock() - cached[0] < self._ttl:
                return cached[1]
            names = frozenset(c.name for c in await self._list())
            self._names = (self._clock(), names)
            return names

    async def fields(self, collection: str) -> frozenset[str]:
        cached = self._fields.get(collection)
        if cached is not None and self._clock() - cached[0] < self._ttl:
            return cached[1]
        async with self._lock:
            cached = self._fields.get(collection)
            if cached is not None and self._clock() - cached[0] < self._ttl:
                return cached[1]
            fields = frozenset((await self._describe(collection)).filterable)
            self._fields[collection] = (self._clock(), fields)
            return fields

    def invalidate(self) -> None:
        """Forgets everything (after this replica created or dropped a collection)."""
        self._names = None
        self._fields.clear()
