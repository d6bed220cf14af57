"""A source's URL becomes a link in every citation: only absolute http(s) URLs are
stored. A caller's other URL is refused; one a document declares is dropped."""

from __future__ import annotations

import pytest

from groundwire_core.errors import InvalidInput
from groundwire_core.urls import is_web_url
from groundwire_retriever.ingest.pipeline import ChunkingPolicy, DocumentInput, prepare_chunks

POLICY = ChunkingPolicy(min_tokens=4, max_tokens=64, overlap_tokens=0)
BODY = "# Guide\n\nSalt the water well and boil it for ten minutes.\n"


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://docs.example/guide", True),
        ("HTTP://docs.example", True),
        ("javascript:alert(1)", False),
        ("JaVaScRiPt:alert(1)", False),
        ("data:text/html,<script>1</script>", False),
        ("/guide/index.html", False),
        ("https://", False),
        ("https://docs.example/a b", False),
        ("https://docs.example/\x1fx", False),
    ],
)
def test_only_absolute_web_urls_pass(url: str, ok: bool) -> None:
    assert is_web_url(url) is ok


async def test_a_callers_script_url_is_refused_with_its_reason() -> None:
    doc = DocumentInput(
        source_id="g.md", content=BODY.encode(), filename="g.md", url="javascript:alert(1)"
    )
    with pytest.raises(InvalidInput, match="http"):
        await prepare_chunks(doc, POLICY)


@pytest.mark.parametrize(
    ("declared", "stored"),
    [
        ("javascript:alert(document.cookie)", ""),
        ("https://docs.example/guide", "https://docs.example/guide"),
    ],
)
async def test_a_declared_url_is_kept_only_when_it_is_a_web_url(declared: str, stored: str) -> None:
    content = f"---\ntitle: Guide\nurl: {declared}\n---\n{BODY}".encode()
    chunks = await prepare_chunks(
        DocumentInput(source_id="g.md", content=content, filename="g.md"), POLICY
    )
    assert chunks and {c.url for c in chunks} == {stored}
