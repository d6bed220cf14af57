"""The gateway's HTTP layer against an injected fake upstream: validation at the
edge, the one error table to HTTP, request ids, body limits and /v1/health.

``upstream`` (FakeUpstream) and ``make_client`` come from conftest.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from groundwire_core.errors import (
    BackendFailure,
    DeadlineExceeded,
    GroundwireError,
    InvalidInput,
    NotFound,
    Overloaded,
    Unavailable,
)
from groundwire_gateway import models

MAX_BODY = 200_000
NOT_SERVING = models.DependencyOut(status="not_serving", target="127.0.0.1:2", message="down")
DISABLED = models.DependencyOut(status="disabled")


@pytest.fixture
def client(make_client: Any) -> httpx.AsyncClient:
    client: httpx.AsyncClient = make_client(max_body_bytes=MAX_BODY, default_collection="docs")
    return client


def _error(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["request_id"], str) and error["request_id"] not in ("", "-")
    return error


async def test_search_answers(client: httpx.AsyncClient, upstream: Any) -> None:
    response = await client.post(
        "/v1/search", json={"query": "install", "limit": 3}, headers={"x-request-id": "rid-ok"}
    )
    assert response.status_code == 200
    body = response.json()
    assert body["collection"] == "docs"
    assert body["request_id"] == "rid-ok"
    assert [r["chunk_id"] for r in body["results"]] == ["c1"]
    assert body["stages"][0]["name"] == "retrieve"
    sent, collection, rid = upstream.calls[-1]
    assert (sent.query, sent.limit, sent.rerank, collection, rid) == (
        "install",
        3,
        True,
        "docs",
        "rid-ok",
    )


async def test_search_passes_collection_and_filters(
    client: httpx.AsyncClient, upstream: Any
) -> None:
    response = await client.post(
        "/v1/search",
        json={
            "query": "q",
            "collection": "team_notes-2",
            "filters": [{"field": "type", "any_of": ["guide", "faq"]}],
            "rerank": False,
        },
    )
    assert response.status_code == 200, response.text
    sent, collection, _ = upstream.calls[-1]
    assert collection == "team_notes-2"
    assert [(f.field, f.any_of) for f in sent.filters] == [("type", ["guide", "faq"])]
    assert sent.rerank is False


BIG = "needle " * 15_000  # about 100 KB, under the body limit


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ({"query": ""}, "query"),
        ({"query": "   \n\t "}, "query"),
        ({"query": BIG}, "query"),
        ({"query": 42}, "query"),
        ({"query": "q", "limit": "5"}, "limit"),
        ({"query": "q", "limit": 0}, "limit"),
        ({"query": "q", "limit": 51}, "limit"),
        ({"query": "q", "unknown": 1}, "unknown"),
        ({"query": "q", "collection": "Bad Name!"}, "collection"),
        ({"query": "q", "collection": "x" * 65}, "collection"),
        ({"query": "q", "filters": [{"field": "", "any_of": ["a"]}]}, "filters"),
        ({"limit": 3}, "query"),
    ],
    ids=[
        "empty",
        "blank",
        "100KB",
        "int-query",
        "string-limit",
        "zero-limit",
        "big-limit",
        "unknown-field",
        "bad-collection",
        "long-collection",
        "empty-filter-field",
        "missing-query",
    ],
)
async def test_invalid_bodies_are_422(
    client: httpx.AsyncClient, upstream: Any, payload: dict[str, Any], where: str
) -> None:
    response = await client.post("/v1/search", json=payload)
    assert response.status_code == 422
    error = _error(response)
    assert error["code"] == "invalid_input"
    assert where in error["message"]
    assert response.headers["x-request-id"] == error["request_id"]
    assert "needle needle" not in response.text
    assert len(response.content) < 2000
    assert upstream.calls == []


async def test_malformed_json_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/search", content=b'{"query": ', headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert _error(response)["code"] == "invalid_input"


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (InvalidInput("the filter field 'x' is not filterable"), 422, "invalid_input"),
        (NotFound("no collection 'docs'", dependency="retriever"), 404, "not_found"),
        (Unavailable("embedder is unavailable", dependency="embedder"), 503, "unavailable"),
        (DeadlineExceeded("llm did not answer", dependency="llm"), 504, "deadline_exceeded"),
        (BackendFailure("reranker failed", dependency="reranker"), 502, "backend_failure"),
        (GroundwireError("odd"), 500, "internal"),
    ],
)
async def test_upstream_errors_map_to_http(
    client: httpx.AsyncClient,
    upstream: Any,
    error: GroundwireError,
    status: int,
    code: str,
) -> None:
    upstream.error = error
    response = await client.post("/v1/search", json={"query": "q"}, headers={"x-request-id": "r1"})
    assert response.status_code == status
    body = _error(response)
    assert body["code"] == code
    assert body["message"] == error.message
    assert body.get("dependency") == error.dependency
    assert body["request_id"] == "r1"
    assert response.headers["x-request-id"] == "r1"
    assert "retry-after" not in response.headers


async def test_unavailable_names_the_dependency(client: httpx.AsyncClient, upstream: Any) -> None:
    upstream.error = Unavailable("embedder is unavailable", dependency="embedder")
    response = await client.post("/v1/search", json={"query": "q"})
    assert response.status_code == 503
    assert _error(response)["dependency"] == "embedder"


async def test_not_found_is_404(client: httpx.AsyncClient, upstream: Any) -> None:
    upstream.error = NotFound("no collection 'nope'")
    response = await client.post("/v1/search", json={"query": "q", "collection": "nope"})
    assert response.status_code == 404
    error = _error(response)
    assert error["code"] == "not_found"
    assert "dependency" not in error


@pytest.mark.parametrize(("retry_after_s", "header"), [(2, "2"), (0.2, "1"), (30.0, "30")])
async def test_overloaded_is_429_with_retry_after(
    client: httpx.AsyncClient, upstream: Any, retry_after_s: float, header: str
) -> None:
    upstream.error = Overloaded(
        "the reranker is busy", retry_after_s=retry_after_s, dependency="reranker"
    )
    response = await client.post("/v1/search", json={"query": "q"})
    assert response.status_code == 429
    assert response.headers["retry-after"] == header
    error = _error(response)
    assert (error["code"], error["dependency"]) == ("overloaded", "reranker")


async def test_unexpected_error_is_500_without_internals(
    client: httpx.AsyncClient, upstream: Any
) -> None:
    upstream.error = RuntimeError("secret")
    response = await client.post("/v1/search", json={"query": "q"})
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal"
    assert response.json()["error"]["message"] == "internal error"
    assert "secret" not in response.text
    assert "Traceback" not in response.text
    assert "RuntimeError" not in response.text


async def test_unexpected_error_keeps_the_request_id(
    client: httpx.AsyncClient, upstream: Any
) -> None:
    upstream.error = RuntimeError("secret")
    response = await client.post(
        "/v1/search", json={"query": "q"}, headers={"x-request-id": "rid-500"}
    )
    assert response.status_code == 500
    assert response.json()["error"]["request_id"] == "rid-500"
    assert response.headers.get("x-request-id") == "rid-500"


async def test_body_over_the_limit_is_413(client: httpx.AsyncClient, upstream: Any) -> None:
    payload = {"query": "q", "unknown": "z" * (MAX_BODY + 1)}
    response = await client.post("/v1/search", json=payload, headers={"x-request-id": "big"})
    assert response.status_code == 413
    error = _error(response)
    assert error["code"] == "payload_too_large"
    assert error["request_id"] == "big"
    assert response.headers["x-request-id"] == "big"
    assert "zzzz" not in response.text
    assert upstream.calls == []


async def test_chunked_body_over_the_limit_is_413(client: httpx.AsyncClient, upstream: Any) -> None:
    # No content-length: the limit must hold for the bytes actually received.
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"query": "'
        for _ in range(3):
            yield b"q" * MAX_BODY
        yield b'"}'

    response = await client.post(
        "/v1/search", content=chunks(), headers={"content-type": "application/json"}
    )
    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert _error(response)["code"] == "payload_too_large"
    assert upstream.calls == []


async def test_unknown_route_is_404_json(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/nope", headers={"x-request-id": "r404"})
    assert response.status_code == 404
    error = _error(response)
    assert error["code"] == "not_found"
    assert error["request_id"] == "r404"


async def test_wrong_method_is_405_json(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/search")
    assert response.status_code == 405
    assert _error(response)["code"] == "method_not_allowed"


async def test_request_id_is_echoed(client: httpx.AsyncClient) -> None:
    for rid in ("abc-123", "A.b_C-9", "x" * 128):
        response = await client.get("/healthz", headers={"x-request-id": rid})
        assert response.status_code == 200
        assert response.headers["x-request-id"] == rid


@pytest.mark.parametrize(
    "bad",
    [
        "x" * 129,
        "tab\there",
        "abc rid=forged trace=0af7651916cd43dd",  # would forge log fields
        'quote"d',
        "semi;colon",
    ],
)
async def test_unusable_request_id_is_replaced(client: httpx.AsyncClient, bad: str) -> None:
    response = await client.post("/v1/search", json={"query": ""}, headers={"x-request-id": bad})
    rid = response.headers["x-request-id"]
    assert rid != bad and len(rid) == 32
    assert _error(response)["request_id"] == rid


async def test_request_id_is_made_when_missing(client: httpx.AsyncClient) -> None:
    first = await client.get("/healthz")
    second = await client.get("/healthz")
    assert len(first.headers["x-request-id"]) == 32
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


async def test_health_ok(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert set(body["dependencies"]) == {
        "orchestrator",
        "retriever",
        "embedder",
        "reranker",
        "redis",
    }
    # no Redis URL: the limits run in process, and health says so
    assert body["dependencies"]["redis"]["status"] == "disabled"
    assert body["limits"] == {
        "backend": "in_process",
        "policy": "open",
        "state": "ok",
        "message": "",
    }


@pytest.mark.parametrize(
    ("changes", "http_status", "status"),
    [
        # search and chat answer from BM25 without the embedder
        ({"embedder": NOT_SERVING}, 200, "degraded"),
        ({"retriever": NOT_SERVING}, 503, "down"),
        ({"orchestrator": NOT_SERVING}, 503, "down"),
        ({"retriever": None}, 503, "down"),
        ({"reranker": NOT_SERVING}, 200, "degraded"),
        ({"reranker": DISABLED}, 200, "ok"),
        ({"reranker": None, "llm": DISABLED}, 200, "ok"),
    ],
)
async def test_health_status(
    client: httpx.AsyncClient,
    upstream: Any,
    changes: dict[str, models.DependencyOut | None],
    http_status: int,
    status: str,
) -> None:
    for name, dep in changes.items():
        if dep is None:
            upstream.deps.pop(name, None)
        else:
            upstream.deps[name] = dep
    response = await client.get("/v1/health")
    assert response.status_code == http_status
    body = response.json()
    assert body["status"] == status
    assert set(body["dependencies"]) == set(upstream.deps) | {"redis"}
    if "embedder" in upstream.deps:
        assert body["dependencies"]["embedder"]["status"] == upstream.deps["embedder"].status


async def test_openapi_documents_the_error_body(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    responses = schema["paths"]["/v1/search"]["post"]["responses"]
    assert {"404", "413", "422", "429", "500", "503"} <= set(responses)
    assert "ErrorResponse" in responses["503"]["content"]["application/json"]["schema"]["$ref"]
