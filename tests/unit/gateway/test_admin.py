"""Admin routes over the in-memory retriever: keys required, collections, ingest
(JSON and multipart), delete by source, and the collection cache kept honest."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from groundwire_core.errors import Unavailable

ADMIN = {"authorization": "Bearer admin-secret-1"}


@pytest.fixture
def client(make_client: Any) -> httpx.AsyncClient:
    c: httpx.AsyncClient = make_client(
        admin_api_keys="ops:admin-secret-1", api_keys="acme:acme-secret-1"
    )
    return c


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/admin/collections"),
        ("POST", "/v1/admin/collections"),
        ("GET", "/v1/admin/collections/docs"),
        ("DELETE", "/v1/admin/collections/docs"),
        ("POST", "/v1/admin/collections/docs/documents"),
        ("DELETE", "/v1/admin/collections/docs/documents?source_id=a"),
        ("POST", "/v1/admin/collections/docs/files"),
    ],
)
async def test_admin_routes_need_an_admin_key(
    client: httpx.AsyncClient, upstream: Any, error_json: Any, method: str, path: str
) -> None:
    response = await client.request(method, path)
    assert response.status_code == 401
    assert error_json(response)["code"] == "unauthenticated"
    assert response.headers["www-authenticate"] == "Bearer"
    tenant = await client.request(method, path, headers={"x-api-key": "acme-secret-1"})
    assert tenant.status_code == 403
    assert error_json(tenant)["code"] == "permission_denied"
    assert "docs" in upstream.collections


async def test_admin_routes_are_disabled_without_admin_keys(
    make_client: Any, error_json: Any
) -> None:
    client = make_client()
    response = await client.get("/v1/admin/collections", headers=ADMIN)
    assert response.status_code == 401
    assert "disabled" in error_json(response)["message"]


async def test_collection_lifecycle(client: httpx.AsyncClient, error_json: Any) -> None:
    created = await client.post(
        "/v1/admin/collections", json={"name": "notes", "filterable": ["team"]}, headers=ADMIN
    )
    assert created.status_code == 201, created.text
    assert created.json()["filterable"] == ["source_id", "doc_type", "title", "team"]
    again = await client.post("/v1/admin/collections", json={"name": "notes"}, headers=ADMIN)
    assert again.status_code == 409
    assert error_json(again)["code"] == "already_exists"
    names = [
        c["name"]
        for c in (await client.get("/v1/admin/collections", headers=ADMIN)).json()["collections"]
    ]
    assert names == ["docs", "team_notes-2", "notes"]
    described = await client.get("/v1/admin/collections/notes", headers=ADMIN)
    assert described.json()["name"] == "notes"
    # the new collection (and its field) is usable at once on this replica
    chat = await client.post(
        "/v1/chat",
        json={
            "messages": [{"role": "user", "content": "q"}],
            "collection": "notes",
            "filters": [{"field": "team", "any_of": ["a"]}],
        },
    )
    assert chat.status_code == 200
    dropped = await client.delete("/v1/admin/collections/notes", headers=ADMIN)
    assert dropped.json() == {"collection": "notes", "dropped": True}
    missing = await client.get("/v1/admin/collections/notes", headers=ADMIN)
    assert missing.status_code == 404
    search = await client.post("/v1/search", json={"query": "q", "collection": "notes"})
    assert search.status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        {"name": "Bad Name"},
        {"name": "ok", "filterable": ["Bad-Field"]},
        {"name": "ok", "extra": True},
    ],
)
async def test_invalid_collections_are_422(
    client: httpx.AsyncClient, error_json: Any, body: dict[str, Any]
) -> None:
    response = await client.post("/v1/admin/collections", json=body, headers=ADMIN)
    assert response.status_code == 422
    assert error_json(response)["code"] == "invalid_input"


async def test_ingest_json_documents(client: httpx.AsyncClient, upstream: Any) -> None:
    body = {
        "documents": [
            {
                "source_id": "guide/install.md",
                "content": "# Install\n\nRun it.",
                "format": "markdown",
                "title": "Install",
                "url": "https://docs.example.com/install",
                "doc_type": "guide",
                "metadata": {"team": "a"},
            },
            {"source_id": "faq.txt", "content": "Q and A"},
        ],
        "create_collection": True,
    }
    response = await client.post(
        "/v1/admin/collections/fresh/documents?wait=true", json=body, headers=ADMIN
    )
    assert response.status_code == 200, response.text  # wait=true: the blocking report
    report = response.json()
    assert report["collection"] == "fresh" and report["ingested"] == 2
    assert [d["source_id"] for d in report["documents"]] == ["guide/install.md", "faq.txt"]
    collection, sent, files = upstream.ingested[-1]
    assert collection == "fresh" and files == []
    assert sent.documents[0].metadata == {"team": "a"} and sent.documents[0].format == "markdown"
    # the collection it created is known to chat at once
    chat = await client.post(
        "/v1/chat",
        json={"messages": [{"role": "user", "content": "q"}], "collection": "fresh"},
    )
    assert chat.status_code == 200


@pytest.mark.parametrize("url", ["javascript:alert(1)", "data:text/html,x", "/relative"])
async def test_a_url_that_is_not_http_is_refused(
    client: httpx.AsyncClient, upstream: Any, error_json: Any, url: str
) -> None:
    body = {"documents": [{"source_id": "a.md", "content": "# A\n\ntext", "url": url}]}
    response = await client.post("/v1/admin/collections/docs/documents", json=body, headers=ADMIN)
    assert response.status_code == 422
    assert "http" in error_json(response)["message"]
    assert upstream.ingested == []  # refused at the edge: nothing reached the retriever


async def test_ingest_uploaded_files(client: httpx.AsyncClient, upstream: Any) -> None:
    files = [
        ("files", ("a.md", b"# A\n\ntext", "text/markdown")),
        ("files", ("b.html", b"<h1>B</h1>", "text/html")),
    ]
    response = await client.post("/v1/admin/collections/docs/files", files=files, headers=ADMIN)
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert accepted["url"] == f"/v1/admin/jobs/{accepted['job']['id']}"
    assert accepted["job"]["state"] == "queued" and accepted["job"]["kind"] == "ingest"
    _, _, sent = upstream.ingested[-1]
    assert sent == [("a.md", b"# A\n\ntext"), ("b.html", b"<h1>B</h1>")]
    job = await client.get(accepted["url"], headers=ADMIN)
    assert job.status_code == 200 and job.json()["counts"]["ingested"] == 2
    assert [d["source_id"] for d in job.json()["documents"]] == ["a.md", "b.html"]


async def test_ingest_job_is_202_and_followed_by_its_routes(
    client: httpx.AsyncClient, upstream: Any, error_json: Any
) -> None:
    body = {"documents": [{"source_id": "a.md", "content": "# A\n\ntext"}]}
    response = await client.post("/v1/admin/collections/docs/documents", json=body, headers=ADMIN)
    assert response.status_code == 202, response.text
    job = response.json()["job"]
    assert (job["state"], job["finished_at"], job["delta"]) == ("queued", None, None)
    url = response.json()["url"]

    events = await client.get(f"{url}/events", headers=ADMIN)
    assert events.status_code == 200
    assert events.headers["content-type"].startswith("text/event-stream")
    names = [ln[6:].strip() for ln in events.text.splitlines() if ln.startswith("event:")]
    assert names == ["progress", "done"]
    done = json.loads([ln[5:] for ln in events.text.splitlines() if ln.startswith("data:")][-1])
    assert done["state"] == "succeeded" and done["documents"][0]["source_id"] == "a.md"

    listed = await client.get("/v1/admin/jobs", params={"collection": "docs"}, headers=ADMIN)
    assert [j["id"] for j in listed.json()["jobs"]] == [job["id"]]
    cancelled = await client.post(f"{url}/cancel", headers=ADMIN)
    assert cancelled.status_code == 200, "a finished job is returned as it is"
    missing = await client.get(f"/v1/admin/jobs/{'f' * 32}", headers=ADMIN)
    assert missing.status_code == 404 and error_json(missing)["code"] == "not_found"
    assert (await client.get("/v1/admin/jobs/not-an-id", headers=ADMIN)).status_code == 422
    assert (await client.get(url)).status_code == 401, "jobs are admin routes"


async def test_upload_of_two_files_with_one_name_is_422(
    client: httpx.AsyncClient, error_json: Any
) -> None:
    files = [("files", ("a.md", b"1", "text/plain")), ("files", ("a.md", b"2", "text/plain"))]
    response = await client.post("/v1/admin/collections/docs/files", files=files, headers=ADMIN)
    assert response.status_code == 422
    assert "two files have the source id 'a.md'" in error_json(response)["message"]


async def test_upload_size_has_its_own_limit(make_client: Any, error_json: Any) -> None:
    client = make_client(
        admin_api_keys="ops:admin-secret-1", max_body_bytes=2048, max_upload_bytes=8192
    )
    small = [("files", ("a.md", b"x" * 4000, "text/plain"))]
    ok = await client.post("/v1/admin/collections/docs/files", files=small, headers=ADMIN)
    assert ok.status_code == 202
    big = [("files", ("a.md", b"x" * 9000, "text/plain"))]
    refused = await client.post("/v1/admin/collections/docs/files", files=big, headers=ADMIN)
    assert refused.status_code == 413
    assert error_json(refused)["code"] == "payload_too_large"


async def test_delete_by_source(client: httpx.AsyncClient) -> None:
    response = await client.delete(
        "/v1/admin/collections/docs/documents",
        params={"source_id": "https://example.com/a b"},
        headers=ADMIN,
    )
    assert response.status_code == 200
    assert response.json() == {
        "collection": "docs",
        "source_id": "https://example.com/a b",
        "deleted": 2,
    }


async def test_retriever_down_is_503_naming_it(
    client: httpx.AsyncClient, upstream: Any, error_json: Any
) -> None:
    upstream.error = Unavailable("retriever is unavailable", dependency="retriever")
    response = await client.post("/v1/admin/collections", json={"name": "x"}, headers=ADMIN)
    assert response.status_code == 503
    assert error_json(response)["dependency"] == "retriever"
