"""The OpenAPI document: the app's own equals the committed copy (contract drift is
a reviewed change), and it documents what clients rely on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from groundwire_gateway.openapi import COMMITTED, document, main, render


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return document()


def test_committed_copy_is_current(doc: dict[str, Any], repo_root: Path) -> None:
    committed = repo_root / "services" / "gateway" / "openapi.json"
    assert COMMITTED == committed
    assert committed.read_text() == render(doc), (
        "the API changed: review it, then run `python -m groundwire_gateway.openapi`"
    )
    assert main(["--check"]) == 0


def test_check_fails_on_a_stale_copy(tmp_path: Path) -> None:
    stale = tmp_path / "openapi.json"
    stale.write_text("{}\n")
    assert main(["--check", "--out", str(stale)]) == 1
    assert main(["--out", str(stale)]) == 0
    assert main(["--check", "--out", str(stale)]) == 0


def test_every_route_is_documented(doc: dict[str, Any]) -> None:
    assert {
        "/v1/chat": {"post"},
        "/v1/chat/completions": {"post"},
        "/v1/models": {"get"},
        "/v1/search": {"post"},
        "/v1/admin/collections": {"get", "post"},
        "/v1/admin/keys": {"get", "post"},
        "/v1/admin/keys/{key_id}": {"delete"},
        "/v1/admin/collections/{name}": {"get", "delete"},
        "/v1/admin/collections/{name}/documents": {"post", "delete"},
        "/v1/admin/collections/{name}/files": {"post"},
        "/v1/health": {"get"},
        "/healthz": {"get"},
        "/metrics": {"get"},
        "/v1/admin/collections/{name}/sources": {"get"},
        "/v1/sources/view": {"get"},
        "/v1/admin/jobs": {"get"},
        "/v1/admin/jobs/{job_id}": {"get"},
        "/v1/admin/jobs/{job_id}/events": {"get"},
        "/v1/admin/jobs/{job_id}/cancel": {"post"},
        "/v1/admin/collections/{name}/sync": {"post"},
        "/v1/conversations": {"get"},
        "/v1/conversations/{conversation_id}": {"get"},
        "/v1/feedback": {"post"},
        "/v1/admin/report": {"get"},
    } == {path: set(ops) for path, ops in doc["paths"].items()}


def test_limits_and_auth_are_documented(doc: dict[str, Any]) -> None:
    chat = doc["paths"]["/v1/chat"]["post"]
    assert chat["responses"]["429"]["headers"]["Retry-After"]["required"] is True
    assert {} in chat["security"]  # a key is optional on public routes
    admin = doc["paths"]["/v1/admin/collections"]["get"]
    assert {} not in admin["security"] and "401" in admin["responses"]
    assert set(doc["components"]["securitySchemes"]) == {"bearer", "apiKey"}


def test_chat_stream_events_are_documented(doc: dict[str, Any]) -> None:
    stream = doc["paths"]["/v1/chat"]["post"]["responses"]["200"]["content"]["text/event-stream"]
    events = {
        e["properties"]["event"]["const"]: e["properties"]["data"]["contentSchema"]["$ref"]
        for e in stream["schema"]["oneOf"]
    }
    assert set(events) == {"retrieval", "delta", "reset", "citations", "stages", "done", "error"}
    for ref in events.values():
        assert ref.rsplit("/", 1)[-1] in doc["components"]["schemas"]
    messages = doc["components"]["schemas"]["ChatBody"]["properties"]["messages"]
    assert messages["maxItems"] == 20


def test_the_upload_body_and_the_source_routes_are_documented(doc: dict[str, Any]) -> None:
    upload = doc["paths"]["/v1/admin/collections/{name}/files"]["post"]
    form = upload["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert form["required"] == ["files"] and form["properties"]["files"]["maxItems"] == 100
    assert {} not in upload["security"]
    view = doc["paths"]["/v1/sources/view"]["get"]
    assert {} in view["security"] and "text/html" in view["responses"]["200"]["content"]
    listing = doc["paths"]["/v1/admin/collections/{name}/sources"]["get"]
    assert {p["name"] for p in listing["parameters"]} == {"name", "page_token", "limit"}
