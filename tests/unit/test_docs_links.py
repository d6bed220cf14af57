"""Every relative link in the README and the docs points at a file that exists, and
every #anchor at a heading (or an explicit id) of that file: pages that moved
("one place per idea") must not leave dead links behind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (.+)$", re.M)
_ID = re.compile(r'<a id="([^"]+)"></a>')
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def pages() -> list[Path]:
    return sorted(
        [
            ROOT / "README.md",
            ROOT / "benchmarks" / "README.md",
            ROOT / "deploy" / "README.md",
            *(ROOT / "docs").rglob("*.md"),
        ]
    )


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*_]|\[|\]\([^)]*\)", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(h) for h in _HEADING.findall(text)} | set(_ID.findall(text))


def links(page: Path) -> list[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return [t for t in _LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_the_slugs_match_githubs() -> None:
    assert slug("Throughput, MiniLM (2026-11-24)") == "throughput-minilm-2026-11-24"
    assert slug("In the background: `up --detach`, `down`") == "in-the-background-up---detach-down"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    dead = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            dead.append(f"{target}: no file {file.relative_to(ROOT)}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            dead.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not dead, dead
