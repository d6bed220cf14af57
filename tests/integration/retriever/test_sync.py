"""Sync through the real retriever's Sync RPC, with the real MiniLM embedder.

A folder is synced, then files are added, edited, renamed and deleted and it is synced
again: the delta is exactly that, deleted files' chunks are gone from search, and a
reader loop during the second sync never sees a source mixed, partial or missing (a
renamed file is findable under one id or the other at every moment; deletions come
after the new and changed files are in). A small site on 127.0.0.1 (links out of the
prefix, a robots.txt disallow, redirects in and out of scope, a 404) is crawled twice:
the crawl ingests exactly the allowed pages and the second deletes the removed ones.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import grpc
import httpx
import pytest

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_cli import sync as sync_cli
from groundwire_cli.__main__ import build_parser
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.server import serving
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_gateway.app import create_app
from groundwire_gateway.settings import GatewaySettings
from groundwire_gateway.upstream import Upstream
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings
from tests.site_server import Reply, Site, serve

COLLECTION = "synced"
MARKER = re.compile(r"\bmk(\d+)\b")
Stub = retriever_pb2_grpc.RetrieverServiceStub


def manual(name: str, gen: int, parts: int) -> str:
    """A Markdown file whose every section carries the marker ``mk<gen>``."""
    sections = "\n\n".join(
        f"## Part {i}\n\nzebra mk{gen} crossing {i} of {name}: the keeper feeds the zebra "
        f"herd at dawn and writes edition {gen} of {name} in the ledger."
        for i in range(parts)
    )
    return f"# Zebra manual {name}\n\n{sections}\n"


@pytest.fixture
async def embedder(minilm_dir: Path) -> AsyncIterator[str]:
    settings = EmbedderSettings(port=0, model_dir=minilm_dir)
    async with serving(EmbedderService(settings), settings) as port:
        yield f"127.0.0.1:{port}"


@asynccontextmanager
async def retriever_at(
    embedder: str, data: Path, roots: tuple[Path, ...] = ()
) -> AsyncIterator[tuple[Stub, str]]:
    """A retriever on a free port: a stub on it, and its address."""
    settings = RetrieverSettings(
        port=0,
        data_path=data,
        embedder_addr=embedder,
        chunk_min_tokens=16,
        chunk_max_tokens=48,
        chunk_overlap_tokens=0,
        sync_roots=roots,
        outbound_allowed_networks="127.0.0.1/32",  # the test site is on loopback
    )
    async with AsyncExitStack() as stack:
        port = await stack.enter_async_context(serving(RetrieverService(settings), settings))
        channel = await stack.enter_async_context(create_channel(f"127.0.0.1:{port}"))
        yield retriever_pb2_grpc.RetrieverServiceStub(channel), f"127.0.0.1:{port}"


@asynccontextmanager
async def retriever(embedder: str, data: Path, roots: tuple[Path, ...] = ()) -> AsyncIterator[Stub]:
    async with retriever_at(embedder, data, roots) as (stub, _):
        yield stub


async def sync(
    stub: Stub, definition: retriever_pb2.SyncDefinition, *, dry_run: bool = False
) -> tuple[retriever_pb2.SyncReport, list[retriever_pb2.SyncProgress]]:
    request = retriever_pb2.SyncRequest(
        collection=COLLECTION, definition=definition, dry_run=dry_run
    )
    events = [e async for e in stub.Sync(request)]
    assert events[-1].HasField("report") and all(e.HasField("progress") for e in events[:-1])
    return events[-1].report, [e.progress for e in events[:-1]]


async def markers_by_source(stub: Stub) -> dict[str, list[int]]:
    reply = await stub.Search(
        retriever_pb2.SearchRequest(
            collection=COLLECTION,
            text="zebra",
            paths=[retriever_pb2.SEARCH_PATH_BM25],
            limit=500,
            path_limit=500,
        )
    )
    found: dict[str, list[int]] = {}
    for hit in reply.hits:
        markers = {int(m) for m in MARKER.findall(hit.chunk.text)}
        assert len(markers) == 1, hit.chunk.text
        found.setdefault(hit.chunk.source_id, []).append(markers.pop())
    return found


def delta_of(report: retriever_pb2.SyncReport) -> dict[str, object]:
    d = report.delta
    return {
        "new": sorted(d.new),
        "changed": sorted(d.changed),
        "unchanged": d.unchanged,
        "deleted": sorted(d.deleted),
        "renamed": [(r.from_id, r.to_id) for r in d.renamed],
    }


async def test_folder_sync_applies_the_delta_and_readers_never_see_a_gap(
    embedder: str, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "private").mkdir()
    (docs / ".hidden").mkdir()
    (docs / "steady.md").write_text(manual("steady", 1, 3))
    (docs / "edited.md").write_text(manual("edited", 1, 2))
    (docs / "guide" / "old-name.md").write_text(manual("moving", 1, 3))
    (docs / "gone.md").write_text(manual("gone", 1, 2))
    (docs / "later-draft.md").write_text(manual("later", 1, 2))
    (docs / "draft.md").write_text("---\ndraft: true\n---\n" + manual("draft", 1, 2))
    (docs / "private" / "secret.md").write_text(manual("secret", 1, 2))
    (docs / ".hidden" / "x.md").write_text(manual("hidden", 1, 2))
    (docs / "script.py").write_text("print('not a document')\n")
    definition = retriever_pb2.SyncDefinition(
        kind=retriever_pb2.SYNC_SOURCE_KIND_FOLDER, location=str(docs), exclude=["private/*"]
    )
    async with retriever(embedder, tmp_path / "data", roots=(tmp_path,)) as stub:
        first, _ = await sync(stub, definition)
        assert delta_of(first) == {
            "new": ["edited.md", "gone.md", "guide/old-name.md", "later-draft.md", "steady.md"],
            "changed": [],
            "unchanged": 0,
            "deleted": [],
            "renamed": [],
        }
        outcomes = {s.source_id: (s.outcome, s.reason) for s in first.sources}
        assert outcomes["draft.md"] == ("skipped", "front matter says draft: true")
        assert set(outcomes) == {*delta_of(first)["new"], "draft.md"}  # type: ignore[misc]
        chunks = {s.source_id: s.chunks for s in first.sources}
        before = await markers_by_source(stub)
        assert before == {sid: [1] * chunks[sid] for sid in delta_of(first)["new"]}  # type: ignore[attr-defined]

        # the changes: add, edit (another section count), rename, delete, and a
        # previously stored file turned into a draft
        (docs / "added.md").write_text(manual("added", 2, 2))
        (docs / "edited.md").write_text(manual("edited", 2, 4))
        (docs / "guide" / "old-name.md").rename(docs / "guide" / "new-name.md")
        (docs / "gone.md").unlink()
        (docs / "later-draft.md").write_text("---\ningest: false\n---\n" + manual("later", 1, 2))
        expected = {
            "new": ["added.md"],
            "changed": ["edited.md"],
            "unchanged": 1,
            "deleted": ["gone.md", "later-draft.md"],
            "renamed": [("guide/old-name.md", "guide/new-name.md")],
        }
        dry, _ = await sync(stub, definition, dry_run=True)
        assert dry.dry_run and delta_of(dry) == expected and dry.chunks_written == 0
        assert await markers_by_source(stub) == before, "a dry run writes nothing"

        problems: list[str] = []
        searches = 0
        stop = asyncio.Event()
        edited_chunks = {1: chunks["edited.md"]}
        observed: list[tuple[int, int]] = []  # edited.md: (generation, chunks seen)

        async def reader() -> None:
            nonlocal searches
            while not stop.is_set():
                seen = await markers_by_source(stub)
                searches += 1
                for sid, found in seen.items():
                    if len(set(found)) != 1:
                        problems.append(f"{sid} mixes generations {found}")
                if seen.get("steady.md") != [1] * chunks["steady.md"]:
                    problems.append(f"steady.md changed: {seen.get('steady.md')}")
                edited = seen.get("edited.md", [])
                if not edited:
                    problems.append("edited.md missing")
                else:
                    observed.append((edited[0], len(edited)))
                moved = [s for s in ("guide/old-name.md", "guide/new-name.md") if s in seen]
                if not moved:
                    problems.append("the renamed file is under neither id")
                if "gone.md" in seen and len(seen["gone.md"]) != chunks["gone.md"]:
                    problems.append(f"gone.md partial: {seen['gone.md']}")
                if "gone.md" not in seen and (
                    "added.md" not in seen or not edited or edited[0] != 2
                ):
                    problems.append("a deletion came before the new and changed files were in")
                await asyncio.sleep(0)

        readers = [asyncio.create_task(reader()) for _ in range(2)]
        try:
            second, ticks = await sync(stub, definition)
        finally:
            stop.set()
            await asyncio.gather(*readers)
        assert delta_of(second) == expected
        reasons = {x.source_id: (x.outcome, x.reason) for x in second.sources}
        assert reasons["later-draft.md"] == ("deleted", "front matter says ingest: false")
        assert reasons["guide/new-name.md"] == ("renamed", "from guide/old-name.md")
        edited_chunks[2] = {s.source_id: s.chunks for s in second.sources}["edited.md"]
        assert problems == [] and searches > 0
        assert {gen for gen, _ in observed} == {1, 2}, "the readers saw the switch"
        assert all(count == edited_chunks[gen] for gen, count in observed), observed
        applied = [t for t in ticks if t.phase == "apply"]
        assert [t.done for t in applied] == [1, 2, 3, 4, 5, 6] and {t.total for t in applied} == {6}
        # deletions come last: the rename's old id, the deleted file and the new draft
        assert {t.source.source_id for t in applied[3:]} == {
            "gone.md",
            "later-draft.md",
            "guide/old-name.md",
        }
        assert all(t.source.outcome == "deleted" for t in applied[3:])

        after = await markers_by_source(stub)
        assert set(after) == {"steady.md", "edited.md", "guide/new-name.md", "added.md"}
        assert after["edited.md"] == [2] * edited_chunks[2]
        assert after["guide/new-name.md"] == [1] * chunks["guide/old-name.md"]
        described = await stub.DescribeCollection(
            retriever_pb2.DescribeCollectionRequest(name=COLLECTION)
        )
        assert described.sources == 4

        # nothing changed: a third sync writes nothing
        third, _ = await sync(stub, definition)
        assert delta_of(third)["unchanged"] == 4 and third.chunks_written == 0

        # an emptied folder (an unmounted volume) deletes nothing
        outside = retriever_pb2.SyncDefinition(
            kind=retriever_pb2.SYNC_SOURCE_KIND_FOLDER,
            location=str(docs / "private"),
            include=["*.txt"],
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await sync(stub, outside)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "refusing to delete all 4 sources" in (refused.value.details() or "")
        elsewhere = retriever_pb2.SyncDefinition(
            kind=retriever_pb2.SYNC_SOURCE_KIND_FOLDER, location="/etc"
        )
        with pytest.raises(grpc.aio.AioRpcError) as outside_roots:
            await sync(stub, elsewhere)
        assert "outside the sync roots" in (outside_roots.value.details() or "")


def build_site(site: Site, *, second: bool = False) -> None:
    site.pages.clear()
    site.pages["/robots.txt"] = Reply(
        body=b"User-agent: *\nDisallow: /docs/private/\n", content_type="text/plain"
    )
    site.html(
        "/docs/",
        "Zebra docs mk1",
        "zebra mk1 home of the zebra keeper documentation.",
        (
            "a.html",
            "b.html",
            "/docs/private/secret.html",
            "/blog/outside.html",
            "http://example.invalid/elsewhere.html",
            "missing.html",
            "old.html",
            "away.html",
            "a.html#section",
        ),
    )
    links = () if second else ("d.html",)
    site.html("/docs/a.html", "Page A mk1", "zebra mk1 page a: feeding times of the herd.", links)
    if not second:
        site.html("/docs/b.html", "Page B mk1", "zebra mk1 page b: the stripes explained.")
        site.html("/docs/d.html", "Page D mk1", "zebra mk1 page d: linked from page a only.")
    site.html("/docs/c.html", "Page C mk1", "zebra mk1 page c: where old.html moved.")
    site.html("/docs/private/secret.html", "Secret mk1", "zebra mk1 robots disallow this.")
    site.html("/blog/outside.html", "Outside mk1", "zebra mk1 outside the prefix.")
    site.html("/blog/post.html", "Post mk1", "zebra mk1 a redirect target out of scope.")
    site.redirect("/docs/old.html", "/docs/c.html")
    site.redirect("/docs/away.html", "/blog/post.html", status=302)


async def test_site_crawl_ingests_the_allowed_pages_and_deletes_removed_ones(
    embedder: str, tmp_path: Path
) -> None:
    with serve(Site()) as site:
        build_site(site)
        base = site.base
        definition = retriever_pb2.SyncDefinition(
            kind=retriever_pb2.SYNC_SOURCE_KIND_WEB, location=f"{base}/docs/", delay_s=0
        )
        pages = {f"{base}/docs/{p}" for p in ("", "a.html", "b.html", "c.html", "d.html")}
        async with retriever(embedder, tmp_path / "data") as stub:
            first, _ = await sync(stub, definition)
            assert set(first.delta.new) == pages and first.complete
            outcomes = {s.source_id: (s.outcome, s.reason) for s in first.sources}
            assert outcomes[f"{base}/docs/private/secret.html"] == (
                "skipped",
                "robots.txt disallows it",
            )
            assert outcomes[f"{base}/docs/missing.html"] == ("skipped", "HTTP 404 (gone)")
            assert outcomes[f"{base}/docs/away.html"][0] == "skipped"
            assert "redirects out of the crawl" in outcomes[f"{base}/docs/away.html"][1]
            assert set(await markers_by_source(stub)) == pages
            # robots.txt and the prefix are honoured: never fetched at all
            assert not {"/docs/private/secret.html", "/blog/outside.html", "/blog/post.html"} & set(
                site.requested
            )

            build_site(site, second=True)  # b.html now 404s, d.html is no longer linked
            second, _ = await sync(stub, definition)
            assert sorted(second.delta.deleted) == [f"{base}/docs/b.html", f"{base}/docs/d.html"]
            assert (list(second.delta.new), list(second.delta.changed)) == (
                [],
                [f"{base}/docs/a.html"],
            )
            assert set(await markers_by_source(stub)) == pages - {
                f"{base}/docs/b.html",
                f"{base}/docs/d.html",
            }

            # a crawl cut short by its page limit deletes nothing it did not see gone
            del site.pages["/docs/c.html"]
            limited = retriever_pb2.SyncDefinition()
            limited.CopyFrom(definition)
            limited.page_limit = 1
            third, _ = await sync(stub, limited)
            assert not third.complete and list(third.delta.deleted) == []
            assert len(set(await markers_by_source(stub))) == 3


async def test_cli_sync_from_the_settings_file(embedder: str, tmp_path: Path) -> None:
    """`groundwire sync` with the settings file's [sync.NAME] table: a dry run prints
    the delta and writes nothing; the sync then writes it; an --exclude given on the
    command line wins over the table and deletes what it leaves out."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(manual("a", 1, 2))
    (docs / "b.md").write_text(manual("b", 1, 2))
    config = tmp_path / "groundwire.toml"
    config.write_text(
        f'[retriever]\nchunk_max_tokens = 48\n\n[sync.{COLLECTION}]\nsource = "docs"\n'
    )
    parser = build_parser()
    async with retriever_at(embedder, tmp_path / "data") as (stub, addr):

        def run(*extra: str) -> tuple[int, str]:
            out = io.StringIO()
            args = parser.parse_args(["sync", "--config", str(config), "--retriever", addr, *extra])
            return sync_cli.run_command(args, out), out.getvalue()

        code, text = await asyncio.to_thread(run, "--dry-run")
        assert code == 0 and text.splitlines()[0].startswith(
            f"dry run (nothing written): sync {COLLECTION}: 2 new, 0 changed"
        )
        assert "  new      a.md" in text.splitlines()
        with pytest.raises(grpc.aio.AioRpcError):  # nothing was written
            await stub.DescribeCollection(retriever_pb2.DescribeCollectionRequest(name=COLLECTION))
        code, text = await asyncio.to_thread(run, "--json")
        report = json.loads(text)[0]
        assert code == 0 and sorted(report["delta"]["new"]) == ["a.md", "b.md"]
        code, text = await asyncio.to_thread(run, "--json", "--exclude", "b.*")
        report = json.loads(text)[0]
        assert report["delta"]["deleted"] == ["b.md"] and report["delta"]["unchanged"] == 1
        assert set(await markers_by_source(stub)) == {"a.md"}


async def test_gateway_sync_route(embedder: str, tmp_path: Path) -> None:
    """POST /v1/admin/collections/{name}/sync through the real gateway app and the real
    retriever: dry_run answers the delta and writes nothing, then the sync applies it;
    a folder outside the retriever's sync roots is 422; no admin key is 401."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(manual("a", 1, 2))
    async with retriever_at(embedder, tmp_path / "data", roots=(docs,)) as (stub, addr):
        settings = GatewaySettings(retriever_addr=addr, admin_api_keys="ops:admin-secret-1")
        upstream = Upstream(settings)
        await upstream.start()
        transport = httpx.ASGITransport(app=create_app(settings, upstream))
        admin = {"authorization": "Bearer admin-secret-1"}
        url = f"/v1/admin/collections/{COLLECTION}/sync"
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
                body = {"source": str(docs), "dry_run": True}
                dry = await client.post(url, json=body, headers=admin)
                assert dry.status_code == 200, dry.text
                assert dry.json()["delta"]["new"] == ["a.md"] and dry.json()["dry_run"]
                with pytest.raises(grpc.aio.AioRpcError):
                    await stub.DescribeCollection(
                        retriever_pb2.DescribeCollectionRequest(name=COLLECTION)
                    )
                done = await client.post(
                    url, json={"source": str(docs)}, headers=admin, params={"wait": "true"}
                )
                assert done.status_code == 200 and done.json()["chunks_written"] > 0
                assert [s["outcome"] for s in done.json()["sources"]] == ["new"]
                assert set(await markers_by_source(stub)) == {"a.md"}
                outside = await client.post(url, json={"source": str(tmp_path)}, headers=admin)
                assert outside.status_code == 422
                assert "outside the sync roots" in outside.json()["error"]["message"]
                anonymous = await client.post(url, json={"source": str(docs)})
                assert anonymous.status_code == 401
        finally:
            await upstream.stop()


async def test_front_matter_the_collection_filters_on_is_hashed_as_the_ingest_stores_it(
    embedder: str, tmp_path: Path
) -> None:
    """In a collection that filters on a front-matter field, a synced file's stored
    chunks carry that field, and the scan hashes the file the same way: a second sync
    finds it unchanged (not changed at every sync)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("---\nteam: zebras\n---\n" + manual("a", 1, 2))
    definition = retriever_pb2.SyncDefinition(
        kind=retriever_pb2.SYNC_SOURCE_KIND_FOLDER, location=str(docs)
    )
    async with retriever(embedder, tmp_path / "data") as stub:
        await stub.CreateCollection(
            retriever_pb2.CreateCollectionRequest(name=COLLECTION, filterable=["team"])
        )
        first, _ = await sync(stub, definition)
        assert delta_of(first)["new"] == ["a.md"]
        second, _ = await sync(stub, definition, dry_run=True)
        assert delta_of(second) == {
            "new": [],
            "changed": [],
            "unchanged": 1,
            "deleted": [],
            "renamed": [],
        }
