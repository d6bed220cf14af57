"""The Grafana dashboard (deploy/grafana/groundwire.json) and the metrics agree: every
series a panel queries is one the services export, and every metric the services
export has a panel."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY, CollectorRegistry

import groundwire_core.metrics as core_metrics
from groundwire_gateway.metrics import GatewayMetrics

SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")
METRIC_NAME = re.compile(r"\b(groundwire_[a-z0-9_]+)")


def _families(registry: CollectorRegistry, prefix: str) -> dict[str, str]:
    """Exported family name -> type (counters lose their _total here)."""
    return {m.name: m.type for m in registry.collect() if m.name.startswith(prefix)}


@pytest.fixture(scope="module")
def dashboard(repo_root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((repo_root / "deploy/grafana/groundwire.json").read_text())
    return data


@pytest.fixture(scope="module")
def exported() -> dict[str, str]:
    """The services' metrics: groundwire_core.metrics (the default registry, imported
    above) and one gateway app's registry."""
    assert core_metrics.RPC_REQUESTS is not None
    return {
        **_families(REGISTRY, "groundwire_"),
        **_families(GatewayMetrics().registry, "groundwire_gateway"),
    }


def _exprs(dashboard: dict[str, Any]) -> list[str]:
    return [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]


def _family(series: str) -> str:
    for suffix in SUFFIXES:
        if series.endswith(suffix):
            return series.removesuffix(suffix)
    return series


def test_the_dashboard_is_importable(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"] == "groundwire" and dashboard["title"] == "Groundwire"
    [source] = dashboard["templating"]["list"]
    assert source["type"] == "datasource" and source["query"] == "prometheus"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}"
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]


def test_every_queried_series_is_exported(
    dashboard: dict[str, Any], exported: dict[str, str]
) -> None:
    for expr in _exprs(dashboard):
        for series in METRIC_NAME.findall(expr):
            family = _family(series)
            assert family in exported, f"{series} in {expr!r} is not exported"
            kind = exported[family]
            if series.endswith("_bucket"):
                assert kind == "histogram", series
            if kind == "counter":
                assert series.endswith("_total") and "rate(" in expr, expr
            if kind == "histogram":
                assert "histogram_quantile" in expr and series.endswith("_bucket"), expr


def test_every_exported_metric_has_a_panel(
    dashboard: dict[str, Any], exported: dict[str, str]
) -> None:
    queried = {_family(s) for expr in _exprs(dashboard) for s in METRIC_NAME.findall(expr)}
    assert set(exported) - queried == set()


def test_the_issue_asks_for_these_views(dashboard: dict[str, Any]) -> None:
    exprs = "\n".join(_exprs(dashboard))
    for wanted in (
        "histogram_quantile(0.5, sum by (le, stage) (rate(groundwire_stage_duration_seconds",
        "histogram_quantile(0.95, sum by (le, stage) (rate(groundwire_stage_duration_seconds",
        "histogram_quantile(0.95, sum by (le, service, method) (rate(groundwire_rpc_duration",
        'groundwire_rpc_requests_total{code!="OK"}',
        "sum by (stage, dependency) (rate(groundwire_stage_fallbacks_total",
        "groundwire_batch_queue_depth",
        "groundwire_batch_size_bucket",
        "rate(groundwire_tokens_total",
        "sum by (reason) (rate(groundwire_gateway_limit_rejections_total",
        "sum by (route, method) (rate(groundwire_gateway_requests_total",
    ):
        assert wanted in exprs, wanted
