"""The collection catalog: a short cache in front of the retriever's cheap listing,
one fetch for concurrent misses, and precise rejections."""

from __future__ import annotations

import asyncio

import pytest

from groundwire_core.errors import InvalidInput, NotFound, Unavailable
from groundwire_gateway import models
from groundwire_gateway.catalog import Catalog


class Retriever:
    def __init__(self) -> None:
        self.lists = 0
        self.down = False
        self.fields = {"docs": ["source_id", "doc_type", "title", "lang"]}

    def _collection(self, name: str) -> models.CollectionOut:
        return models.CollectionOut(
            name=name,
            dense_dims=8,
            learned_sparse=False,
            bm25=True,
            filterable=self.fields[name],
            embedder_model="m",
            chunks=0,
            sources=0,
        )

    async def list_collections(self) -> list[models.CollectionOut]:
        self.lists += 1
        await asyncio.sleep(0.01)
        if self.down:
            raise Unavailable("retriever is unavailable", dependency="retriever")
        return [self._collection(n) for n in self.fields]


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_concurrent_misses_share_one_fetch_and_the_cache_expires() -> None:
    retriever, clock = Retriever(), Clock()
    catalog = Catalog(retriever.list_collections, ttl_s=5, clock=clock)
    await asyncio.gather(*(catalog.check("docs") for _ in range(50)))
    assert retriever.lists == 1
    clock.now = 4.9
    await catalog.check("docs")
    assert retriever.lists == 1
    clock.now = 5.1
    await catalog.check("docs")
    assert retriever.lists == 2


async def test_rejections_name_what_exists_only_when_revealed() -> None:
    retriever = Retriever()
    catalog = Catalog(retriever.list_collections, ttl_s=5)
    with pytest.raises(NotFound, match=r"no collection 'nope' \(known: docs\)"):
        await catalog.check("nope", reveal=True)
    with pytest.raises(NotFound) as hidden:  # an anonymous caller: no enumeration
        await catalog.check("nope")
    assert hidden.value.message == "no collection 'nope'"
    with pytest.raises(InvalidInput, match="'colour' is not a filterable field of 'docs'"):
        await catalog.check("docs", [models.FieldFilter(field="colour", any_of=["x"])])
    await catalog.check("docs", [models.FieldFilter(field="lang", any_of=["en"])])
    await catalog.check("docs", [models.FieldFilter(field="lang", any_of=["de"])])
    # names and filterable fields come from one cached listing: one call in all
    assert retriever.lists == 1


async def test_invalidate_and_retriever_errors() -> None:
    retriever = Retriever()
    catalog = Catalog(retriever.list_collections, ttl_s=60)
    await catalog.check("docs")
    retriever.fields["new"] = ["source_id"]
    with pytest.raises(NotFound):
        await catalog.check("new")
    catalog.invalidate()
    await catalog.check("new")
    catalog.invalidate()
    retriever.down = True
    with pytest.raises(Unavailable):
        await catalog.check("docs")
