"""Sources have stable identities: ``groundwire ingest`` (the real command, in a
subprocess) gives the same source ids whichever folder it runs from, ``--url-prefix``
maps them to a published site, and ``groundwire sources`` lists what the collection
holds, against the real MiniLM embedder and retriever."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_cli.ingest import default_root, source_id, source_url
from groundwire_cli.sources import list_sources, table
from groundwire_core.grpc.client import create_channel


def _site(root: Path) -> Path:
    site = root / "work" / "site"
    for rel, text in {
        "index.md": "# Home\n\nWelcome to the zebra keeper's handbook.",
        "guide/index.md": "# Guide\n\nFeed the zebras at dawn with fresh hay.",
        "faq/index.md": "# FAQ\n\nZebras sleep standing up, mostly.",
    }.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    return site


async def _groundwire(cwd: Path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "groundwire_cli",
        *args,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode == 0, err.decode()[-2000:]
    return out.decode()


async def test_the_same_folder_from_two_working_directories_gives_the_same_ids(
    retriever_addr: str, tmp_path: Path
) -> None:
    site = _site(tmp_path)
    first = await _groundwire(site.parent, "ingest", "site", "--retriever", retriever_addr)
    assert "ingested 3, updated 0, unchanged 0" in first, first
    listed = await list_sources(retriever_addr, "docs")
    assert [s.source_id for s in listed] == ["faq/index.md", "guide/index.md", "index.md"]

    # from inside the folder: the same three sources
    inside = await _groundwire(site / "guide", "ingest", "..", "--retriever", retriever_addr)
    assert "ingested 0, updated 0, unchanged 3" in inside, inside
    relisted = await list_sources(retriever_addr, "docs")
    assert relisted == listed, "no duplicate sources, nothing rewritten"
    async with create_channel(retriever_addr) as channel:
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        described = await stub.DescribeCollection(
            retriever_pb2.DescribeCollectionRequest(name="docs")
        )
    assert described.sources == 3 and described.chunks == sum(s.chunks for s in listed)

    # the URL is part of what is stored: mapping the files to a site updates them
    mapped = await _groundwire(
        tmp_path,
        "ingest",
        "work/site",
        "--retriever",
        retriever_addr,
        "--url-prefix",
        "https://zoo.example/handbook/",
    )
    assert "ingested 0, updated 3, unchanged 0" in mapped, mapped
    urls = {s.source_id: s.url for s in await list_sources(retriever_addr, "docs")}
    assert urls["guide/index.md"] == "https://zoo.example/handbook/guide/index.md"

    shown = json.loads(
        await _groundwire(tmp_path, "sources", "docs", "--retriever", retriever_addr, "--json")
    )
    assert [(r["source_id"], r["chunks"]) for r in shown] == [
        (s.source_id, s.chunks) for s in listed
    ]
    assert all(len(r["content_hash"]) == 64 and r["ingested_at"] > 0 for r in shown)
    lines = list(table(await list_sources(retriever_addr, "docs")))
    assert lines[0].split() == ["SOURCE", "CHUNKS", "HASH", "INGESTED", "(UTC)", "TITLE", "URL"]
    assert lines[2].startswith("guide/index.md  ") and lines[2].endswith(urls["guide/index.md"])


def test_ids_and_urls_are_relative_to_the_root(tmp_path: Path) -> None:
    site = _site(tmp_path)
    assert default_root([site]) == site.resolve()
    assert default_root([site / "guide" / "index.md"]) == (site / "guide").resolve()
    assert default_root([site / "guide", site / "faq"]) == site.resolve()
    assert source_id(site / "guide" / "index.md", site) == "guide/index.md"
    assert source_url("https://x.example/docs", "a b/c.html") == (
        "https://x.example/docs/a%20b/c.html"
    )
    assert source_url("", "c.html") == ""
