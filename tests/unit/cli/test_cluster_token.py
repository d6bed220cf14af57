"""The local cluster's service token (#24): one per start, given to every child,
kept in the run folder (mode 0600) for the commands run beside it, and attached by
this process's own channels; a user's GROUNDWIRE_SERVICE_TOKEN wins."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from groundwire_cli.cluster import SERVICES, TOKEN_FILE, LocalCluster, use_service_token
from groundwire_core.grpc.service_auth import process_token, set_process_token


def test_each_start_makes_a_token_every_child_gets(tmp_path: Path) -> None:
    try:
        cluster = LocalCluster(tmp_path / "run", tmp_path / "models", tmp_path / "qdrant")
        cluster.start(names=())  # no child: the token is still made and written
        first = cluster.service_token
        token_file = tmp_path / "run" / TOKEN_FILE
        assert len(first) >= 32 and token_file.read_text() == first
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert process_token() == first
        for name in SERVICES:
            assert cluster.env_for(name)["GROUNDWIRE_SERVICE_TOKEN"] == first
        # a command beside the running cluster reads its token
        beside = LocalCluster(tmp_path / "run", tmp_path / "models", tmp_path / "qdrant")
        assert beside.service_token == first
        cluster.start(names=())
        assert cluster.service_token != first, "a fresh start, a fresh token"
    finally:
        set_process_token(None)


def test_the_users_token_wins(tmp_path: Path) -> None:
    try:
        mine = {"GROUNDWIRE_SERVICE_TOKEN": "my-own-service-token-0123456789"}
        cluster = LocalCluster(
            tmp_path / "run", tmp_path / "models", tmp_path / "qdrant", extra_env=mine
        )
        cluster.start(names=())
        assert cluster.service_token == mine["GROUNDWIRE_SERVICE_TOKEN"]
        assert (tmp_path / "run" / TOKEN_FILE).read_text() == cluster.service_token
    finally:
        set_process_token(None)


def test_the_gateway_keeps_created_keys_beside_the_data(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "run", tmp_path / "models", tmp_path / "qdrant")
    database_url = cluster.env_for("gateway")["GROUNDWIRE_GATEWAY_DATABASE_URL"]
    assert database_url == f"sqlite:///{(tmp_path / 'state' / 'gateway.sqlite3').resolve()}"
    set_process_token(None)


def test_commands_beside_a_running_cluster_use_its_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROUNDWIRE_HOME", str(tmp_path))
    monkeypatch.delenv("GROUNDWIRE_SERVICE_TOKEN", raising=False)
    try:
        use_service_token()
        assert process_token() is None, "no cluster, no token: open, as before"
        cluster = LocalCluster(tmp_path / "run", tmp_path / "models", tmp_path / "qdrant")
        cluster.start(names=())
        set_process_token(None)
        use_service_token()
        assert process_token() == cluster.service_token
        monkeypatch.setenv("GROUNDWIRE_SERVICE_TOKEN", "the-users-own-token-0123456789")
        use_service_token()
        assert process_token() == "the-users-own-token-0123456789"
    finally:
        set_process_token(None)
