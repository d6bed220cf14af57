"""`groundwire up` (LocalCluster) when a port is taken: one error naming every busy
service and port, raised before any service starts."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from groundwire_cli.cluster import ClusterError, LocalCluster, _taken


def test_taken_ports_are_named_before_anything_starts(tmp_path: Path) -> None:
    cluster = LocalCluster.with_free_ports(tmp_path / "run", tmp_path / "model", tmp_path / "q")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        cluster.ports["gateway"] = taken.getsockname()[1]
        with pytest.raises(ClusterError) as error:
            cluster.start()
    message = str(error.value)
    assert f"ports in use: gateway {cluster.ports['gateway']}." in message
    assert "--free-ports" in message
    assert cluster.children == {}, "nothing was started"


def test_a_port_left_in_time_wait_is_not_taken(tmp_path: Path) -> None:
    # a service that just stopped leaves its accepted connections in TIME_WAIT; the
    # services bind with SO_REUSEADDR, so a restart on that port must not be refused
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC and uvicorn
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        accepted.close()  # the server side closes first: its end goes to TIME_WAIT
        client.close()
    assert _taken(port) is False
    with socket.socket() as listening:  # and a service listening again is taken
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind(("127.0.0.1", port))
        listening.listen()
        assert _taken(port) is True
