"""The load report's capacity figures and multi-process topology, without starting it.

``benchmarks/`` is no installed package: its scripts run with that folder on
``sys.path``, so the tests put it there the same way (``syspath_prepend``).
"""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from groundwire_cli.cluster import LocalCluster


@pytest.fixture
def loadrun(repo_root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, ModuleType]:
    monkeypatch.syspath_prepend(str(repo_root / "benchmarks"))
    return {name: importlib.import_module(f"loadrun.{name}") for name in ("capacity", "topology")}


def _step(kind: str, users: int, rps: float, cpu_s: float = 2.0) -> dict[str, Any]:
    return {
        "kind": kind,
        "users": users,
        "requests_per_s": rps,
        "requests_per_s_per_core": rps / 2,
        "cpu": {
            "requests_per_cpu_s": rps * 20 / cpu_s,
            "stack_cpu_s": cpu_s,
            "machine_busy_share": 0.9,
        },
        "end_to_end": {kind: {"p50_ms": 10.0, "p95_ms": 30.0 + users}},
        "failures": 0,
        "http_5xx": 0,
        "stages": {
            "retrieval": {"count": users, "fallbacks": 0},
            "rerank": {"count": users, "fallbacks": users if users >= 64 else 0},
        },
    }


def test_the_saturation_point_is_the_fastest_step_and_says_whether_the_curve_flattened(
    loadrun: dict[str, ModuleType],
) -> None:
    saturation = loadrun["capacity"].saturation
    past = saturation([_step("search", u, r) for u, r in ((1, 5), (8, 9), (32, 10), (64, 8))])
    assert past["users"] == 32 and past["requests_per_s"] == 10
    assert past["requests_per_s_per_core"] == 5 and past["p95_ms"] == 62
    assert past["saturated"] is True and past["note"] == "a later step was no faster"
    assert past["stage_fallbacks"] == {}
    shed = saturation([_step("search", u, r) for u, r in ((32, 10), (64, 20))])
    assert shed["users"] == 64 and shed["stage_fallbacks"] == {"rerank": 64}

    flat = saturation([_step("chat", u, r) for u, r in ((1, 5), (8, 9), (32, 9.5))])
    assert flat["users"] == 32 and flat["saturated"] is True
    assert flat["note"] == "the last step added < 10 %"

    rising = saturation([_step("chat", u, r) for u, r in ((1, 5), (8, 9))])
    assert rising["users"] == 8 and rising["saturated"] is False
    assert "stop short of saturation" in rising["note"]
    assert saturation([]) is None


def test_summarize_keeps_each_request_type_apart(loadrun: dict[str, ModuleType]) -> None:
    steps = [_step("search", 1, 20), _step("search", 8, 40)]
    steps += [_step("chat", 1, 2), _step("chat", 8, 3)]
    summary = loadrun["capacity"].summarize(steps, ["search", "chat"])
    assert summary["search"]["full_quality"]["requests_per_s"] == 40
    assert summary["chat"]["fastest"]["requests_per_s"] == 3


def test_the_quoted_saturation_point_is_the_fastest_step_that_shed_no_work(
    loadrun: dict[str, ModuleType],
) -> None:
    steps = [_step("search", u, r) for u, r in ((1, 5), (32, 10), (64, 20))]
    # a fallback every request has at the lightest step (a judge that never answers)
    # is how the stack runs; the rerank fallbacks at 64 users (_step) are load shed
    for step in steps:
        step["stages"]["citations"] = {"count": 10, "fallbacks": 10}
    summary = loadrun["capacity"].summarize(steps, ["search"])["search"]
    assert [s["shed_under_load"] for s in steps] == [{}, {}, {"rerank": 64}]
    full, fastest = summary["full_quality"], summary["fastest"]
    assert full["users"] == 32 and full["requests_per_s"] == 10 and full["saturated"] is True
    assert full["note"] == "at 64 users the stack sheds work ({'rerank': 64})"
    assert fastest["users"] == 64 and fastest["stage_fallbacks"]["rerank"] == 64
    table = loadrun["capacity"].format_capacity({"steps": steps, "capacity": {"search": summary}})
    assert "saturation search (full quality): 10.0 req/s at 32 users = 5.00 req/s per core" in table


def test_step_cpu_counts_each_live_process_and_requests_per_cpu_second(
    loadrun: dict[str, ModuleType],
) -> None:
    before = {
        "processes": {"gateway": 1.0, "orchestrator": 2.0, "gone": 1.0},
        "machine": (100.0, 200.0),
    }
    after = {
        "processes": {"gateway": 2.5, "orchestrator": 4.5, "gone": None},
        "machine": (115.0, 220.0),
    }
    cpu = loadrun["capacity"].step_cpu(before, after, requests=80)
    assert cpu["service_cpu_s"] == {"gateway": 1.5, "orchestrator": 2.5}
    assert cpu["stack_cpu_s"] == 4.0
    assert cpu["requests_per_cpu_s"] == 20.0
    assert cpu["machine_busy_share"] == 0.75


def test_cpu_seconds_reads_a_process_and_grows_as_it_works(
    loadrun: dict[str, ModuleType],
) -> None:
    cpu_seconds = loadrun["capacity"].cpu_seconds
    start = cpu_seconds(os.getpid())
    assert start is not None
    deadline = time.process_time() + 0.15
    while time.process_time() < deadline:  # burn a little CPU, measured by the kernel
        pass
    assert cpu_seconds(os.getpid()) >= start + 0.1
    busy, total = loadrun["capacity"].machine_busy()
    assert 0 < busy <= total


def test_the_topology_spreads_gateways_over_every_orchestrator(
    loadrun: dict[str, ModuleType], tmp_path: Path
) -> None:
    cluster = LocalCluster.with_free_ports(tmp_path, tmp_path / "model", tmp_path / "data")
    topology = loadrun["topology"].Topology.with_free_ports(3, 2, cluster)
    first, second = topology.ports["orchestrator"]
    assert first == cluster.ports["orchestrator"] and second != first
    assert topology.orchestrator_target == f"ipv4:127.0.0.1:{first},127.0.0.1:{second}"
    assert topology.cluster_env() == {
        "GROUNDWIRE_GATEWAY_ORCHESTRATOR_ADDR": topology.orchestrator_target
    }
    urls = topology.gateway_urls
    assert len(set(urls)) == 3 and urls[0] == cluster.gateway_url
    assert topology.describe()["processes"]["gateway"] == 3

    single = loadrun["topology"].Topology.with_free_ports(1, 1, cluster)
    assert single.orchestrator_target == cluster.addr("orchestrator")
    with pytest.raises(ValueError, match="at least one gateway"):
        loadrun["topology"].Topology.with_free_ports(0, 1, cluster)
