"""The in-process counters (same rules as the Redis scripts, see the integration
congruence test) and the Limiter's Redis failure policy, with a fake clock and an
injected failing store: no sockets."""

from __future__ import annotations

import asyncio
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
    """A shared store that is down until ``up`` is set."""

    def __init__(self) -> None:
        self.up = False
        self.local = LocalCounters(Clock())
        self.calls = 0
        self.admitted = 0

    def _check(self) -> None:
        self.calls += 1
        if not self.up:
            raise RedisConnectionError("connection refused")

    async def admit(self, ask: Ask) -> Verdict:
        self._check()
        verdict = await self.local.admit(ask)
        self.admitted += verdict.admitted
        return verdict

    async def release(self, member: str) -> None:
        self._check()

    async def charge(self, tenant: str, tokens: int) -> None:
        self._check()

    async def ping(self) -> None:
        self._check()


def limiter(policy: str, shared: FailingShared, **settings: Any) -> Limiter:
    s = GatewaySettings(
        redis_url="redis://127.0.0.1:1/0",
        redis_failure_policy=policy,
        redis_retry_s=0,
        **settings,
    )
    return Limiter(s, shared=shared)


async def test_policy_open_falls_back_to_in_process_limits() -> None:
    shared = FailingShared()
    lim = limiter("open", shared, rate_limit_per_min=2)
    a = lim.ask_for("chat", "ip:x", "public", tokens=5)
    await lim.admit(a)
    await lim.admit(lim.ask_for("chat", "ip:x", "public", tokens=5))
    with pytest.raises(RateLimited):  # still limited, per replica
        await lim.admit(lim.ask_for("chat", "ip:x", "public", tokens=5))
    assert shared.calls == 3  # each tried Redis first (retry window 0)
    ok, _, reason = await lim.ping()
    assert not ok and "redis unreachable" in reason
    shared.up = True
    ok, _, reason = await lim.ping()
    assert ok and reason == ""
    await lim.admit(lim.ask_for("chat", "ip:x", "public", tokens=5))
    assert shared.admitted == 1  # counted in the shared store again


async def test_policy_closed_refuses_with_503_naming_redis() -> None:
    shared = FailingShared()
    lim = limiter("closed", shared)
    with pytest.raises(Unavailable) as caught:
        await lim.admit(lim.ask_for("search", "ip:x", "public"))
    assert caught.value.dependency == "redis"
    shared.up = True
    ticket = await lim.admit(lim.ask_for("search", "ip:x", "public"))
    await lim.release(ticket)


async def test_release_never_raises_when_redis_is_gone() -> None:
    shared = FailingShared()
    shared.up = True
    lim = limiter("open", shared)
    ticket = await lim.admit(lim.ask_for("chat", "ip:x", "public", tokens=5))
    shared.up = False
    await lim.release(ticket, answer_tokens=100)
    assert ticket.released
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


def test_search_asks_skip_tokens_and_slots() -> None:
    lim = Limiter(GatewaySettings(token_budget_per_day=100, max_inflight_chats=3))
    search = lim.ask_for("search", "ip:x", "public", tokens=50)
    assert (search.tokens, search.budget, search.slots) == (0, 0, 0)
    assert search.rate == 60
    chat = lim.ask_for("chat", "ip:x", "public", tokens=50)
    assert (chat.tokens, chat.budget, chat.slots, chat.rate) == (50, 100, 3, 15)


def test_tenant_budget_overrides() -> None:
    lim = Limiter(GatewaySettings(token_budget_per_day=100, tenant_token_budgets="big:5000"))
    assert lim.ask_for("chat", "k", "big").budget == 5000
    assert lim.ask_for("chat", "k", "small").budget == 100


async def test_after_a_failure_one_request_probes_redis_and_the_rest_do_not_wait() -> None:
    shared = FailingShared()
    lim = limiter("open", shared)
    await lim.admit(lim.ask_for("search", "ip:x", "public"))  # fails over: Redis is down
    assert shared.calls == 1
    release = asyncio.Event()
    original = shared.admit

    async def slow_admit(ask: Ask) -> Verdict:
        await release.wait()
        return await original(ask)

    shared.admit = slow_admit  # type: ignore[method-assign]
    shared.up = True
    probe = asyncio.create_task(lim.admit(lim.ask_for("search", "ip:x", "public")))
    await asyncio.sleep(0.01)
    # while the probe waits on Redis, others are served in process at once
    ticket = await asyncio.wait_for(lim.admit(lim.ask_for("search", "ip:y", "public")), 1)
    assert ticket.counters is not shared
    release.set()
    assert (await probe).counters is shared
