"""`groundwire search` and the caller's key on the CLI (issue #32): against a real
gateway app that requires keys (uvicorn on port 0, the in-memory upstream behind it),
``search`` and ``chat`` send ``--api-key`` or ``$GROUNDWIRE_API_KEY``; without one
they say which variable to set. `groundwire demo` keeps its samples out of the
collection a user's own ``ingest`` fills by default."""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Iterator
from typing import cast

import pytest
import uvicorn

from groundwire_cli import demo
from groundwire_cli.__main__ import build_parser, main
from groundwire_gateway.app import create_app
from groundwire_gateway.settings import GatewaySettings
from groundwire_gateway.state import UpstreamApi
from tests.unit.gateway.conftest import FakeUpstream

KEY = "acme-reader-key-42"


@pytest.fixture
def gateway_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.delenv("GROUNDWIRE_API_KEY", raising=False)
    app = create_app(
        GatewaySettings(api_keys=f"acme:{KEY}", require_api_key=True),
        cast(UpstreamApi, FakeUpstream()),
    )
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
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


def test_search_without_a_key_says_which_variable_to_set(
    gateway_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["search", "install", "--gateway", gateway_url]) == 1
    err = capsys.readouterr().err
    assert "HTTP 401" in err and "GROUNDWIRE_API_KEY" in err and "--api-key" in err


def test_search_prints_ranked_passages_with_the_key_from_the_variable(
    gateway_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GROUNDWIRE_API_KEY", KEY)
    assert run(["search", "install", "--gateway", gateway_url, "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "collection docs: 1 result(s)" in out
    assert "1. [0.900] Guide > Install" in out and "source: https://example.com" in out
    assert "Run it." in out and "stages: retrieve 2ms" in out


def test_search_and_chat_take_the_key_as_a_flag(
    gateway_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["search", "install", "--gateway", gateway_url, "--api-key", KEY, "--json"]
    assert run(argv) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["results"][0]["source_id"] == "s1"
    assert run(["chat", "how do I install it", "--gateway", gateway_url, "--api-key", KEY]) == 0
    assert "Install it with pip [1]" in capsys.readouterr().out
    assert run(["chat", "how do I install it", "--gateway", gateway_url]) == 1
    assert "401" in capsys.readouterr().err


def test_every_gateway_command_takes_an_api_key() -> None:
    parser = build_parser()
    for argv in (["search", "q"], ["chat", "q"], ["mcp"], ["eval", "answers", "--golden", "g"]):
        args = parser.parse_args([*argv, "--api-key", "k"])
        assert args.api_key == "k", argv


def test_the_demo_collection_is_not_the_default_of_a_later_ingest() -> None:
    ingest = build_parser().parse_args(["ingest", "somewhere"])
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    assert parser.parse_args([]).collection == demo.DEMO_COLLECTION != ingest.collection
    assert ingest.collection == GatewaySettings().default_collection == "docs"

