"""Red team, first part (#24 acceptance 1: tenants and keys): two tenants, every route
tried with no key, the other tenant's keys and a read key on write routes. No answer
may carry the other tenant's collection names, document titles or text, and the
upstream must never be asked about the other tenant's collections.

Table-driven on purpose: ``ATTEMPTS`` lists (route, request); ``CALLERS`` lists who
tries. End-user tokens and per-document access (H11) add rows and callers here.
Each attempt and its answer is printed (``pytest -s`` shows the list).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from groundwire_gateway import models
from tests.unit.gateway.conftest import ClientFactory, FakeUpstream

OPERATOR = "operator-secret-key-1"
# beta's secrets: none of these may reach a caller that is not beta's
BETA_COLLECTION = "beta-plans"
BETA_HIDDEN_COLLECTION = "beta-roadmap"  # never named in any request
BETA_TITLE = "Beta launch codes"
BETA_TEXT = "LAUNCH-CODE-7781"
SECRETS = (BETA_HIDDEN_COLLECTION, BETA_TITLE, BETA_TEXT)
ASK = [{"role": "user", "content": "what are the launch codes?"}]
DOC = {"documents": [{"source_id": "x.md", "content": "overwrite"}]}
SYNC = {"source": "/srv/elsewhere"}
BETA_JOB = f"{1:032x}"  # the first job of the in-memory upstream: a sync of beta's


@dataclass(frozen=True)
class Attempt:
    method: str
    path: str
    json: dict[str, Any] | None = None
    params: dict[str, str] = field(default_factory=dict)
    writes: bool = False


ATTEMPTS = [
    Attempt("POST", "/v1/search", {"query": "launch codes", "collection": BETA_COLLECTION}),
    Attempt("POST", "/v1/chat", {"messages": ASK, "collection": BETA_COLLECTION}),
    Attempt(
        "POST", "/v1/chat/completions", {"model": f"groundwire:{BETA_COLLECTION}", "messages": ASK}
    ),
    Attempt("GET", "/v1/models"),
    Attempt(
        "GET", "/v1/sources/view", params={"collection": BETA_COLLECTION, "source_id": "codes.md"}
    ),
    Attempt("GET", "/v1/admin/collections"),
    Attempt("GET", f"/v1/admin/collections/{BETA_COLLECTION}"),
    Attempt("GET", f"/v1/admin/collections/{BETA_COLLECTION}/sources"),
    Attempt("DELETE", f"/v1/admin/collections/{BETA_COLLECTION}", writes=True),
    Attempt("POST", f"/v1/admin/collections/{BETA_COLLECTION}/documents", DOC, writes=True),
    Attempt(
        "DELETE",
        f"/v1/admin/collections/{BETA_COLLECTION}/documents",
        params={"source_id": "codes.md"},
        writes=True,
    ),
    Attempt("POST", f"/v1/admin/collections/{BETA_COLLECTION}/sync", SYNC, writes=True),
    Attempt("GET", "/v1/admin/jobs"),
    Attempt("GET", f"/v1/admin/jobs/{BETA_JOB}"),
    Attempt("GET", f"/v1/admin/jobs/{BETA_JOB}/events"),
    Attempt("POST", f"/v1/admin/jobs/{BETA_JOB}/cancel", writes=True),
    Attempt("GET", "/v1/admin/keys", params={"tenant": "beta"}),
    Attempt("POST", "/v1/admin/keys", {"role": "admin", "tenant": "beta"}, writes=True),
]
# who tries: label -> (tenant, role) of a created key, or None for no key
CALLERS: dict[str, tuple[str, str] | None] = {
    "no key": None,
    "acme read key": ("acme", "read"),
    "acme write key": ("acme", "write"),
    "acme admin key": ("acme", "admin"),
}


def beta_touched(upstream: FakeUpstream) -> list[str]:
    """Every upstream call that named one of beta's collections."""
    names = {BETA_COLLECTION, BETA_HIDDEN_COLLECTION}
    touched = [f"search {c}" for _, c, *_ in upstream.calls if c in names]
    touched += [f"ask {a['collection']}" for a in upstream.asks if a["collection"] in names]
    touched += [f"ingest {c}" for c, *_ in upstream.ingested if c in names]
    touched += [f"read {c}" for c, _ in upstream.reads if c in names]
    touched += [f"sources {c}" for c, *_ in upstream.source_pages if c in names]
    touched += [f"dropped {n}" for n in names if n not in upstream.collections]
    jobs = [j for j in upstream.jobs.jobs.values() if j.collection in names]
    touched += [f"job {j.collection}" for j in jobs[1:]]  # the first is the setup's
    return touched


@pytest.fixture
async def setup(
    make_client: ClientFactory, upstream: FakeUpstream
) -> tuple[httpx.AsyncClient, dict[str, str]]:
    upstream.add_collection("acme-handbook", [], tenant="acme")
    upstream.add_collection(BETA_COLLECTION, [], tenant="beta")
    upstream.add_collection(BETA_HIDDEN_COLLECTION, [], tenant="beta")
    upstream.documents["codes.md"] = models.StoredDocument(
        collection=BETA_COLLECTION,
        source_id="codes.md",
        title=BETA_TITLE,
        url="",
        doc_type="md",
        total=1,
        chunks=[models.StoredChunk(chunk_id="c0", chunk_index=0, heading_path=[], text=BETA_TEXT)],
    )
    job = await upstream.jobs.start_sync(BETA_HIDDEN_COLLECTION, None)
    assert job.id == BETA_JOB
    client = make_client(admin_api_keys=f"ops:{OPERATOR}")
    keys: dict[str, str] = {}
    for label, scope in {**CALLERS, "beta read key": ("beta", "read")}.items():
        if scope is None:
            continue
        made = await client.post(
            "/v1/admin/keys",
            json={"tenant": scope[0], "role": scope[1]},
            headers={"Authorization": f"Bearer {OPERATOR}"},
        )
        assert made.status_code == 201, made.text
        keys[label] = made.json()["key"]
    return client, keys


async def _try(client: httpx.AsyncClient, attempt: Attempt, key: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return await client.request(
        attempt.method, attempt.path, json=attempt.json, params=attempt.params, headers=headers
    )


async def test_no_route_shows_another_tenants_collections(
    setup: tuple[httpx.AsyncClient, dict[str, str]], upstream: FakeUpstream
) -> None:
    client, keys = setup
    leaks: list[str] = []
    for label in CALLERS:
        for attempt in ATTEMPTS:
            answer = await _try(client, attempt, keys.get(label))
            body = answer.text
            print(f"{label:15} {attempt.method:6} {attempt.path:48} -> {answer.status_code}")
            leaked = [s for s in SECRETS if s in body]
            ok = answer.status_code in (401, 403, 404) or (
                answer.is_success and BETA_COLLECTION not in body
            )
            if leaked or not ok:
                leaks.append(
                    f"{label} {attempt.method} {attempt.path}: {answer.status_code} {body}"
                )
    assert not leaks, "\n".join(leaks)
    assert beta_touched(upstream) == [], "the upstream was asked about beta's collections"


async def test_the_owner_sees_what_the_others_do_not(
    setup: tuple[httpx.AsyncClient, dict[str, str]], upstream: FakeUpstream
) -> None:
    """The control: the same requests with beta's own key do reach beta's collection,
    so the refusals above are the tenants' doing, not a broken request."""
    client, keys = setup
    models_list = await client.get(
        "/v1/models", headers={"Authorization": f"Bearer {keys['beta read key']}"}
    )
    assert BETA_HIDDEN_COLLECTION in models_list.text
    view = await _try(client, ATTEMPTS[4], keys["beta read key"])
    assert view.status_code == 200 and BETA_TEXT in view.text
    search = await _try(client, ATTEMPTS[0], keys["beta read key"])
    assert search.status_code == 200 and beta_touched(upstream)
    beta_reader = {"Authorization": f"Bearer {keys['beta read key']}"}
    assert (await client.get("/v1/admin/jobs", headers=beta_reader)).status_code == 403
    # a read key of the owner still may not write (read key on a write route)
    for attempt in (a for a in ATTEMPTS if a.writes):
        refused = await _try(client, attempt, keys["beta read key"])
        print(f"beta read key   {attempt.method:6} {attempt.path:48} -> {refused.status_code}")
        assert refused.status_code in (401, 403), refused.text


async def test_anonymous_callers_see_only_public_collections(
    setup: tuple[httpx.AsyncClient, dict[str, str]],
) -> None:
    client, _ = setup
    names = {m["id"] for m in (await client.get("/v1/models")).json()["data"]}
    assert "groundwire:docs" in names
    assert not names & {"groundwire:acme-handbook", f"groundwire:{BETA_COLLECTION}"}
