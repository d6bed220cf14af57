"""Sources over the in-memory retriever: uploads keep the relative path the client
sends as the source id (sanitised; one id once per request), the admin key is checked
before a multipart body is read, the sources listing, and the stored-document view
(escaped, the cited chunk marked, guarded like search)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from groundwire_core.errors import InvalidInput
from groundwire_gateway import models
from groundwire_gateway.routes.admin import upload_source_id
from groundwire_gateway.routes.document_view import render_document

ADMIN = {"authorization": "Bearer admin-secret-1"}


@pytest.fixture
def client(make_client: Any) -> httpx.AsyncClient:
    c: httpx.AsyncClient = make_client(admin_api_keys="ops:admin-secret-1")
    return c


def _files(*names: str) -> list[tuple[str, tuple[str, bytes, str]]]:
    return [("files", (n, f"<h1>{n}</h1>".encode(), "text/html")) for n in names]


async def test_uploads_keep_relative_paths_so_one_name_in_two_folders_stays_apart(
    client: httpx.AsyncClient, upstream: Any
) -> None:
    response = await client.post(
        "/v1/admin/collections/docs/files",
        files=_files("a/index.html", "b/index.html", "./c//d\\index.html"),
        headers=ADMIN,
    )
    assert response.status_code == 202, response.text
    _, _, sent = upstream.ingested[-1]
    assert [name for name, _ in sent] == ["a/index.html", "b/index.html", "c/d/index.html"]
    assert sent[0][1] == b"<h1>a/index.html</h1>"


async def test_two_files_with_one_id_in_one_request_are_refused(
    client: httpx.AsyncClient, upstream: Any, error_json: Any
) -> None:
    response = await client.post(
        "/v1/admin/collections/docs/files",
        files=_files("a/index.html", "b/index.html", "a//index.html"),
        headers=ADMIN,
    )
    assert response.status_code == 422
    assert "'a/index.html'" in error_json(response)["message"]
    assert upstream.ingested == []


@pytest.mark.parametrize(
    "name",
    ["../secret.md", "a/../../b.md", "/etc/passwd", "a\\..\\..\\b.md", "."],
)
async def test_unsafe_upload_names_are_refused(
    client: httpx.AsyncClient, upstream: Any, error_json: Any, name: str
) -> None:
    response = await client.post(
        "/v1/admin/collections/docs/files", files=_files(name), headers=ADMIN
    )
    assert response.status_code == 422, response.text
    assert error_json(response)["code"] == "invalid_input"
    assert upstream.ingested == []


def test_upload_source_ids() -> None:
    # (python-multipart already cuts Windows paths like C:\\x to their last part)
    for bad in ("C:\\x.md", "c:/x.md", "\\\\host\\x.md", "a\x01b", "a\x7fb"):
        with pytest.raises(InvalidInput):
            upload_source_id(bad)
    assert upload_source_id(" guide/index.html ") == "guide/index.html"
    assert upload_source_id("guide\\faq\\x.md") == "guide/faq/x.md"
    assert upload_source_id("a/./b..c/d.md") == "a/b..c/d.md"  # '..' only as a segment


async def test_the_admin_key_is_checked_before_the_multipart_body_is_read(
    client: httpx.AsyncClient, error_json: Any
) -> None:
    # a body that is not multipart at all: read first, it would be a 422
    broken = {"content-type": "multipart/form-data; boundary=zzz"}
    response = await client.post(
        "/v1/admin/collections/docs/files", content=b"not multipart", headers=broken
    )
    assert response.status_code == 401, response.text
    wrong = {**broken, "authorization": "Bearer not-an-admin-key"}
    response = await client.post(
        "/v1/admin/collections/docs/files", content=b"not multipart", headers=wrong
    )
    assert response.status_code in (401, 403), response.text
    response = await client.post(
        "/v1/admin/collections/docs/files", content=b"not multipart", headers={**broken, **ADMIN}
    )
    assert response.status_code == 422 and error_json(response)["code"] == "invalid_input"


async def test_the_sources_listing_is_an_admin_call(
    client: httpx.AsyncClient, upstream: Any
) -> None:
    assert (await client.get("/v1/admin/collections/docs/sources")).status_code == 401
    response = await client.get(
        "/v1/admin/collections/docs/sources?page_token=a&limit=5", headers=ADMIN
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["sources"][0]["source_id"] == "a/index.html"
    assert body["sources"][0]["chunks"] == 2 and body["total"] == 2
    assert upstream.source_pages[-1] == ("docs", "a", 5)
    too_many = await client.get("/v1/admin/collections/docs/sources?limit=5000", headers=ADMIN)
    assert too_many.status_code == 422


HOSTILE = models.StoredDocument(
    collection="docs",
    source_id="notes/<b>x</b>.md",
    title='<script>alert("t")</script>',
    url="javascript:alert(1)",
    doc_type="note",
    chunks=[
        models.StoredChunk(
            chunk_id="c0", chunk_index=0, heading_path=["Intro"], text="<img src=x onerror=1>"
        ),
        models.StoredChunk(
            chunk_id="c1",
            chunk_index=1,
            heading_path=["Intro", "Use"],
            text="Cited & <i>quoted</i>\nsecond line",
        ),
    ],
    total=2,
)


async def test_the_view_escapes_everything_and_marks_the_cited_chunk(
    client: httpx.AsyncClient, upstream: Any
) -> None:
    upstream.documents[HOSTILE.source_id] = HOSTILE
    response = await client.get(
        "/v1/sources/view", params={"source_id": HOSTILE.source_id, "chunk": "c1"}
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in response.headers["content-security-policy"]
    page = response.text
    for raw in ("<script", "<img", "<i>", "<b>", "javascript:"):
        assert raw not in page, raw
    assert "&lt;img src=x onerror=1&gt;" in page
    assert "Cited &amp; &lt;i&gt;quoted&lt;/i&gt;\nsecond line" in page
    assert page.count('class="chunk cited"') == 1 and page.count('id="cited"') == 1
    cited = page.index('class="chunk cited"')
    assert page.index('data-chunk-id="c1"') > cited > page.index('data-chunk-id="c0"')
    assert upstream.reads[-1] == ("docs", HOSTILE.source_id)  # the default collection


async def test_the_view_links_a_known_url_and_404s_an_unknown_source(
    client: httpx.AsyncClient, upstream: Any, error_json: Any
) -> None:
    upstream.documents["a.md"] = HOSTILE.model_copy(
        update={"source_id": "a.md", "url": "https://docs.example.com/a?x=1&y=2"}
    )
    page = (await client.get("/v1/sources/view?source_id=a.md&collection=docs")).text
    assert '<a href="https://docs.example.com/a?x=1&amp;y=2"' in page
    assert 'class="chunk cited"' not in page
    missing = await client.get("/v1/sources/view?source_id=nope.md")
    assert missing.status_code == 404 and error_json(missing)["code"] == "not_found"
    unknown = await client.get("/v1/sources/view?source_id=a.md&collection=ghost")
    assert unknown.status_code == 404


async def test_the_view_is_guarded_like_search(make_client: Any, upstream: Any) -> None:
    upstream.documents["a.md"] = HOSTILE
    keyed = make_client(api_keys="acme:acme-secret-1", require_api_key=True)
    assert (await keyed.get("/v1/sources/view?source_id=a.md")).status_code == 401
    assert (await keyed.post("/v1/search", json={"query": "x"})).status_code == 401
    ok = await keyed.get(
        "/v1/sources/view?source_id=a.md", headers={"authorization": "Bearer acme-secret-1"}
    )
    assert ok.status_code == 200


def test_render_document_keeps_document_order() -> None:
    page = render_document(HOSTILE)
    assert page.index('id="chunk-0"') < page.index("Chunk 0") < page.index('id="chunk-1"')
    assert page.index("Chunk 1") > page.index("Chunk 0") and "2 chunks" in page
    partial = render_document(HOSTILE.model_copy(update={"total": 5}))
    assert "and 3 more chunks" in partial


async def test_the_view_highlights_the_cited_span_inside_the_cited_chunk(
    client: httpx.AsyncClient, upstream: Any
) -> None:
    upstream.documents[HOSTILE.source_id] = HOSTILE
    text = HOSTILE.chunks[1].text
    start = text.index("<i>")
    end = text.index("\n")
    params: dict[str, Any] = {"source_id": HOSTILE.source_id, "chunk": "c1"}
    page = await client.get("/v1/sources/view", params={**params, "start": start, "end": end})
    assert page.status_code == 200, page.text
    assert (
        'Cited &amp; <mark class="evidence">&lt;i&gt;quoted&lt;/i&gt;</mark>\nsecond line'
        in page.text
    )
    assert page.text.count("<mark") == 1 and page.text.count('class="chunk cited"') == 1
    # a range outside the chunk's text, or without a cited chunk, marks nothing
    for bad in (
        {**params, "start": 3, "end": 999},
        {**params, "start": 5, "end": 5},
        {"source_id": HOSTILE.source_id, "start": 0, "end": 4},
    ):
        again = await client.get("/v1/sources/view", params=bad)
        assert again.status_code == 200 and "<mark" not in again.text
    negative = await client.get("/v1/sources/view", params={**params, "start": -1, "end": 4})
    assert negative.status_code == 422
