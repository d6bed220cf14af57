"""The in-process counters (same rules as the Redis scripts, see the integration
congruence test) and the Limiter's Redis failure policy, with a fake clock and an
injected failing store: no sockets."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from groundwire_core.errors import Overloaded, Unavailable
from groundwire_gateway.errors import (
    QuotaExceeded,
    RateLimited,
    TokenBudgetExceeded,
    TooManyInflight,
)
from groundwire_gateway.limits import Ask, Limiter, LocalCounters, Verdict
from groundwire_gateway.settings import GatewaySettings

DAY = 86_400.0


class Clock:
    def __init__(self, now: float = 10 * DAY + 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def ask(**overrides: Any) -> Ask:
    base: dict[str, Any] = {
        "client": "ip:1.2.3.4",
        "tenant": "public",
        "kind": "chat",
        "rate": 0,
        "window_s": 60.0,
        "quota": 0,
    }
    base.update(overrides)
    return Ask(**base)


async def test_sliding_window_admits_exactly_the_limit_then_says_when() -> None:
    clock = Clock()
    counters = LocalCounters(clock)
    verdicts = []
    for _ in range(5):
        verdicts.append(await counters.admit(ask(rate=3)))
        clock.now += 1
    assert [v.admitted for v in verdicts] == [True, True, True, False, False]
    # the oldest admission (t0) leaves the window at t0 + 60; the refusal was at t0 + 3
    assert verdicts[3] == Verdict(False, "rate_limited", pytest.approx(57.0))
    clock.now += 55.0  # t0 + 60: only the first entry has left
    assert (await counters.admit(ask(rate=3))).admitted
    assert not (await counters.admit(ask(rate=3))).admitted


async def test_windows_are_per_client_and_per_kind() -> None:
    counters = LocalCounters(Clock())
    assert (await counters.admit(ask(rate=1))).admitted
    assert not (await counters.admit(ask(rate=1))).admitted
    assert (await counters.admit(ask(rate=1, client="ip:5.6.7.8"))).admitted
    assert (await counters.admit(ask(rate=1, kind="search"))).admitted


async def test_quota_counts_only_admitted_requests_and_resets_at_midnight() -> None:
    clock = Clock()
    counters = LocalCounters(clock)
    assert (await counters.admit(ask(rate=1, quota=2))).admitted
    for _ in range(10):  # refused by the rate limit: the quota is untouched
        assert (await counters.admit(ask(rate=1, quota=2))).reason == "rate_limited"
    assert (await counters.admit(ask(rate=1, quota=2, client="ip:b"))).admitted
    refused = await counters.admit(ask(rate=1, quota=2, client="ip:c"))
    assert refused.reason == "quota_exceeded"
    assert refused.retry_after_s == pytest.approx(DAY - 100.0)
    clock.now = 11 * DAY + 1  # next UTC day
    assert (await counters.admit(ask(rate=1, quota=2, client="ip:c"))).admitted


async def test_token_budget_is_per_tenant_and_charges_answers() -> None:
    counters = LocalCounters(Clock())
    assert (await counters.admit(ask(tenant="a", tokens=60, budget=100))).admitted
    assert (await counters.admit(ask(tenant="a", tokens=50, budget=100))).reason == (
        "token_budget_exceeded"
    )
    assert (await counters.admit(ask(tenant="b", tokens=50, budget=100))).admitted
    await counters.charge("b", 45)  # the answer
    assert not (await counters.admit(ask(tenant="b", tokens=10, budget=100))).admitted
    assert (await counters.admit(ask(tenant="b", tokens=5, budget=100))).admitted


async def test_slots_are_leased_released_and_expire() -> None:
    clock = Clock()
    counters = LocalCounters(clock)
    first = ask(slots=2, lease_ttl_s=30)
    second = ask(slots=2, lease_ttl_s=30)
    assert (await counters.admit(first)).admitted
    assert (await counters.admit(second)).admitted
    full = await counters.admit(ask(slots=2, lease_ttl_s=30))
    assert (full.reason, full.retry_after_s) == ("too_many_inflight", 1.0)
    await counters.release(first.member)
    assert (await counters.admit(ask(slots=2, lease_ttl_s=30))).admitted
    clock.now += 31  # a replica died holding its leases: they expire
    assert (await counters.admit(ask(slots=2, lease_ttl_s=30))).admitted


async def test_a_refusal_consumes_nothing() -> None:
    counters = LocalCounters(Clock())
    full = ask(rate=5, quota=5, tokens=10, budget=100, slots=1, lease_ttl_s=30)
    assert (await counters.admit(full)).admitted
    for _ in range(3):  # slot taken: no rate, quota or tokens spent
        other = ask(rate=5, quota=5, tokens=10, budget=100, slots=1, lease_ttl_s=30)
        assert (await counters.admit(other)).reason == "too_many_inflight"
    await counters.release(full.member)
    admitted = [
        (await counters.admit(ask(rate=5, quota=5, tokens=10, budget=100))).admitted
        for _ in range(5)
    ]
    assert admitted == [True, True, True, True, False]  # 4 more fit in rate 5 and quota 5


async def test_idle_windows_are_swept() -> None:
    clock = Clock()
    counters = LocalCounters(clock)
    for i in range(LocalCounters.SWEEP_EVERY - 1):
        await counters.admit(ask(rate=1, client=f"ip:{i}"))
    clock.now += 61
    await counters.admit(ask(rate=1, client="ip:last"))  # triggers the sweep
    assert counters.tracked_clients == 1


class FailingShared:
    """A shared store that is down until ``up`` is set; counts admissions and pings."""

    def __init__(self) -> None:
        self.up = False
        self.local = LocalCounters(Clock())
        self.admit_calls = 0
        self.pings = 0
        self.admitted = 0

    def _check(self) -> None:
        if not self.up:
            raise RedisConnectionError("connection refused")

    async def admit(self, ask: Ask) -> Verdict:
        self.admit_calls += 1
        self._check()
        verdict = await self.local.admit(ask)
        self.admitted += verdict.admitted
        return verdict

    async def release(self, member: str) -> None:
        self._check()

    async def charge(self, tenant: str, tokens: int) -> None:
        self._check()

    async def ping(self) -> None:
        self.pings += 1
        self._check()


PROBE_S = 0.02


@pytest.fixture
async def limiters() -> AsyncIterator[list[Limiter]]:
    """Limiters to stop after the test (their Redis probes are tasks)."""
    made: list[Limiter] = []
    yield made
    for lim in made:
        await lim.stop()


def limiter(made: list[Limiter], policy: str, shared: FailingShared, **settings: Any) -> Limiter:
    s = GatewaySettings(
        redis_url="redis://127.0.0.1:1/0",
        redis_failure_policy=policy,
        redis_retry_s=PROBE_S,
        **settings,
    )
    lim = Limiter(s, shared=shared)
    made.append(lim)
    return lim


async def until(predicate: Callable[[], bool], timeout_s: float = 2.0) -> float:
    """Seconds until ``predicate`` holds (fails after ``timeout_s``)."""
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout_s, "condition never held"
        await asyncio.sleep(0.005)
    return time.monotonic() - started


async def test_policy_open_falls_back_then_returns_to_shared_counters_by_itself(
    limiters: list[Limiter],
) -> None:
    shared = FailingShared()
    lim = limiter(limiters, "open", shared, rate_limit_per_min=2)
    assert str(lim.mode) == "shared"
    first = await lim.admit(lim.ask_for("chat", "ip:x", "public", tokens=5))
    assert lim.is_local(first) and lim.mode == "local"
    await lim.admit(lim.ask_for("chat", "ip:x", "public", tokens=5))
    with pytest.raises(RateLimited):  # still limited, per replica
        await lim.admit(lim.ask_for("chat", "ip:x", "public", tokens=5))
    assert shared.admit_calls == 1  # after the failure, requests do not wait on Redis
    ok, _, reason = await lim.ping()
    assert not ok and "redis unreachable" in reason
    # no traffic at all: the background probe alone notices Redis is back
    shared.up = True
    waited = await until(lambda: lim.mode == "shared")
    assert waited < 10 * PROBE_S + 0.5
    ticket = await lim.admit(lim.ask_for("chat", "ip:y", "public", tokens=5))
    assert not lim.is_local(ticket) and shared.admitted == 1  # shared again


async def test_the_probe_keeps_trying_while_redis_stays_down(limiters: list[Limiter]) -> None:
    shared = FailingShared()
    lim = limiter(limiters, "open", shared)
    await lim.admit(lim.ask_for("search", "ip:x", "public"))
    await until(lambda: shared.pings >= 3)
    assert lim.mode == "local" and shared.admit_calls == 1


async def test_policy_closed_refuses_with_503_naming_redis(limiters: list[Limiter]) -> None:
    shared = FailingShared()
    lim = limiter(limiters, "closed", shared)
    with pytest.raises(Unavailable) as caught:
        await lim.admit(lim.ask_for("search", "ip:x", "public"))
    assert caught.value.dependency == "redis"
    assert lim.mode == "unavailable"
    shared.up = True
    await until(lambda: lim.mode == "shared")
    ticket = await lim.admit(lim.ask_for("search", "ip:x", "public"))
    await lim.release(ticket)


async def test_release_never_raises_when_redis_is_gone(limiters: list[Limiter]) -> None:
    shared = FailingShared()
    shared.up = True
    lim = limiter(limiters, "open", shared)
    ticket = await lim.admit(lim.ask_for("chat", "ip:x", "public", tokens=5))
    shared.up = False
    await lim.release(ticket, answer_tokens=100)
    assert ticket.released and lim.mode == "local"
    await lim.release(ticket)  # twice is harmless


@pytest.mark.parametrize(
    ("reason", "cls"),
    [
        ("rate_limited", RateLimited),
        ("quota_exceeded", QuotaExceeded),
        ("token_budget_exceeded", TokenBudgetExceeded),
        ("too_many_inflight", TooManyInflight),
    ],
)
def test_each_refusal_is_an_overloaded_error_with_its_own_code(
    reason: str, cls: type[Overloaded]
) -> None:
    assert issubclass(cls, Overloaded) and cls.code == reason


def test_search_asks_spend_the_token_budget_but_hold_no_slot() -> None:
    lim = Limiter(GatewaySettings(token_budget_per_day=100, max_inflight_chats=3))
    search = lim.ask_for("search", "ip:x", "public", tokens=50)
    assert (search.tokens, search.budget, search.slots) == (50, 100, 0)
    assert search.rate == 60
    chat = lim.ask_for("chat", "ip:x", "public", tokens=50)
    assert (chat.tokens - chat.reserved, chat.budget, chat.slots, chat.rate) == (50, 100, 3, 15)
    assert chat.reserved == GatewaySettings().chat_token_reserve > 0  # settled at release


def test_tenant_budget_overrides() -> None:
    lim = Limiter(GatewaySettings(token_budget_per_day=100, tenant_token_budgets="big:5000"))
    assert lim.ask_for("chat", "k", "big").budget == 5000
    assert lim.ask_for("chat", "k", "small").budget == 100


def test_quota_buckets_are_per_tenant_and_one_for_anonymous_callers() -> None:
    lim = Limiter(GatewaySettings(daily_quota=500, anonymous_daily_quota=20))
    anonymous = lim.ask_for("search", "ip:1.2.3.4", "public")
    other_ip = lim.ask_for("chat", "ip:5.6.7.8", "public")
    keyed = lim.ask_for("search", "key:acme:0123456789ab", "acme")
    assert (anonymous.quota_bucket, anonymous.quota) == ("anonymous", 20)
    assert other_ip.quota_bucket == "anonymous"
    assert (keyed.quota_bucket, keyed.quota) == ("tenant:acme", 500)


async def test_anonymous_callers_cannot_spend_a_tenants_quota() -> None:
    lim = Limiter(
        GatewaySettings(daily_quota=5, anonymous_daily_quota=20, search_rate_limit_per_min=0)
    )
    for i in range(20):
        await lim.admit(lim.ask_for("search", f"ip:10.0.0.{i}", "public"))
    with pytest.raises(QuotaExceeded):
        await lim.admit(lim.ask_for("search", "ip:10.0.1.1", "public"))
    for _ in range(5):  # the tenant's own quota is whole
        await lim.admit(lim.ask_for("search", "key:acme:0123456789ab", "acme"))
    with pytest.raises(QuotaExceeded):
        await lim.admit(lim.ask_for("search", "key:acme:0123456789ab", "acme"))
    await lim.admit(lim.ask_for("search", "key:other:ba9876543210", "other"))
