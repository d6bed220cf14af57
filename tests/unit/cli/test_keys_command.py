"""`groundwire keys create|list|revoke` against a real gateway app over HTTP (uvicorn
on port 0, the in-memory upstream behind it): the key is printed once on stdout, lists
show ids and scopes only, a revoked key is refused."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import cast

import httpx
import pytest
import uvicorn

from groundwire_cli.__main__ import main
from groundwire_gateway.app import create_app
from groundwire_gateway.settings import GatewaySettings
from groundwire_gateway.state import UpstreamApi
from tests.unit.gateway.conftest import FakeUpstream

OPERATOR = "operator-secret-key-1"


@pytest.fixture
def gateway_url() -> Iterator[str]:
    app = create_app(
        GatewaySettings(admin_api_keys=f"ops:{OPERATOR}"), cast(UpstreamApi, FakeUpstream())
    )
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(5)


def run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        main(argv)
    return int(done.value.code or 0)


def test_create_list_revoke(
    gateway_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GROUNDWIRE_ADMIN_KEY", OPERATOR)
    keys = ["keys", "--gateway", gateway_url]
    argv = [*keys, "create", "--role", "read", "--tenant", "acme", "--collection", "handbook"]
    assert run(argv) == 0
    out, err = capsys.readouterr()
    key = out.strip()
    assert key.startswith("gwk_") and "\n" not in key, "stdout is the key alone"
    key_id = key.split("_")[1]
    assert f"created {key_id}" in err and "handbook" in err and key not in err
    search = httpx.post(
        f"{gateway_url}/v1/search",
        json={"query": "q", "collection": "docs"},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert search.status_code == 404, "limited to handbook: docs does not exist for it"
    assert run([*keys, "list"]) == 0
    listing, _ = capsys.readouterr()
    assert key_id in listing and "acme" in listing and key not in listing
    assert run([*keys, "revoke", key_id]) == 0
    assert run([*keys, "revoke", key_id]) == 1
    _, err = capsys.readouterr()
    assert "HTTP 404" in err
    refused = httpx.get(f"{gateway_url}/v1/models", headers={"Authorization": f"Bearer {key}"})
    assert refused.status_code == 401


def test_without_an_admin_key_it_says_what_to_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GROUNDWIRE_ADMIN_KEY", raising=False)
    assert run(["keys", "list"]) == 2
    assert "GROUNDWIRE_ADMIN_KEY" in capsys.readouterr().err
