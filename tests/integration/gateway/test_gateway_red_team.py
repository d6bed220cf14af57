"""Red team, round two (#31), the gateway's side: each defect as it was reproduced,
held as an attack that must fail. The gateway app runs on the in-memory upstream
(httpx over ASGI), with a recording upstream where an attack is decided further down
(the identity a request carries to the retriever, the tokens a chat reports).

1. a tenant's admin key reads the operator's access-restricted documents;
7. a collection-scoped admin key mints an unscoped key, lists and revokes every key;
11. a tenant's admin gets the operator's health view; `config show` prints passwords;
12. unauthenticated ``GET /mcp`` streams never end;
15. gRPC servers answer the clients' keepalive pings with GOAWAY too_many_pings;
19. concurrent chats overshoot a tenant's token budget;
20. a chat's LLM calls beyond its answer are never charged;
cosmetic: ``/mcp`` counted as "unmatched"; an IPv6 loopback URL read as a folder; a
scoped admin key creates a collection it then cannot see or drop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import grpc
import httpx
import httpx2
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from groundwire_cli.__main__ import main
from groundwire_core.grpc.server import client_keepalive_options, server_keepalive_options
from groundwire_core.identity import Identity, current_identity
from groundwire_core.urls import is_web_url
from groundwire_gateway import models
from groundwire_gateway.app import create_app
from groundwire_gateway.limits import Ask, Limiter, LocalCounters, Verdict
from groundwire_gateway.settings import GatewaySettings
from groundwire_gateway.state import UpstreamApi
from groundwire_retriever.access import caller_access
from groundwire_retriever.domain import CollectionSpec
from tests.unit.gateway.conftest import FakeUpstream

OPERATOR = "operator-red-team-key-31"
HANDBOOK = "handbook"  # the operator's public collection
ACME_NOTES = "acme-notes"
HR_SOURCE = "hr/layoffs.md"


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


class RecordingUpstream(FakeUpstream):
    """The in-memory upstream, noting the identity each retriever-bound call carries
    (what the interceptor would send down as metadata)."""

    def __init__(self) -> None:
        super().__init__()
        self.identities: list[tuple[str, str, Identity | None]] = []
        self.llm_tokens: int | None = None

    def _note(self, what: str, collection: str) -> None:
        self.identities.append((what, collection, current_identity()))

    async def search(self, body: models.SearchBody, collection: str) -> Any:
        self._note("search", collection)
        return await super().search(body, collection)

    async def list_sources(self, collection: str, page_token: str = "", limit: int = 100) -> Any:
        self._note("sources", collection)
        return await super().list_sources(collection, page_token, limit)

    async def read_source(self, collection: str, source_id: str) -> models.StoredDocument:
        self._note("read", collection)
        return await super().read_source(collection, source_id)

    def ask(self, messages: list[models.ChatMessage], collection: str, *a: Any, **k: Any) -> Any:
        self._note("ask", collection)
        stream = super().ask(messages, collection, *a, **k)
        stream.llm_tokens = self.llm_tokens
        return stream


@pytest.fixture
def upstream() -> RecordingUpstream:
    up = RecordingUpstream()
    up.add_collection(HANDBOOK, [])
    up.add_collection(ACME_NOTES, [], tenant="acme")
    up.documents[HR_SOURCE] = models.StoredDocument(
        collection=HANDBOOK,
        source_id=HR_SOURCE,
        title="Layoffs",
        url="",
        doc_type="md",
        total=1,
        chunks=[models.StoredChunk(chunk_id="c0", chunk_index=0, heading_path=[], text="x")],
    )
    return up


@asynccontextmanager
async def gateway(
    upstream: FakeUpstream, limiter: Limiter | None = None, **settings: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a fresh app with its lifespan running (the MCP transport needs it)."""
    app = create_app(
        GatewaySettings(**{"admin_api_keys": f"ops:{OPERATOR}", **settings}),
        cast(UpstreamApi, upstream),
        limiter=limiter,
    )
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://gateway") as client,
    ):
        client.app = app  # type: ignore[attr-defined]
        yield client


async def make_key(
    client: httpx.AsyncClient, role: str, collections: list[str] | None = None, by: str = OPERATOR
) -> httpx.Response:
    body: dict[str, Any] = {"role": role, "collections": collections}
    if by == OPERATOR:
        body["tenant"] = "acme"
    return await client.post("/v1/admin/keys", json=body, headers=bearer(by))


# --- 1: one rule for who sees a document ------------------------------------------------------

ASK = [{"role": "user", "content": "who is laid off?"}]


def reads(collection: str) -> list[tuple[str, str, str, dict[str, Any]]]:
    """Every HTTP route that reads documents of ``collection``."""
    return [
        ("search", "POST", "/v1/search", {"json": {"query": "q", "collection": collection}}),
        ("sources list", "GET", f"/v1/admin/collections/{collection}/sources", {}),
        (
            "source view",
            "GET",
            "/v1/sources/view",
            {"params": {"collection": collection, "source_id": HR_SOURCE}},
        ),
        ("chat", "POST", "/v1/chat", {"json": {"messages": ASK, "collection": collection}}),
        (
            "completions",
            "POST",
            "/v1/chat/completions",
            {"json": {"model": f"groundwire:{collection}", "messages": ASK}},
        ),
    ]


async def test_a_tenant_admin_is_bound_by_access_lists_outside_its_own_collections(
    upstream: RecordingUpstream,
) -> None:
    async with gateway(upstream) as client:
        made = await make_key(client, "admin")
        assert made.status_code == 201, made.text
        acme_admin = bearer(made.json()["key"])
        for collection in (HANDBOOK, ACME_NOTES):
            for label, method, path, kwargs in reads(collection):
                response = await client.request(method, path, headers=acme_admin, **kwargs)
                assert response.status_code == 200, (label, collection, response.text)
        await _mcp_read(client, acme_admin)
        operator = await client.post(
            "/v1/search", json={"query": "q", "collection": HANDBOOK}, headers=bearer(OPERATOR)
        )
        assert operator.status_code == 200
    *by_acme, (_, _, by_operator) = upstream.identities
    owners = {HANDBOOK: "public", ACME_NOTES: "acme"}
    report = []
    for what, collection, identity in by_acme:
        assert identity is not None, what
        # the identity as the retriever reads it back from the call's metadata, and
        # the filter it applies with the owner its stored spec names
        wire = Identity.from_metadata(identity.to_metadata())
        spec = CollectionSpec(name=collection, dense_dims=4, tenant=owners[collection])
        report.append((what, collection, caller_access(spec, wire)))
    print("\n".join(f"{w:<8} {c:<12} -> {a}" for w, c, a in report))
    on_public = [a for _, c, a in report if c == HANDBOOK]
    on_own = [a for _, c, a in report if c == ACME_NOTES]
    # the operator's public collection: the lists bind acme's admin like any caller
    # (search, sources, view, chat, completions, MCP read_document)
    assert on_public == [("public",)] * 6, report
    # its own tenant's collection: it manages the data, no filter
    assert on_own == [None] * 5, report
    # the operator sees every document of every collection
    assert by_operator is not None
    wire = Identity.from_metadata(by_operator.to_metadata())
    assert caller_access(CollectionSpec(name=HANDBOOK, dense_dims=4), wire) is None


async def _mcp_read(client: httpx.AsyncClient, headers: dict[str, str]) -> None:
    """MCP ``read_document`` of the restricted source in the operator's collection."""
    app = client.app  # type: ignore[attr-defined]
    http = httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="http://gateway", headers=headers
    )
    async with http, Client(streamable_http_client("http://gateway/mcp", http_client=http)) as c:
        read = await c.call_tool("read_document", {"source_id": HR_SOURCE, "collection": HANDBOOK})
    assert not read.is_error, read


# --- 7 and a cosmetic one: a collection-scoped admin key stays in its scope ------------------


async def test_a_scoped_admin_key_mints_lists_and_revokes_only_within_its_scope(
    upstream: RecordingUpstream,
) -> None:
    upstream.add_collection("acme-b", [], tenant="acme")
    async with gateway(upstream) as client:
        scoped = (await make_key(client, "admin", [ACME_NOTES])).json()
        unscoped = (await make_key(client, "read")).json()
        other = (await make_key(client, "read", ["acme-b"])).json()
        mine = (await make_key(client, "read", [ACME_NOTES])).json()
        key = scoped["key"]
        attempts = {
            "mint unscoped admin": await make_key(client, "admin", None, by=key),
            "mint read of acme-b": await make_key(client, "read", ["acme-b"], by=key),
            "mint wider": await make_key(client, "read", [ACME_NOTES, "acme-b"], by=key),
            "revoke unscoped": await client.delete(
                f"/v1/admin/keys/{unscoped['key_id']}", headers=bearer(key)
            ),
            "revoke acme-b's": await client.delete(
                f"/v1/admin/keys/{other['key_id']}", headers=bearer(key)
            ),
            "create acme-c": await client.post(
                "/v1/admin/collections", json={"name": "acme-c"}, headers=bearer(key)
            ),
        }
        print({k: v.status_code for k, v in attempts.items()})
        assert {k: v.status_code for k, v in attempts.items()} == {
            "mint unscoped admin": 403,
            "mint read of acme-b": 403,
            "mint wider": 403,
            "revoke unscoped": 404,  # as a key that does not exist
            "revoke acme-b's": 404,
            "create acme-c": 403,
        }
        listed = await client.get("/v1/admin/keys", headers=bearer(key))
        assert listed.status_code == 200
        assert {k["key_id"] for k in listed.json()["keys"]} == {scoped["key_id"], mine["key_id"]}
        # within its scope it does what an admin does
        minted = await make_key(client, "read", [ACME_NOTES], by=key)
        assert minted.status_code == 201 and minted.json()["collections"] == [ACME_NOTES]
        gone = await client.delete(f"/v1/admin/keys/{mine['key_id']}", headers=bearer(key))
        assert gone.status_code == 204
        # the operator still sees every acme key, the unscoped one included
        everyone = await client.get("/v1/admin/keys", headers=bearer(OPERATOR))
        assert unscoped["key_id"] in {k["key_id"] for k in everyone.json()["keys"]}


async def test_a_scoped_admin_key_creates_only_collections_it_can_then_see_and_drop(
    upstream: RecordingUpstream,
) -> None:
    async with gateway(upstream) as client:
        key = (await make_key(client, "admin", ["acme-new"])).json()["key"]
        outside = await client.post(
            "/v1/admin/collections", json={"name": "acme-other"}, headers=bearer(key)
        )
        # was 201, and then 404 to its own GET and DELETE: refused before it exists
        assert outside.status_code == 403, outside.text
        assert "acme-other" not in upstream.collections
        made = await client.post(
            "/v1/admin/collections", json={"name": "acme-new"}, headers=bearer(key)
        )
        assert made.status_code == 201, made.text
        seen = await client.get("/v1/admin/collections/acme-new", headers=bearer(key))
        assert seen.status_code == 200, seen.text
        dropped = await client.delete("/v1/admin/collections/acme-new", headers=bearer(key))
        assert dropped.status_code == 200, dropped.text


# --- 11: another tenant's collection names --------------------------------------------------


async def test_a_tenant_admin_cannot_learn_which_names_another_tenant_holds(
    upstream: RecordingUpstream,
) -> None:
    upstream.add_collection("globex-payroll", [], tenant="globex")
    async with gateway(upstream) as client:
        key = (await make_key(client, "admin")).json()["key"]  # tenant acme
        answers = {
            name: await client.post(
                "/v1/admin/collections", json={"name": name}, headers=bearer(key)
            )
            for name in ("globex-payroll", "globex-free", HANDBOOK, "acme-fresh")
        }
        codes = {name: r.status_code for name, r in answers.items()}
        print(codes)
        # was 409 "already exists" for globex-payroll and 201 for globex-free: the
        # answer said which names another tenant holds. Outside its own prefix a tenant
        # admin is refused alike, taken or free; inside it, nobody else's can exist.
        assert codes == {
            "globex-payroll": 403,
            "globex-free": 403,
            HANDBOOK: 403,
            "acme-fresh": 201,
        }
        bodies = {answers[n].json()["error"]["message"] for n in ("globex-payroll", "globex-free")}
        assert len(bodies) == 1 and "acme-<name>" in bodies.pop()
        assert "globex-free" not in upstream.collections
        again = await client.post(
            "/v1/admin/collections", json={"name": "acme-fresh"}, headers=bearer(key)
        )
        assert again.status_code == 409  # its own name: saying so leaks nothing


# --- 11: the operator's health view, credentials in config show -------------------------------


async def test_only_the_operator_gets_the_internal_health_view(
    upstream: RecordingUpstream,
) -> None:
    async with gateway(upstream) as client:
        tenant_admin = (await make_key(client, "admin")).json()["key"]
        views = {
            who: (await client.get("/v1/health", headers=bearer(key))).json()
            for who, key in (("operator", OPERATOR), ("acme admin", tenant_admin))
        }
    assert any(d.get("target") for d in views["operator"]["dependencies"].values())
    leaked = {n: d for n, d in views["acme admin"]["dependencies"].items() if d.get("target")}
    assert not leaked, leaked
    assert "127.0.0.1" not in str(views["acme admin"])


def test_config_show_masks_the_credentials_in_every_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secrets = {
        "GROUNDWIRE_GATEWAY_REDIS_URL": ("redis://:hunter2-redis@127.0.0.1:6379/0", "hunter2"),
        "GROUNDWIRE_RETRIEVER_QDRANT_URL": ("http://admin:qdrant-pw-7@qdrant:6333", "qdrant-pw"),
        "GROUNDWIRE_ORCHESTRATOR_OPENAI_BASE_URL": (
            "https://sk-proxy-token@llm.internal/v1?api_key=sk-query-9",
            "sk-",
        ),
    }
    for name, (value, _) in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GROUNDWIRE_ORCHESTRATOR_OPENAI_STRONG_MODEL", "m")
    monkeypatch.setenv("GROUNDWIRE_HOME", str(tmp_path / "home"))
    with pytest.raises(SystemExit) as exited:
        main(["config", "show"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    leaked = [word for _, word in secrets.values() if word in out]
    assert not leaked, out
    # what is not a credential stays readable: which server, which account
    assert "redis://:**********@127.0.0.1:6379/0" in out
    assert "http://admin:**********@qdrant:6333" in out


# --- 12 (acceptance 3) and a cosmetic one: GET /mcp -------------------------------------------

STREAM_ATTEMPTS = 2000


async def test_unauthenticated_mcp_streams_are_refused_while_the_gateway_answers(
    upstream: RecordingUpstream,
) -> None:
    async with gateway(upstream, api_keys="acme:acme-read-key-31") as client:
        sse = {"accept": "text/event-stream"}

        async def attempt(i: int) -> int:
            # the ASGI transport reads a response to its end: a stream that never ends
            # never returns (the timeout is only the guard against that hang)
            async with asyncio.timeout(60):
                return (await client.get("/mcp", headers=sse)).status_code

        async def meanwhile() -> list[int]:
            codes = [(await client.get("/healthz")).status_code]
            found = await client.post(
                "/v1/search", json={"query": "q"}, headers=bearer("acme-read-key-31")
            )
            return [*codes, found.status_code]

        results = await asyncio.gather(
            *(attempt(i) for i in range(STREAM_ATTEMPTS)), meanwhile(), meanwhile()
        )
        metrics = (await client.get("/metrics")).text
    *streams, answers, more = results
    assert set(streams) == {405}, "every GET /mcp refused (no stream opened)"
    assert answers == more == [200, 200]
    counted = [ln for ln in metrics.splitlines() if ln.startswith("groundwire_gateway_requests")]
    assert any('route="/mcp"' in ln and 'status="405"' in ln for ln in counted), counted
    assert not any('route="unmatched"' in ln for ln in counted), counted


async def test_mcp_posts_are_counted_under_their_route(upstream: RecordingUpstream) -> None:
    async with gateway(upstream) as client:
        await _mcp_read(client, {})
        metrics = (await client.get("/metrics")).text
    counted = [ln for ln in metrics.splitlines() if ln.startswith("groundwire_gateway_requests")]
    assert any('route="/mcp"' in ln and 'method="POST"' in ln for ln in counted), counted
    assert not any('route="unmatched"' in ln for ln in counted), counted


# --- cosmetic: an IPv6 loopback URL is a URL, not a folder ------------------------------------


def test_an_ipv6_literal_host_is_a_web_url() -> None:
    for url in ("http://[::1]:8080/docs/", "https://[2001:db8::7]/", "http://[::ffff:127.0.0.1]/"):
        assert is_web_url(url), url
    for bad in ("http://[]/", "http://[::1/", "/srv/[::1]", "javascript:alert(1)"):
        assert not is_web_url(bad), bad


# --- 15: gRPC keepalive, client and server agreeing -------------------------------------------


class _SlowHealth(health_pb2_grpc.HealthServicer):
    """A stream that sends nothing for a while (as a long ingest waits for its report)."""

    async def Watch(self, request: Any, context: Any) -> AsyncIterator[Any]:
        yield health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)
        await asyncio.sleep(5)
        yield health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)


@pytest.mark.parametrize("ping_ms", [200])
async def test_a_quiet_long_call_survives_the_clients_keepalive_pings(ping_ms: int) -> None:
    """The client pings every ``ping_ms`` (30 s in the services, shortened here: the
    same ratio of pings to quiet time) and the server's policy is derived from the same
    interval: the call ends normally, never with GOAWAY too_many_pings."""
    server = grpc.aio.server(options=server_keepalive_options(ping_ms))
    health_pb2_grpc.add_HealthServicer_to_server(_SlowHealth(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(
            f"127.0.0.1:{port}", options=client_keepalive_options(ping_ms)
        ) as channel:
            call = health_pb2_grpc.HealthStub(channel).Watch(
                health_pb2.HealthCheckRequest(), timeout=30
            )
            replies = [r.status async for r in call]
    finally:
        await server.stop(0)
    assert replies == [health_pb2.HealthCheckResponse.SERVING] * 2


def test_the_services_servers_accept_what_their_clients_send() -> None:
    from groundwire_core.grpc.client import CHANNEL_OPTIONS

    client = dict(CHANNEL_OPTIONS)
    server = dict(server_keepalive_options())
    floor = server["grpc.http2.min_ping_interval_without_data_ms"]
    assert client["grpc.keepalive_time_ms"] >= floor
    assert (
        client["grpc.keepalive_permit_without_calls"]
        == server["grpc.keepalive_permit_without_calls"]
    )


# --- 19 and 20 (acceptance 4): what a chat costs ------------------------------------------------


class CountingCounters:
    """The shared counters (``Limiter(shared=…)``), in process, adding up every token
    charged to each tenant: reserved at admission, then settled."""

    def __init__(self) -> None:
        self._inner = LocalCounters()
        self.charged: dict[str, int] = {}

    async def admit(self, ask: Ask) -> Verdict:
        verdict = await self._inner.admit(ask)
        if verdict.admitted and ask.budget > 0:
            self.charged[ask.tenant] = self.charged.get(ask.tenant, 0) + ask.tokens
        return verdict

    async def release(self, member: str) -> None:
        await self._inner.release(member)

    async def charge(self, tenant: str, tokens: int) -> None:
        await self._inner.charge(tenant, tokens)
        self.charged[tenant] = self.charged.get(tenant, 0) + tokens

    async def ping(self) -> None:
        pass


BUDGET = 3000
RESERVE = 1000
SPENT = 1200  # what one chat's LLM calls cost: more than the estimate
LONG_ANSWER = "word " * 800  # ~1,000 tokens, as the gateway counts an answer's text


def long_answer() -> list[models.AskEvent | BaseException]:
    return [
        models.DeltaEvent(text=LONG_ANSWER),
        models.StagesEvent(stages=[]),
        models.DoneEvent(mode="generated", answer=LONG_ANSWER),
    ]


async def test_concurrent_chats_overshoot_the_budget_by_at_most_one_estimate(
    upstream: RecordingUpstream,
) -> None:
    settings = {
        "api_keys": "acme:acme-chat-key-31",
        "token_budget_per_day": BUDGET,
        "chat_token_reserve": RESERVE,
        "max_inflight_chats": 0,
    }
    counters = CountingCounters()
    limiter = Limiter(GatewaySettings(**settings), shared=counters)
    upstream.script = long_answer()
    upstream.delay_s = 0.05  # the chats are in flight together
    upstream.llm_tokens = SPENT
    body = {"messages": [{"role": "user", "content": "summarise the handbook"}]}
    async with gateway(upstream, limiter=limiter, **settings) as client:
        replies = await asyncio.gather(
            *(
                client.post("/v1/chat", json=body, headers=bearer("acme-chat-key-31"))
                for _ in range(20)
            )
        )
    codes = [r.status_code for r in replies]
    estimate = 4 + len("summarise the handbook") // 4 + 1 + RESERVE  # input + reserve
    print(f"admitted {codes.count(200)} of 20, charged {counters.charged['acme']}")
    assert set(codes) <= {200, 429} and codes.count(200) >= 1
    assert counters.charged["acme"] <= BUDGET + estimate
    # every admitted chat was settled to what it spent, the reservations returned
    assert counters.charged["acme"] == codes.count(200) * SPENT


async def test_a_chat_is_charged_every_llm_call_it_made(upstream: RecordingUpstream) -> None:
    """The orchestrator reports the tokens of every LLM call of an answer (analysis,
    listwise, answer, judge: 2,150 here) on its done event; the chat costs that."""
    settings = {"api_keys": "acme:acme-chat-key-31", "token_budget_per_day": 100_000}
    counters = CountingCounters()
    limiter = Limiter(GatewaySettings(**settings), shared=counters)
    upstream.llm_tokens = 2150
    body = {"messages": [{"role": "user", "content": "q" * 40}], "listwise_rerank": True}
    async with gateway(upstream, limiter=limiter, **settings) as client:
        chat = await client.post("/v1/chat", json=body, headers=bearer("acme-chat-key-31"))
    assert chat.status_code == 200
    assert counters.charged == {"acme": 2150}


class _MeteredPipeline:
    """An answer whose LLM calls are metered as ``llm.observed`` meters them: analysis
    and listwise in tasks of their own, the answer, then the citation judge."""

    CALLS = {"analysis": (610, 90), "listwise": (700, 120), "answer": (380, 150), "judge": (80, 20)}

    async def ask(self, request: Any) -> AsyncIterator[Any]:
        from groundwire_orchestrator import usage
        from groundwire_orchestrator.domain import AnswerDelta, AnswerDone

        async def call(name: str) -> None:
            usage.record(*self.CALLS[name], estimated=False)

        await asyncio.gather(asyncio.create_task(call("analysis")), call("listwise"))
        await call("answer")
        yield AnswerDelta("It is [1].")
        await call("judge")
        yield AnswerDone("generated", "It is [1].")


async def test_the_orchestrator_reports_every_llm_call_of_an_answer() -> None:
    from groundwire.orchestrator.v1 import orchestrator_pb2 as opb
    from groundwire.orchestrator.v1 import orchestrator_pb2_grpc as ogrpc
    from groundwire_core.grpc.client import create_channel
    from groundwire_core.grpc.server import serving
    from groundwire_orchestrator.server import OrchestratorService
    from groundwire_orchestrator.settings import OrchestratorSettings

    class Metered(OrchestratorService):
        async def start(self) -> None:
            pass

        @property
        def pipeline(self) -> Any:
            return _MeteredPipeline()

    settings = OrchestratorSettings(port=0, reranker_addr=None)
    async with (
        serving(Metered(settings), settings) as port,
        create_channel(f"127.0.0.1:{port}") as channel,
    ):
        request = opb.AskRequest(
            collection="docs", messages=[opb.Message(role=opb.ROLE_USER, content="q")]
        )
        events = [e async for e in ogrpc.OrchestratorServiceStub(channel).Ask(request)]
    done = events[-1].done
    calls = _MeteredPipeline.CALLS.values()
    assert (done.llm_usage.input_tokens, done.llm_usage.output_tokens) == (
        sum(i for i, _ in calls),
        sum(o for _, o in calls),
    )
    # and the gateway's reading of it is what the chat is charged
    from groundwire_gateway.upstream import AskStream

    class Call:
        def __aiter__(self) -> AsyncIterator[Any]:
            return self._events()

        async def _events(self) -> AsyncIterator[Any]:
            for event in events:
                yield event

        def cancel(self) -> bool:
            return False

    stream = AskStream(Call())
    assert [type(e).__name__ async for e in stream][-1] == "DoneEvent"
    assert stream.llm_tokens == sum(i + o for i, o in calls) == 2150


# --- 11: the retriever's data path is private ---------------------------------------------------


async def test_the_retrievers_data_path_is_private_to_its_user(tmp_path: Path) -> None:
    from groundwire_core.grpc.server import serving
    from groundwire_retriever.server import RetrieverService
    from groundwire_retriever.settings import RetrieverSettings

    data = tmp_path / "data"
    (data / "handbook").mkdir(parents=True, mode=0o755)
    older = data / "handbook" / "segment.dat"  # written by an older version, 0644
    older.write_text("restricted text")
    older.chmod(0o644)
    data.chmod(0o755)
    settings = RetrieverSettings(port=0, data_path=data, embedder_addr="127.0.0.1:9")
    async with serving(RetrieverService(settings), settings):
        modes = {p: p.stat().st_mode & 0o777 for p in (data, data / "handbook", older)}
    assert modes == {data: 0o700, data / "handbook": 0o700, older: 0o600}
    # no other user can reach anything written later either: the folder is closed
    assert data.stat().st_mode & 0o077 == 0


SOCKET_ATTEMPTS = 500  # ~0.1 s each on a loaded 2-core machine: the 2,000 run in-process


def test_unauthenticated_mcp_streams_over_real_sockets(gateways: Any, fake_upstream: Any) -> None:
    """Acceptance 3 against a gateway process (``python -m groundwire_gateway``, real
    sockets): unauthenticated ``GET /mcp`` are refused within the client's read
    timeout, and ``/healthz`` and searches answer meanwhile. The old endpoint opened a
    stream per GET that never ended: 1,100 of them took every file descriptor."""
    (gw,) = gateways.start(
        **fake_upstream.env(),
        API_KEYS="acme:acme-sockets-key-31",
        SEARCH_RATE_LIMIT_PER_MIN="0",
        RATE_LIMIT_PER_MIN="0",
    )

    async def scenario() -> tuple[list[int | str], list[int]]:
        limits = httpx.Limits(max_connections=400, max_keepalive_connections=0)
        timeout = httpx.Timeout(30.0)  # the stated timeout: a GET not answered by then fails
        async with httpx.AsyncClient(base_url=gw.url, limits=limits, timeout=timeout) as http:

            async def attempt() -> int | str:
                try:
                    response = await http.get("/mcp", headers={"accept": "text/event-stream"})
                except httpx.TimeoutException:
                    return "timed out"
                return response.status_code

            async def meanwhile() -> list[int]:
                async with httpx.AsyncClient(base_url=gw.url, timeout=timeout) as other:
                    live = await other.get("/healthz")
                    found = await other.post(
                        "/v1/search",
                        json={"query": "install"},
                        headers=bearer("acme-sockets-key-31"),
                    )
                return [live.status_code, found.status_code]

            side = asyncio.create_task(meanwhile())
            streams = await asyncio.gather(*(attempt() for _ in range(SOCKET_ATTEMPTS)))
            return streams, await side

    streams, answered = asyncio.run(scenario())
    assert set(streams) == {405}, {str(s) for s in streams}
    assert answered == [200, 200]
