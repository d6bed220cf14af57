"""Prometheus metrics of one gateway app (its own registry: several apps in one
process, as in tests, never share counters)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "groundwire_gateway_requests",
            "HTTP requests answered, by route template, method and status.",
            ("route", "method", "status"),
            registry=self.registry,
        )
        self.errors = Counter(
            "groundwire_gateway_errors",
            "Error answers (HTTP or in-stream), by route and machine-readable code.",
            ("route", "code"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "groundwire_gateway_request_duration_seconds",
            "Time from request to the last byte of the answer, by route.",
            ("route", "method"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.rejections = Counter(
            "groundwire_gateway_limit_rejections",
            "Requests refused by the abuse and cost controls, by reason.",
            ("reason",),
            registry=self.registry,
        )
        self.inflight_chats = Gauge(
            "groundwire_gateway_inflight_chats",
            "Chats streaming from this replica now.",
            registry=self.registry,
        )
        self.redis_failures = Counter(
            "groundwire_gateway_redis_failures",
            "Redis calls that failed (the failure policy applied).",
            registry=self.registry,
        )
        self.cancelled_chats = Counter(
            "groundwire_gateway_cancelled_chats",
            "Chats whose client went away mid-answer (the orchestrator call was cancelled).",
            registry=self.registry,
        )

        self.audit_events = Counter(
            "groundwire_gateway_audit_events",
            "Audit events (admin actions, refused requests), by event and outcome.",
            ("event", "outcome"),
            registry=self.registry,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
