"""Abuse and cost controls: rate limit, daily quota, token budget, chat slots.

One idea at ~530 lines: one atomic admission decision, written twice on purpose (a
Redis Lua script and its in-process twin, which must agree), plus Redis recovery.

One admission decides all four, in this order, atomically, and consumes nothing
unless every check passes (so a rejected request never counts against a quota):

1. **rate limit**: a sliding-window log per client (IP, or API key) and route kind;
2. **daily quota**: a counter per tenant per UTC day; callers without an API key
   share one bucket of their own (``anonymous_daily_quota``), so anonymous traffic
   can never spend a keyed tenant's quota;
3. **token budget**: tokens per tenant per UTC day. A chat reserves its input plus
   an estimate of its LLM calls (``chat_token_reserve``) at admission and is settled
   when it ends to what its LLM calls reported (analysis, listwise, answer, judge,
   agent steps), so concurrent chats overshoot a budget by at most what one
   request spends beyond its estimate; a search asks for its query's tokens at
   admission and is charged the LLM tokens its analysis and listwise calls used
   (see :meth:`Limiter.release`);
4. **chat slots**: a lease per in-flight chat; leases expire on their own if a
   replica dies holding them.

With a Redis URL the counters live in Redis and each decision is one Lua script
that takes its clock from ``redis.call('TIME')``: every replica sees the same
counters and the same time. Without one, :class:`LocalCounters` applies the same
rules in process (one replica).

Redis failures: the pool PINGs a connection that sat idle before using it, and a
call that fails on a broken connection is retried once on a fresh one (a restarted
Redis leaves every pooled connection broken; without the retry each of them would
count as an outage). A call that still fails applies the configured policy:
``open`` falls back to the in-process counters (per replica: a client may get up to
N times its limit across N replicas), ``closed`` answers 503 naming redis. While
Redis is down a background probe PINGs it every ``redis_retry_s``; the first answer
puts the replica back on the shared counters, whatever the traffic. The current
mode is in :attr:`Limiter.mode` (every response carries it). Nothing here imports
FastAPI.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from redis import exceptions as redis_errors
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from groundwire_core.errors import Overloaded, Unavailable
from groundwire_gateway.auth import Principal
from groundwire_gateway.errors import (
    QuotaExceeded,
    RateLimited,
    TokenBudgetExceeded,
    TooManyInflight,
)
from groundwire_gateway.settings import GatewaySettings, parse_tenant_numbers

log = logging.getLogger("groundwire.gateway.limits")

Kind = Literal["chat", "search"]
Mode = Literal["shared", "local", "unavailable", "in_process"]
"""Where this replica's limits are decided now: ``shared`` (Redis), ``local`` (Redis
down, policy open: per replica), ``unavailable`` (Redis down, policy closed: 503),
``in_process`` (no Redis configured)."""
ANONYMOUS_BUCKET = "anonymous"
Reason = Literal["rate_limited", "quota_exceeded", "token_budget_exceeded", "too_many_inflight"]
DAY_S = 86_400

# KEYS: 1 rate window (zset), 2 quota of the caller's bucket (hash), 3 tenant tokens
#       (hash), 4 leases (zset)
# ARGV: 1 rate limit, 2 window ms, 3 quota, 4 tokens asked, 5 token budget,
#       6 slot cap, 7 lease ttl ms, 8 unique member
# A limit of 0 switches its check off. Returns {admitted, reason, retry_after_ms}.
ADMIT_LUA = """
local t = redis.call('TIME')
local sec = tonumber(t[1])
local now = sec * 1000 + math.floor(tonumber(t[2]) / 1000)
local day = math.floor(sec / 86400)
local to_midnight = ((day + 1) * 86400 - sec) * 1000
local rate, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local quota, asked, budget = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local cap, ttl, member = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8]

if rate > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
  if redis.call('ZCARD', KEYS[1]) >= rate then
    local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    return {0, 'rate_limited', math.max(1, tonumber(oldest[2]) + window - now)}
  end
end
local used = 0
if quota > 0 then
  local q = redis.call('HMGET', KEYS[2], 'day', 'used')
  if tonumber(q[1]) == day then used = tonumber(q[2]) or 0 end
  if used >= quota then return {0, 'quota_exceeded', to_midnight} end
end
local spent = 0
if budget > 0 then
  local b = redis.call('HMGET', KEYS[3], 'day', 'used')
  if tonumber(b[1]) == day then spent = tonumber(b[2]) or 0 end
  if spent + asked > budget then return {0, 'token_budget_exceeded', to_midnight} end
end
if cap > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  if redis.call('ZCARD', KEYS[4]) >= cap then return {0, 'too_many_inflight', 1000} end
end

if rate > 0 then
  redis.call('ZADD', KEYS[1], now, member)
  redis.call('PEXPIRE', KEYS[1], window)
end
if quota > 0 then
  redis.call('HSET', KEYS[2], 'day', day, 'used', used + 1)
  redis.call('EXPIRE', KEYS[2], 2 * 86400)
end
if budget > 0 then
  redis.call('HSET', KEYS[3], 'day', day, 'used', spent + asked)
  redis.call('EXPIRE', KEYS[3], 2 * 86400)
end
if cap > 0 then
  redis.call('ZADD', KEYS[4], now + ttl, member)
  redis.call('PEXPIRE', KEYS[4], ttl)
end
return {1, 'ok', 0}
"""

# KEYS: 1 tenant tokens (hash). ARGV: 1 tokens. Adds to today's count (may pass the
# budget: the next admission is refused, not this answer cut off); a negative count
# returns a reservation, never below 0.
CHARGE_LUA = """
local t = redis.call('TIME')
local day = math.floor(tonumber(t[1]) / 86400)
local b = redis.call('HMGET', KEYS[1], 'day', 'used')
local spent = 0
if tonumber(b[1]) == day then spent = tonumber(b[2]) or 0 end
local used = math.max(0, spent + tonumber(ARGV[1]))
redis.call('HSET', KEYS[1], 'day', day, 'used', used)
redis.call('EXPIRE', KEYS[1], 2 * 86400)
return used
"""

# KEYS: counters to seed (hashes). ARGV: day, then one count per key. Raises each
# counter of ``day`` to at least its count (the durable copy, see daily.py) and
# marks the counters seeded (KEYS[#KEYS] is the marker).
RESTORE_LUA = """
local day = tonumber(ARGV[1])
for i = 1, #KEYS - 1 do
  local n = tonumber(ARGV[i + 1])
  local b = redis.call('HMGET', KEYS[i], 'day', 'used')
  local used = 0
  if tonumber(b[1]) == day then used = tonumber(b[2]) or 0 end
  if n > used then used = n end
  redis.call('HSET', KEYS[i], 'day', day, 'used', used)
  redis.call('EXPIRE', KEYS[i], 2 * 86400)
end
redis.call('SET', KEYS[#KEYS], day)
return #KEYS - 1
"""

_REJECTIONS: dict[str, type[Overloaded]] = {
    "rate_limited": RateLimited,
    "quota_exceeded": QuotaExceeded,
    "token_budget_exceeded": TokenBudgetExceeded,
    "too_many_inflight": TooManyInflight,
}
_MESSAGES: dict[str, str] = {
    "rate_limited": "too many requests from this client; slow down",
    "quota_exceeded": "the daily quota of this tenant (or of callers without an API key) "
    "is spent; it resets at 00:00 UTC",
    "token_budget_exceeded": "this tenant's daily token budget is spent; it resets at 00:00 UTC",
    "too_many_inflight": "every chat slot is taken; retry shortly",
}


def is_anonymous(caller: Principal | str) -> bool:
    """Whether a caller (or its rate-limit identity) came without an API key: its
    identity is its address, ``ip:…`` (see ``auth.Principal.client``)."""
    client = caller if isinstance(caller, str) else caller.client
    return client.startswith("ip:")


@dataclass(frozen=True)
class Ask:
    """What one request asks of the limits. A limit of 0 skips its check."""

    client: str
    tenant: str
    kind: Kind
    rate: int
    window_s: float
    quota: int
    tokens: int = 0
    budget: int = 0
    slots: int = 0
    lease_ttl_s: float = 0.0
    member: str = field(default_factory=lambda: uuid.uuid4().hex)
    quota_bucket: str = ANONYMOUS_BUCKET
    """Whose daily quota this request spends: ``tenant:<name>`` or ``anonymous``."""
    reserved: int = 0
    """Of ``tokens``, the estimate reserved for what the request spends beyond its
    input (a chat's LLM calls); :meth:`Limiter.release` settles it."""


@dataclass(frozen=True)
class Verdict:
    admitted: bool
    reason: str = "ok"
    retry_after_s: float = 0.0


class Counters(Protocol):
    """Where the counters live; both implementations apply the same rules."""

    async def admit(self, ask: Ask) -> Verdict:
        """Checks every limit in order; consumes all or nothing."""
        ...

    async def release(self, member: str) -> None:
        """Frees the chat slot held by ``member`` (no-op when it holds none)."""

    async def charge(self, tenant: str, tokens: int) -> None:
        """Adds ``tokens`` to the tenant's count for today (a negative settlement
        returns a reservation; the count never goes below 0)."""


class DailyRecord(Protocol):
    """Where admissions and charges are noted for the durable daily counters."""

    def admitted(self, ask: Ask) -> None: ...

    def charged(self, tenant: str, tokens: int) -> None: ...


class SharedCounters(Counters, Protocol):
    """Counters shared by the replicas (Redis), which can be unreachable."""

    async def ping(self) -> None:
        """Raises when the store cannot be reached."""


class LocalCounters:
    """The counters in process: one replica, or Redis down with policy ``open``."""

    SWEEP_EVERY = 1024

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._windows: dict[str, deque[float]] = {}
        self._quota: dict[str, tuple[int, int]] = {}  # bucket -> (day, used)
        self._tokens: dict[str, tuple[int, int]] = {}
        self._leases: dict[str, float] = {}
        self._admits = 0

    # No awaits inside: each call is atomic on the event loop.
    async def admit(self, ask: Ask) -> Verdict:
        now = self._clock()
        day = int(now // DAY_S)
        to_midnight = (day + 1) * DAY_S - now
        self._admits += 1
        if self._admits % self.SWEEP_EVERY == 0:
            self._sweep(now, ask.window_s)
        key = f"{ask.kind}:{ask.client}"
        window = self._windows.get(key)
        if ask.rate > 0:
            if window is None:
                window = self._windows[key] = deque()
            while window and window[0] <= now - ask.window_s:
                window.popleft()
            if len(window) >= ask.rate:
                return Verdict(False, "rate_limited", window[0] + ask.window_s - now)
        quota_day, used = self._quota.get(ask.quota_bucket, (day, 0))
        used = used if quota_day == day else 0
        if ask.quota > 0 and used >= ask.quota:
            return Verdict(False, "quota_exceeded", to_midnight)
        token_day, spent = self._tokens.get(ask.tenant, (day, 0))
        spent = spent if token_day == day else 0
        if ask.budget > 0 and spent + ask.tokens > ask.budget:
            return Verdict(False, "token_budget_exceeded", to_midnight)
        if ask.slots > 0:
            for member in [m for m, expiry in self._leases.items() if expiry <= now]:
                del self._leases[member]
            if len(self._leases) >= ask.slots:
                return Verdict(False, "too_many_inflight", 1.0)
        if window is not None and ask.rate > 0:
            window.append(now)
        if ask.quota > 0:
            self._quota[ask.quota_bucket] = (day, used + 1)
        if ask.budget > 0:
            self._tokens[ask.tenant] = (day, spent + ask.tokens)
        if ask.slots > 0:
            self._leases[ask.member] = now + ask.lease_ttl_s
        return Verdict(True)

    async def release(self, member: str) -> None:
        self._leases.pop(member, None)

    async def charge(self, tenant: str, tokens: int) -> None:
        day = int(self._clock() // DAY_S)
        token_day, spent = self._tokens.get(tenant, (day, 0))
        self._tokens[tenant] = (day, max(0, (spent if token_day == day else 0) + tokens))

    def restore(self, day: int, counts: dict[tuple[str, str], int]) -> None:
        """Raises each daily counter of ``day`` to at least its durable count."""
        for (kind, bucket), n in counts.items():
            table = self._quota if kind == "quota" else self._tokens
            old_day, used = table.get(bucket, (day, 0))
            table[bucket] = (day, max(n, used if old_day == day else 0))

    @property
    def tracked_clients(self) -> int:
        """Rate windows held in memory."""
        return len(self._windows)

    def _sweep(self, now: float, window_s: float) -> None:
        """Drops idle clients' windows so memory follows active clients only."""
        for key in [k for k, w in self._windows.items() if not w or w[-1] <= now - window_s]:
            del self._windows[key]


class RedisCounters:
    """The counters in Redis, shared by every replica; one Lua script per decision.

    Keys share the hash tag ``{limits}`` so that each script's keys sit in one slot
    (the scripts also run on Redis Cluster, on one shard)."""

    def __init__(self, redis: Redis, prefix: str) -> None:
        self._redis = redis
        self._prefix = f"{prefix}:{{limits}}"
        self._admit = redis.register_script(ADMIT_LUA)
        self._charge = redis.register_script(CHARGE_LUA)
        self._restore = redis.register_script(RESTORE_LUA)

    def key(self, *parts: str) -> str:
        return ":".join((self._prefix, *parts))

    async def admit(self, ask: Ask) -> Verdict:
        keys = [
            self.key("rate", ask.kind, ask.client),
            self.key("quota", ask.quota_bucket),
            self.key("tokens", ask.tenant),
            self.key("leases"),
        ]
        args: list[Any] = [
            ask.rate,
            max(1, round(ask.window_s * 1000)),
            ask.quota,
            ask.tokens,
            ask.budget,
            ask.slots,
            max(1, round(ask.lease_ttl_s * 1000)),
            ask.member,
        ]
        admitted, reason, retry_ms = await self._admit(keys=keys, args=args)
        reason_text = reason.decode() if isinstance(reason, bytes) else str(reason)
        return Verdict(bool(int(admitted)), reason_text, int(retry_ms) / 1000)

    async def release(self, member: str) -> None:
        await self._redis.zrem(self.key("leases"), member)

    async def charge(self, tenant: str, tokens: int) -> None:
        await self._charge(keys=[self.key("tokens", tenant)], args=[tokens])

    async def ping(self) -> None:
        await self._redis.ping()

    async def lost(self) -> bool:
        """Whether Redis has lost the daily counters (started empty: never seeded)."""
        return not await self._redis.exists(self.key("seeded"))

    async def restore(self, day: int, counts: dict[tuple[str, str], int]) -> None:
        items = sorted(counts.items())
        keys = [self.key("quota" if kind == "quota" else "tokens", b) for (kind, b), _ in items]
        await self._restore(keys=[*keys, self.key("seeded")], args=[day, *(n for _, n in items)])


_REDIS_FAILURES = (redis_errors.RedisError, OSError)


@dataclass
class Ticket:
    """An admitted request: release it when the request ends (chats hold a slot)."""

    ask: Ask
    counters: Counters
    released: bool = False


class Limiter:
    """Applies the limits from settings through Redis or in process, and the Redis
    failure policy. Raises the typed rejections (429 with Retry-After) or, with
    policy ``closed`` and Redis down, Unavailable naming redis (503)."""

    def __init__(
        self,
        settings: GatewaySettings,
        clock: Callable[[], float] = time.time,
        on_redis_failure: Callable[[], None] | None = None,
        shared: SharedCounters | None = None,
    ) -> None:
        """``shared`` replaces the Redis counters built from ``redis_url`` (tests)."""
        self._settings = settings
        self._on_redis_failure = on_redis_failure
        self._clock = clock
        self._local = LocalCounters(clock)
        self._budgets = parse_tenant_numbers(settings.tenant_token_budgets)
        self._redis: Redis | None = None
        self._remote: SharedCounters | None = shared
        self._down_reason = ""  # set while Redis is unreachable
        self._prober: asyncio.Task[None] | None = None
        self._daily: DailyRecord | None = None
        self._local_seeded = False

    async def start(self) -> None:
        s = self._settings
        if s.redis_url and self._remote is None:
            pool = BlockingConnectionPool.from_url(
                s.redis_url,
                max_connections=s.redis_max_connections,
                timeout=s.redis_timeout_s,  # waiting for a free connection
                socket_timeout=s.redis_timeout_s,
                socket_connect_timeout=s.redis_timeout_s,
                # An idle connection is PINGed before use, and a call that fails on a
                # broken connection is retried once on a fresh one: after a Redis
                # restart every pooled connection is broken, and each would otherwise
                # flip the replica to its local counters. Not on a timeout: the script
                # may have run, and running it again would count the request twice.
                health_check_interval=s.redis_health_check_s,
                retry=Retry(ExponentialBackoff(cap=s.redis_timeout_s, base=0.01), retries=1),
                retry_on_error=[redis_errors.ConnectionError],
            )
            self._redis = Redis(connection_pool=pool)
            self._remote = RedisCounters(self._redis, s.redis_key_prefix)

    async def stop(self) -> None:
        prober, self._prober = self._prober, None
        if prober is not None:
            prober.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await prober
        if self._redis is not None:
            await self._redis.aclose(close_connection_pool=True)

    # --- admission -----------------------------------------------------------------------

    def ask_for(self, kind: Kind, client: str, tenant: str, tokens: int = 0) -> Ask:
        """The limits that apply to one request of ``kind`` from ``client``.

        ``tokens``: a chat's input tokens, or a search's query tokens (its LLM tokens
        are charged when it ends). A chat also reserves ``chat_token_reserve``, the
        estimate of its LLM calls, settled when it ends. A client ``ip:…`` has no API
        key: it spends the anonymous quota bucket, never its tenant's."""
        s = self._settings
        chat = kind == "chat"
        anonymous = is_anonymous(client)
        reserve = s.chat_token_reserve if chat else 0
        return Ask(
            client=client,
            tenant=tenant,
            kind=kind,
            rate=s.rate_limit_per_min if chat else s.search_rate_limit_per_min,
            window_s=s.rate_limit_window_s,
            quota=s.anonymous_daily_quota if anonymous else s.daily_quota,
            tokens=tokens + reserve,
            reserved=reserve,
            budget=self._budgets.get(tenant, s.token_budget_per_day),
            slots=s.max_inflight_chats if chat else 0,
            lease_ttl_s=s.chat_timeout_s + 10.0,
            quota_bucket=ANONYMOUS_BUCKET if anonymous else f"tenant:{tenant}",
        )

    async def admit(self, ask: Ask) -> Ticket:
        """Admits ``ask`` or raises its rejection (see the class docstring)."""
        if self._remote is None:
            counters: Counters = self._local
            verdict = await counters.admit(ask)
        elif self._down_reason:
            # Redis is down: the probe brings it back; requests do not wait on it.
            counters = self._fallback()
            verdict = await counters.admit(ask)
        else:
            try:
                verdict = await self._remote.admit(ask)
                counters = self._remote
            except _REDIS_FAILURES as error:
                self._redis_failed(error)
                counters = self._fallback()
                verdict = await counters.admit(ask)
        if not verdict.admitted:
            cls = _REJECTIONS[verdict.reason]
            raise cls(_MESSAGES[verdict.reason], retry_after_s=max(verdict.retry_after_s, 0.001))
        if self._daily is not None:
            self._daily.admitted(ask)
        return Ticket(ask, counters)

    async def release(
        self, ticket: Ticket, answer_tokens: int = 0, *, spent: int | None = None
    ) -> None:
        """Ends an admitted request: frees its chat slot and settles its tokens. With
        ``spent`` (every LLM call's tokens, as the orchestrator reported them) the
        request costs exactly that; else ``answer_tokens`` (a chat's answer, a
        search's LLM calls) on top of its input. What was reserved at admission is
        returned either way. Never raises: a lease left in Redis expires on its own."""
        if spent is not None:
            tokens = spent - ticket.ask.tokens
        else:
            tokens = answer_tokens - ticket.ask.reserved
        if ticket.released:
            return
        ticket.released = True
        try:
            if ticket.ask.slots > 0:
                await ticket.counters.release(ticket.ask.member)
            if ticket.ask.budget > 0 and tokens != 0:
                if self._daily is not None:
                    self._daily.charged(ticket.ask.tenant, tokens)
                await ticket.counters.charge(ticket.ask.tenant, tokens)
        except _REDIS_FAILURES as error:
            self._redis_failed(error)

    def is_local(self, ticket: Ticket) -> bool:
        """Whether ``ticket`` was decided by this replica's fallback counters while
        Redis was down (not by the shared ones)."""
        return self._remote is not None and ticket.counters is self._local

    # --- the durable daily counters (daily.py) -----------------------------------------

    def keep_daily(self, record: DailyRecord) -> None:
        """Notes every admission and charge in ``record`` (the system of record's copy)."""
        self._daily = record

    async def counters_lost(self) -> bool:
        """Whether the daily counters must be seeded: in process once (a started
        gateway), in Redis when it lost them (a restart). False while Redis is down."""
        if self._remote is None:
            return not self._local_seeded
        remote = self._remote
        if not isinstance(remote, RedisCounters) or self._down_reason:
            return False
        try:
            return await remote.lost()
        except _REDIS_FAILURES as error:
            self._redis_failed(error)
            return False

    async def restore_daily(self, day: int, counts: dict[tuple[str, str], int]) -> None:
        """Raises today's daily counters to at least ``counts`` (see daily.py)."""
        if self._remote is None:
            self._local.restore(day, counts)
            self._local_seeded = True
            return
        if isinstance(self._remote, RedisCounters):
            try:
                await self._remote.restore(day, counts)
            except _REDIS_FAILURES as error:
                self._redis_failed(error)

    # --- Redis state ---------------------------------------------------------------------

    @property
    def backend(self) -> Literal["redis", "in_process"]:
        return "redis" if self._remote is not None else "in_process"

    @property
    def mode(self) -> Mode:
        if self._remote is None:
            return "in_process"
        if not self._down_reason:
            return "shared"
        return "local" if self._settings.redis_failure_policy == "open" else "unavailable"

    @property
    def redis_down(self) -> bool:
        return self._remote is not None and bool(self._down_reason)

    @property
    def down_reason(self) -> str:
        return self._down_reason

    async def ping(self) -> tuple[bool, float, str]:
        """Probes Redis (health): (reachable, ms, reason). Updates the down state."""
        if self._remote is None:
            return False, 0.0, "no redis_url: limits run in process"
        started = time.perf_counter()
        try:
            await self._remote.ping()
        except _REDIS_FAILURES as error:
            self._redis_failed(error)
            return False, (time.perf_counter() - started) * 1e3, self._down_reason
        self._redis_ok()
        return True, (time.perf_counter() - started) * 1e3, ""

    def _fallback(self) -> Counters:
        if self._settings.redis_failure_policy == "closed":
            raise Unavailable(
                "rate limits are unavailable: redis is unreachable", dependency="redis"
            )
        return self._local

    def _redis_failed(self, error: BaseException) -> None:
        if self._on_redis_failure is not None:
            self._on_redis_failure()
        was_down = bool(self._down_reason)
        self._down_reason = f"redis unreachable ({type(error).__name__})"
        if not was_down:
            policy = self._settings.redis_failure_policy
            log.error(
                "%s; policy %s: %s",
                self._down_reason,
                policy,
                "limits now run per replica in process"
                if policy == "open"
                else "limited routes answer 503",
            )
        if self._prober is None or self._prober.done():
            self._prober = asyncio.get_running_loop().create_task(self._probe())

    async def _probe(self) -> None:
        """PINGs Redis every ``redis_retry_s`` until it answers (then the replica is
        back on the shared counters)."""
        assert self._remote is not None
        while self._down_reason:
            await asyncio.sleep(self._settings.redis_retry_s)
            try:
                await self._remote.ping()
            except _REDIS_FAILURES:
                continue
            self._redis_ok()

    def _redis_ok(self) -> None:
        if self._down_reason:
            log.warning("redis is reachable again; limits are shared across replicas")
        self._down_reason = ""
