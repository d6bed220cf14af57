"""Access lists: what a valid one is, where a document's comes from (request, front
matter, collection default), and what a caller may see."""

from __future__ import annotations

import pytest

from groundwire_core.errors import InvalidInput, PermissionDenied
from groundwire_core.identity import Identity, identity_scope
from groundwire_retriever.access import caller_access, parse_access
from groundwire_retriever.domain import CollectionSpec, SearchPath, SearchQuery, SearchResult
from groundwire_retriever.ingest.pipeline import ChunkingPolicy, DocumentInput, prepare_chunks
from groundwire_retriever.service import RetrieverCore

OPEN = CollectionSpec(name="open", dense_dims=4)
RESTRICTED = CollectionSpec(name="closed", dense_dims=4, restricted=True)

NOTES = b"""---
title: Notes
access: [group:eng, user:carol]
---

# Notes

Engineering only: the rollback runbook.
"""


def test_parse_access_normalises_and_rejects_unknown_entries() -> None:
    assert parse_access([" public", "group:eng", "group:eng", ""], "x") == (
        "public",
        "group:eng",
    )
    for bad in ("everyone", "group:", "role:admin", "user: "):
        with pytest.raises(InvalidInput, match="access entry"):
            parse_access([bad], "x")


def test_caller_access_per_identity() -> None:
    assert caller_access(OPEN, None) == ("public",)
    assert caller_access(OPEN, Identity(tenant="acme")) == ("public",)
    assert caller_access(OPEN, Identity("acme", "bob", frozenset({"ops", "eng"}))) == (
        "public",
        "user:bob",
        "group:eng",
        "group:ops",
    )
    assert caller_access(OPEN, Identity("acme", unrestricted=True)) is None
    assert caller_access(RESTRICTED, Identity("acme", unrestricted=True)) is None
    assert caller_access(RESTRICTED, Identity("acme", "bob")) == ("public", "user:bob")


@pytest.mark.parametrize("identity", [None, Identity(tenant="acme")])
def test_restricted_collection_fails_closed_without_an_end_user(
    identity: Identity | None,
) -> None:
    with pytest.raises(PermissionDenied) as refused:
        caller_access(RESTRICTED, identity)
    assert "closed" not in refused.value.message  # names nothing of the collection's


async def test_front_matter_access_and_request_override() -> None:
    policy = ChunkingPolicy(min_tokens=5, max_tokens=50, overlap_tokens=0)
    from_front_matter = await prepare_chunks(
        DocumentInput(source_id="notes.md", content=NOTES, format="markdown"), policy
    )
    assert {c.access for c in from_front_matter} == {("group:eng", "user:carol")}
    from_request = await prepare_chunks(
        DocumentInput(source_id="notes.md", content=NOTES, format="markdown", access=("public",)),
        policy,
    )
    assert {c.access for c in from_request} == {("public",)}
    # the access list is part of the content hash: changing only it rewrites the source
    assert from_request[0].content_hash != from_front_matter[0].content_hash
    plain = await prepare_chunks(
        DocumentInput(
            source_id="plain.md", content=b"# Plain\n\nNothing secret.", format="markdown"
        ),
        policy,
    )
    assert {c.access for c in plain} == {()}  # the collection default applies when stored


async def test_malformed_front_matter_access_is_refused() -> None:
    bad = NOTES.replace(b"group:eng", b"team:eng")
    with pytest.raises(InvalidInput, match="access entry"):
        await prepare_chunks(
            DocumentInput(source_id="notes.md", content=bad, format="markdown"),
            ChunkingPolicy(min_tokens=5, max_tokens=50, overlap_tokens=0),
        )


class SpecStore:
    """What ``RetrieverCore.search`` touches of a store, recording the queries."""

    engine = "edge"

    def __init__(self, *specs: CollectionSpec) -> None:
        self.specs = list(specs)
        self.queries: list[SearchQuery] = []

    def list_collections(self) -> list[CollectionSpec]:
        return self.specs

    def search(self, name: str, query: SearchQuery) -> SearchResult:
        self.queries.append(query)
        return SearchResult(hits=(), paths=())


async def test_the_service_sets_the_filter_from_the_identity_whatever_the_query_says() -> None:
    store = SpecStore(OPEN, RESTRICTED)
    core = RetrieverCore(store, embedder=None)  # type: ignore[arg-type]
    sneaky = SearchQuery(text="runbook", paths=frozenset({SearchPath.BM25}), access=None)
    with identity_scope(Identity("acme", "carol", frozenset({"sales"}))):
        await core.search("open", sneaky)
    await core.search("open", sneaky)  # no identity at all: public only
    assert [q.access for q in store.queries] == [
        ("public", "user:carol", "group:sales"),
        ("public",),
    ]
    with pytest.raises(PermissionDenied):
        await core.search("closed", sneaky)
    assert len(store.queries) == 2, "refused before the store was asked"
