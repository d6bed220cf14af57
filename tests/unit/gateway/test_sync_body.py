"""The sync route's body is strict like the other request bodies: a value of the wrong
JSON type is a 422 and nothing is queued (`"dry_run": 0` must not start a real sync)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

ADMIN = {"authorization": "Bearer admin-secret-1"}
URL = "/v1/admin/collections/docs/sync"


@pytest.fixture
def client(make_client: Any) -> httpx.AsyncClient:
    c: httpx.AsyncClient = make_client(admin_api_keys="ops:admin-secret-1")
    return c


@pytest.mark.parametrize(
    "wrong",
    [
        {"dry_run": 0},
        {"dry_run": "false"},
        {"git": 1},
        {"git": "yes"},
        {"page_limit": "5"},
        {"max_bytes": 1.5},
        {"delay_s": "1"},
        {"include": "*.md"},
        {"max_bytes": 2**64},  # over the RPC's uint64: a 422, not a failed conversion
    ],
)
async def test_a_value_of_the_wrong_type_is_422_and_queues_nothing(
    client: httpx.AsyncClient, upstream: Any, error_json: Any, wrong: dict[str, Any]
) -> None:
    response = await client.post(URL, json={"source": "/srv/docs", **wrong}, headers=ADMIN)
    assert response.status_code == 422, response.text
    assert error_json(response)["code"] == "invalid_input"
    assert upstream.jobs.jobs == {}


async def test_a_well_typed_body_is_queued(client: httpx.AsyncClient, upstream: Any) -> None:
    # an integer delay is a number in JSON: strict mode keeps int -> float
    # and JSON Schema's integers include 5.0
    body = {"source": "/srv/docs", "git": True, "delay_s": 2, "page_limit": 5.0}
    response = await client.post(URL, json=body, headers=ADMIN)
    assert response.status_code == 202, response.text
    assert response.json()["job"]["kind"] == "sync"
    assert len(upstream.jobs.jobs) == 1
