"""The sync's source sets on their own (no store, no embedder): a website on 127.0.0.1
read through a sitemap, cut by its page limit, failing for a moment, too large, or
closed by robots.txt; a git working tree's tracked files; a folder's links, sizes and
globs; definitions refused before anything is read."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from groundwire_core.errors import InvalidInput, Unavailable
from groundwire_core.outbound import OutboundPolicy
from groundwire_retriever.sync import SourceKind, SyncDefinition, check_definition
from groundwire_retriever.sync.crawler import WebSource
from groundwire_retriever.sync.definition import Found
from groundwire_retriever.sync.folder import FolderSource
from tests.site_server import Reply, Site, serve


async def crawl(source: WebSource | FolderSource) -> dict[str, Found]:
    return {f.source_id: f async for f in source.sources()}


LOCAL = OutboundPolicy.from_lists(networks="127.0.0.1/32")
"""The test site is on loopback, which outbound fetches refuse unless allowed."""


def web(location: str, **options: object) -> WebSource:
    definition = SyncDefinition(SourceKind.WEB, location, delay_s=0, **options)  # type: ignore[arg-type]
    return WebSource(definition, policy=LOCAL)


def sitemap(*urls: str, index: bool = False) -> Reply:
    tag, item = ("sitemapindex", "sitemap") if index else ("urlset", "url")
    entries = "".join(f"<{item}><loc>{u}</loc></{item}>" for u in urls)
    body = (
        f'<?xml version="1.0"?><{tag} xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{entries}</{tag}>"
    )
    return Reply(body=body.encode(), content_type="application/xml")


async def test_sitemap_lists_the_pages_in_scope_that_robots_allow() -> None:
    with serve(Site()) as site:
        site.pages["/robots.txt"] = Reply(body=b"User-agent: *\nDisallow: /docs/no/\n")
        for name in ("a", "b", "no/c"):
            site.html(f"/docs/{name}.html", name, f"page {name}", ("/docs/linked.html",))
        site.pages["/docs/sitemap.xml"] = sitemap(f"{site.base}/docs/part.xml", index=True)
        site.pages["/docs/part.xml"] = sitemap(
            *(f"{site.base}/docs/{n}.html" for n in ("a", "b", "no/c", "gone")),
            f"{site.base}/elsewhere/x.html",
        )
        found = await crawl(web(f"{site.base}/docs/sitemap.xml"))
    ids = {sid.removeprefix(site.base): f for sid, f in found.items()}
    assert {sid for sid, f in ids.items() if f.document is not None} == {
        "/docs/a.html",
        "/docs/b.html",
    }, "a sitemap's pages only: their links are not followed"
    assert ids["/docs/no/c.html"].reason == "robots.txt disallows it"
    assert (ids["/docs/gone.html"].reason, ids["/docs/gone.html"].present) == (
        "HTTP 404 (gone)",
        False,
    )
    assert "/elsewhere/x.html" not in site.requested and "/docs/linked.html" not in site.requested


async def test_page_limit_and_transient_errors_leave_the_crawl_incomplete() -> None:
    with serve(Site()) as site:
        site.html("/", "home", "home", ("one.html", "two.html", "three.html"))
        for name in ("one", "two", "three"):
            site.html(f"/{name}.html", name, name)
        limited = web(f"{site.base}/", page_limit=2)
        found = await crawl(limited)
        assert len(found) == 2 and not limited.complete

        site.pages["/two.html"] = Reply(status=503)
        failing = web(f"{site.base}/")
        found = await crawl(failing)
        assert not failing.complete, "pages a failed one links to were not seen"
        two = found[f"{site.base}/two.html"]
        assert (two.document, two.present, two.reason) == (None, True, "HTTP 503 (refused)")

        site.pages["/"] = Reply(status=500)
        with pytest.raises(Unavailable, match="HTTP 500"):
            await crawl(web(f"{site.base}/"))


async def test_size_limit_content_types_robots_and_politeness() -> None:
    with serve(Site()) as site:
        site.html("/", "home", "home", ("big.html", "streamed.html", "image.png", "notes.txt"))
        site.pages["/big.html"] = Reply(body=b"<p>" + b"zebra " * 2000 + b"</p>")
        site.pages["/streamed.html"] = Reply(body=b"<p>" + b"zebra " * 2000 + b"</p>", length=False)
        site.pages["/image.png"] = Reply(body=b"\x89PNG", content_type="image/png")
        site.pages["/notes.txt"] = Reply(body=b"plain notes", content_type="text/plain")
        started = time.perf_counter()
        found = await crawl(
            WebSource(
                SyncDefinition(SourceKind.WEB, f"{site.base}/", max_bytes=5000, delay_s=0.2),
                policy=LOCAL,
            )
        )
        assert time.perf_counter() - started >= 0.8, "four requests after the first wait"
        big = found[f"{site.base}/big.html"]
        assert big.reason == "the page is 12007 bytes; the sync's limit is 5000"
        streamed = found[f"{site.base}/streamed.html"]
        assert streamed.reason == "the page is over the sync's limit of 5000 bytes"
        assert not big.present and not streamed.present
        assert "image/png is not a document" in found[f"{site.base}/image.png"].reason
        notes = found[f"{site.base}/notes.txt"].document
        assert notes is not None and notes.format == "text"

        site.pages["/robots.txt"] = Reply(status=403)
        closed = await crawl(web(f"{site.base}/"))
        assert [f.reason for f in closed.values()] == ["robots.txt disallows it"]
        assert site.requested[-1] == "/robots.txt", "nothing fetched past a 403 robots.txt"


def git_repo(repo: Path) -> Path:
    """A working tree with three tracked documents, a tracked script, and an untracked
    document."""
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "tracked.md").write_text("# Tracked\n\nzebra text\n")
    (repo / "README.md").write_text("# Readme\n\nzebra readme\n")
    (repo / "big.md").write_text("# Big\n\n" + "zebra " * 100)
    (repo / "code.py").write_text("print(1)\n")
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    (repo / "untracked.md").write_text("# Untracked\n\nzebra\n")
    return repo


async def test_git_working_tree_gives_its_tracked_files(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    found = await crawl(FolderSource(SyncDefinition(SourceKind.GIT, str(repo), max_bytes=300)))
    assert {s for s, f in found.items() if f.document} == {"README.md", "docs/tracked.md"}
    assert found["big.md"].document is None and not found["big.md"].present
    plain = await crawl(FolderSource(SyncDefinition(SourceKind.FOLDER, str(repo))))
    assert "untracked.md" in plain and not any(s.startswith(".git") for s in plain)
    docs_only = await crawl(FolderSource(SyncDefinition(SourceKind.GIT, str(repo / "docs"))))
    assert list(docs_only) == ["tracked.md"], "a subfolder of a working tree: its own files"
    (tmp_path / "plain").mkdir()
    with pytest.raises(InvalidInput, match="not a git working tree"):
        await crawl(FolderSource(SyncDefinition(SourceKind.GIT, str(tmp_path / "plain"))))


async def test_folder_links_globs_and_refused_definitions(tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("# Secret\n\nzebra\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nzebra\n")
    (docs / "b.txt").write_text("zebra b\n")
    (docs / "data.csv").write_text("a,b\n")
    (docs / "link.md").symlink_to(outside)
    definition = SyncDefinition(SourceKind.FOLDER, str(docs), include=["*.md", "*.csv"])
    found = await crawl(FolderSource(definition))
    assert found["a.md"].document is not None and "b.txt" not in found
    assert found["link.md"].reason == "a link to a file outside the folder"
    assert not found["data.csv"].present and "unknown document type" in found["data.csv"].reason
    with pytest.raises(InvalidInput, match="outside the sync roots"):
        check_definition(definition, [tmp_path / "elsewhere"])
    check_definition(definition, [tmp_path])
    for bad, message in [
        (SyncDefinition(SourceKind.FOLDER, "docs"), "absolute path"),
        (SyncDefinition(SourceKind.FOLDER, str(tmp_path / "none")), "sees no folder"),
        (SyncDefinition(SourceKind.WEB, "ftp://example.com/"), "absolute http"),
        (SyncDefinition(SourceKind.WEB, "https://example.com/", page_limit=0), "page_limit"),
    ]:
        with pytest.raises(InvalidInput, match=message):
            check_definition(bad)
    web = SyncDefinition(SourceKind.WEB, "https://example.com/", include=("*.html",), delay_s=0.5)
    assert SyncDefinition.from_dict(json.loads(json.dumps(web.as_dict()))) == web
    with pytest.raises(InvalidInput, match="not a sync definition"):
        SyncDefinition.from_dict({"kind": "ftp", "location": "x"})
