"""Red team, round two (issue #31): the outbound-fetch and sync defects 2, 3, 4, 10, 13
and the sync-URL credentials of 11, each reproduced as it was found, against the real
retriever (its Sync RPC on a free port, the real MiniLM embedder, the embedded engine)
and the real sync sources, with stand-ins for the cluster's internal services on
127.0.0.1. Each docstring says what the code before the fix did.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import grpc
import pytest

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_cli.__main__ import main
from groundwire_cli.child_settings import child_environment
from groundwire_cli.config import load_file, user_settings
from groundwire_core.errors import InvalidInput, Unavailable
from groundwire_core.grpc.client import create_channel
from groundwire_core.grpc.server import serving
from groundwire_core.identity import Identity
from groundwire_core.outbound import NO_ANSWER, OutboundPolicy
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings
from groundwire_retriever.sync import SourceKind, SyncDefinition
from groundwire_retriever.sync.crawler import WebSource
from groundwire_retriever.sync.definition import Found
from tests.raw_server import Answer, Recorder, banner, closed_port, endless, http, raw_server
from tests.site_server import Reply, Site, serve

Stub = retriever_pb2_grpc.RetrieverServiceStub
COLLECTION = "handbook"
LOOPBACK = OutboundPolicy.from_lists(networks="127.0.0.1/32")
"""An operator who allowed loopback: what still holds then is the sync's own rule."""
WRITE_KEY = Identity(tenant="acme")
"""What the gateway sends for a write key: no end user, not unrestricted."""
HR_READER = Identity(tenant="acme", user="hana", groups=frozenset({"hr"}))


@pytest.fixture
async def embedder(minilm_dir: Path) -> AsyncIterator[str]:
    settings = EmbedderSettings(port=0, model_dir=minilm_dir)
    async with serving(EmbedderService(settings), settings) as port:
        yield f"127.0.0.1:{port}"


@asynccontextmanager
async def retriever(embedder: str, data: Path) -> AsyncIterator[Stub]:
    """The retriever as deployed by default: no outbound allowances."""
    settings = RetrieverSettings(
        port=0,
        data_path=data,
        embedder_addr=embedder,
        chunk_min_tokens=16,
        chunk_max_tokens=64,
        chunk_overlap_tokens=0,
    )
    async with AsyncExitStack() as stack:
        port = await stack.enter_async_context(serving(RetrieverService(settings), settings))
        channel = await stack.enter_async_context(create_channel(f"127.0.0.1:{port}"))
        yield retriever_pb2_grpc.RetrieverServiceStub(channel)


async def sync(
    stub: Stub, definition: retriever_pb2.SyncDefinition, caller: Identity | None = None
) -> retriever_pb2.SyncReport:
    """A sync as the CLI runs it (no identity) or as the gateway does for ``caller``."""
    request = retriever_pb2.SyncRequest(collection=COLLECTION, definition=definition)
    metadata = caller.to_metadata() if caller else None
    events = [e async for e in stub.Sync(request, metadata=metadata)]
    return events[-1].report


async def search(stub: Stub, text: str, caller: Identity) -> list[retriever_pb2.SearchHit]:
    request = retriever_pb2.SearchRequest(
        collection=COLLECTION, text=text, paths=[retriever_pb2.SEARCH_PATH_BM25], limit=50
    )
    reply = await stub.Search(request, metadata=caller.to_metadata())
    return list(reply.hits)


def web(location: str, policy: OutboundPolicy = LOOPBACK, **options: object) -> WebSource:
    definition = SyncDefinition(SourceKind.WEB, location, delay_s=0, **options)  # type: ignore[arg-type]
    return WebSource(definition, policy=policy)


async def crawl(source: WebSource) -> dict[str, Found]:
    return {f.source_id: f async for f in source.sources()}


def test_defect_2_sync_roots_is_read_from_the_settings_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `groundwire up` and `config show` exited "sync_roots: Input should be a
    valid tuple" for `[retriever] sync_roots = [...]` and for the variable as a JSON
    list, so the documented setup ran with no sync roots at all."""
    monkeypatch.setenv("GROUNDWIRE_HOME", str(tmp_path / "home"))
    config = tmp_path / "groundwire.toml"
    config.write_text('[retriever]\nsync_roots = ["/srv/docs", "synced"]\n')
    with pytest.raises(SystemExit) as shown:
        main(["config", "show", "retriever", "--config", str(config)])
    out = capsys.readouterr()
    assert shown.value.code == 0, out.err
    line = next(ln for ln in out.out.splitlines() if ln.split()[:1] == ["sync_roots"])
    assert "/srv/docs" in line and str(tmp_path / "synced") in line and "(file)" in line

    # what the child process then builds from its environment
    settings = user_settings("retriever", {}, load_file(config))
    env = child_environment("retriever", {}, settings, {})
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert RetrieverSettings().sync_roots == (Path("/srv/docs"), tmp_path / "synced")

    monkeypatch.setenv("GROUNDWIRE_RETRIEVER_SYNC_ROOTS", '["/srv/from-env"]')
    with pytest.raises(SystemExit) as shown:
        main(["config", "show", "retriever"])
    out = capsys.readouterr()
    assert shown.value.code == 0, out.err
    assert "/srv/from-env" in out.out and "sync_roots: Input should be" not in out.err


async def test_defect_3_a_website_sync_cannot_reach_the_clusters_own_services(
    embedder: str, tmp_path: Path
) -> None:
    """Before: a write key synced http://127.0.0.1:<metrics port>/metrics and the
    reply became searchable text; sync errors named ConnectError for a closed port and
    RemoteProtocolError for an open non-HTTP one (a port scanner)."""
    internal = Site()
    internal.pages["/metrics"] = Reply(
        body=b"retriever_secret_total 42\n", content_type="text/plain"
    )
    with serve(internal):
        port = internal.base.rsplit(":", 1)[1]
        async with retriever(embedder, tmp_path / "data") as stub:
            for location in (f"{internal.base}/metrics", f"http://localhost:{port}/metrics"):
                definition = retriever_pb2.SyncDefinition(
                    kind=retriever_pb2.SYNC_SOURCE_KIND_WEB, location=location, delay_s=0
                )
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await sync(stub, definition, WRITE_KEY)
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "private, loopback" in (refused.value.details() or "")
            with pytest.raises(grpc.aio.AioRpcError):  # nothing was written
                await stub.DescribeCollection(
                    retriever_pb2.DescribeCollectionRequest(name=COLLECTION)
                )
    assert internal.requested == [], "no request reached the internal service"

    # with loopback allowed by the operator, port states still look alike
    async with raw_server(banner) as open_port:
        messages = []
        for scanned in (closed_port(), open_port):
            url = f"http://127.0.0.1:{scanned}/"
            with pytest.raises(Unavailable) as failed:
                await crawl(web(url))
            messages.append(failed.value.message.replace(str(scanned), "PORT"))
    assert messages[0] == messages[1] == f"http://127.0.0.1:PORT/robots.txt: {NO_ANSWER}"


async def test_defect_4_robots_and_sitemap_redirects_stay_on_the_site() -> None:
    """Before: robots.txt was fetched with follow_redirects=True (any origin), and a
    sitemap redirect skipped the scope check: the internal service was read and the
    422 quoted its root element ("its root is <secret-root>")."""
    inner = Recorder()
    secret = Answer(
        body=b"<secret-root>hunter2</secret-root>", headers={"content-type": "text/xml"}
    )
    async with raw_server(http({"/internal": secret}, inner)) as inner_port:
        internal = f"http://127.0.0.1:{inner_port}/internal"
        with serve(Site()) as site:
            site.redirect("/robots.txt", internal)
            site.html("/docs/", "Home", "zebra home page")
            found = await crawl(web(f"{site.base}/docs/"))
            assert found[f"{site.base}/docs/"].document is not None

            site.redirect("/docs/sitemap.xml", internal, status=302)
            with pytest.raises(InvalidInput) as refused:
                await crawl(web(f"{site.base}/docs/sitemap.xml"))
    assert "redirects off the site" in refused.value.message
    assert "secret-root" not in refused.value.message and "hunter2" not in refused.value.message
    assert inner.requests == [], "neither redirect was followed off the site"


async def test_defect_10_a_sync_by_a_write_key_or_the_cli_deletes_restricted_documents(
    embedder: str, tmp_path: Path
) -> None:
    """Before: the stored side was read through the caller's filtered view, so a sync
    run with a write key or by the CLI never saw the access-restricted page: "0
    deleted", and it stayed searchable for its group."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "welcome.md").write_text("# Welcome\n\nZebra crossing rules for every employee.\n")
    (docs / "layoffs.md").write_text(
        "---\naccess: group:hr\n---\n# Layoffs\n\nZebra layoffs plan for the third quarter.\n"
    )
    definition = retriever_pb2.SyncDefinition(
        kind=retriever_pb2.SYNC_SOURCE_KIND_FOLDER, location=str(docs)
    )
    async with retriever(embedder, tmp_path / "data") as stub:
        first = await sync(stub, definition)  # the CLI
        assert sorted(first.delta.new) == ["layoffs.md", "welcome.md"]
        assert {h.chunk.source_id for h in await search(stub, "zebra", HR_READER)} == {
            "layoffs.md",
            "welcome.md",
        }
        again = await sync(stub, definition, WRITE_KEY)
        assert (again.delta.unchanged, list(again.delta.new)) == (2, []), (
            "the restricted page is seen as stored, not new again"
        )
        restricted = (docs / "layoffs.md").read_text()
        for caller in (WRITE_KEY, None):  # a write key through the gateway; the CLI
            (docs / "layoffs.md").unlink()
            report = await sync(stub, definition, caller)
            assert list(report.delta.deleted) == ["layoffs.md"], caller
            hits = await search(stub, "zebra layoffs", HR_READER)
            assert {h.chunk.source_id for h in hits} == {"welcome.md"}, caller
            (docs / "layoffs.md").write_text(restricted)
            assert list((await sync(stub, definition)).delta.new) == ["layoffs.md"]


async def test_defect_13_max_bytes_has_a_server_maximum_and_pages_stream_under_it(
    embedder: str, tmp_path: Path
) -> None:
    """Before: a sync's max_bytes was accepted up to 1 TiB and a page was buffered
    whole (a 1.5 GB page took the retriever from 1.4 to 4.3 GB RSS)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    definition = retriever_pb2.SyncDefinition(
        kind=retriever_pb2.SYNC_SOURCE_KIND_FOLDER, location=str(docs), max_bytes=1 << 40
    )
    async with retriever(embedder, tmp_path / "data") as stub:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await sync(stub, definition)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "max_bytes must be at most 20971520" in (refused.value.details() or "")

    sent = Recorder()
    capped = OutboundPolicy.from_lists(networks="127.0.0.1/32", max_bytes=1 << 20)
    async with raw_server(endless(sent)) as port:
        found = await crawl(web(f"http://127.0.0.1:{port}/", capped, max_bytes=1 << 40))
    page = found[f"http://127.0.0.1:{port}/"]
    assert page.document is None and not page.present
    assert page.reason == "the page is over the sync's limit of 1048576 bytes"
    assert sent.sent < 32 << 20, f"the crawl hung up at the cap (the server sent {sent.sent})"


async def test_defect_11_credentials_in_a_sync_url_are_never_stored(
    embedder: str, tmp_path: Path
) -> None:
    """Before: `https://user:password@host/...` was kept in every source id and URL
    (and so in search results, citations and job reports)."""
    with serve(Site()) as site:
        site.html("/docs/", "Home", "zebra home", ("guide.html",))
        site.html("/docs/guide.html", "Guide", "zebra guide")
        start = site.base.replace("http://", "http://reader:s3cret@") + "/docs/"
        found = await crawl(web(start))
    assert sorted(found) == [f"{site.base}/docs/", f"{site.base}/docs/guide.html"]
    documents = [f.document for f in found.values() if f.document is not None]
    assert len(documents) == 2 and not [d for d in documents if "s3cret" in d.url + d.source_id]

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nZebra page a.\n")
    definition = retriever_pb2.SyncDefinition(
        kind=retriever_pb2.SYNC_SOURCE_KIND_FOLDER,
        location=str(docs),
        url_prefix="https://reader:s3cret@docs.example.com/handbook",
    )
    async with retriever(embedder, tmp_path / "data") as stub:
        report = await sync(stub, definition)
        hits = await search(stub, "zebra", HR_READER)
    assert list(report.delta.new) == ["a.md"]
    assert [h.chunk.url for h in hits] == ["https://docs.example.com/handbook/a.md"]
    assert not re.search("s3cret", str(report))
