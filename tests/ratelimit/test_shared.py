"""The shared quota: what a user configures (:class:`SharedQuota`), what a client keeps of
one shared pool (:class:`PoolState`, :class:`SharedPool`), and the quota itself, in virtual
time on an in-memory Redis running the same Lua (what one process learns, every process
acts on; interactive calls go first across processes) and against a real ``redis-server``
with processes (one window over many, a shared pause, Redis failing; skipped when
redis-server or redis-py is missing, and failing then when ``CI=true``)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import random
import sys
import time
from collections.abc import Awaitable
from typing import Any, cast

import pytest

from magisterium_async import AsyncMagisterium, RateLimits, RetryPolicy
from magisterium_async._clock import VirtualClock
from magisterium_async._config import Priority
from magisterium_async._errors import APIConnectionError, SharedQuotaError
from magisterium_async._events import PoolEvent
from magisterium_async._ratelimit import (
    RuleState,
    SharedLimiter,
    SharedPool,
    SharedQuota,
    Start,
    Verdict,
)
from magisterium_async._ratelimit._scripts import POOL_KEYS
from magisterium_async._ratelimit._scripts import rule_fields as _fields
from magisterium_async._ratelimit._shared import PoolState
from magisterium_async._ratelimit._tuning import LINE_GRACE, LINE_POLL
from magisterium_async.testing import (
    Emulator,
    EmulatorConfig,
    RateLimitConfig,
    max_in_window,
)
from tests.helpers.quota import (
    LIMIT,
    PERIOD,
    PRO_SCENARIOS,
    Quota,
    Scheduler,
    admitted_times,
    call_with_retries,
    client_for,
    run_quota_workers,
    slot,
)
from tests.helpers.redis_server import RedisServer

# What a user configures ----------------------------------------------------------------


def test_shared_quota_needs_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAGISTERIUM_REDIS_URL", raising=False)
    with pytest.raises(SharedQuotaError, match="MAGISTERIUM_REDIS_URL"):
        SharedQuota()
    with pytest.raises(ValueError):
        SharedQuota("redis://x", workers=0)


def test_the_url_falls_back_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAGISTERIUM_REDIS_URL", "redis://from-env:6379/2")
    assert SharedQuota().url == "redis://from-env:6379/2"
    assert SharedQuota("redis://given/0").url == "redis://given/0"  # given beats the variable


def test_the_defaults_bound_every_redis_call() -> None:
    quota = SharedQuota("redis://x")
    assert (quota.workers, quota.timeout, quota.retry_interval) == (1, 0.5, 1.0)
    assert quota.prefix == "magisterium"


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("workers", 0, ValueError),
        ("workers", 2.5, TypeError),
        ("workers", True, TypeError),
        ("timeout", 0, ValueError),
        ("timeout", -1.0, ValueError),
        ("timeout", math.nan, ValueError),
        ("timeout", math.inf, ValueError),  # a Redis call must be bounded
        ("timeout", "1", TypeError),
        ("retry_interval", 0.0, ValueError),
        ("retry_interval", None, TypeError),
        ("account", "", ValueError),
        ("account", "  ", ValueError),
        ("account", 42, TypeError),
    ],
)
def test_a_bad_value_is_refused_naming_the_field(field: str, value: object, error: type) -> None:
    with pytest.raises(error, match=field):
        SharedQuota("redis://x", **{field: value})  # type: ignore[arg-type]


def test_of_takes_a_url_or_the_object_itself() -> None:
    quota = SharedQuota("redis://x", workers=4)
    assert SharedQuota.of(quota) is quota
    assert SharedQuota.of("redis://y/1") == SharedQuota("redis://y/1")


@pytest.mark.parametrize("value", [42, b"redis://x", {"url": "redis://x"}])
def test_of_refuses_anything_else_naming_the_argument(value: object) -> None:
    with pytest.raises(TypeError, match="shared_quota must be a Redis URL or SharedQuota"):
        SharedQuota.of(value)  # type: ignore[arg-type]


def test_the_quota_is_immutable() -> None:
    quota = SharedQuota("redis://x")
    with pytest.raises(AttributeError):
        quota.workers = 2  # type: ignore[misc]


# One pool of a shared quota ------------------------------------------------------------

LIMITS = RateLimits(15, 2, period=60.0)  # the margin: min(0.02 * 60, 1) = 1 s


class Shared:
    """The parts of a :class:`SharedLimiter` a pool uses, recording what it was told."""

    def __init__(self, limits: RateLimits = LIMITS) -> None:
        self._pools = {name: PoolState(limits, name) for name in ("default", "expensive")}
        self.told: list[tuple[Any, ...]] = []

    def outcome(self, pool: str, kind: str, ticket: str, wait: float = 0.0) -> None:
        self.told.append(("outcome", pool, kind, ticket, wait))

    def learn(self, pool: str, verdict: Verdict) -> None:
        self.told.append(("learn", pool, verdict.kind))

    async def admit(self, pool: str, line: Any) -> str:
        self.told.append(("admit", pool, line()))
        return "client:1"

    async def aclose(self) -> None:
        self.told.append(("aclose",))


def pool(name: str = "default", shared: Shared | None = None) -> tuple[SharedPool, Shared]:
    shared = shared or Shared()
    return SharedPool(cast(SharedLimiter, shared), name, shared._pools[name]), shared


def test_a_pool_state_keeps_the_local_pools_arithmetic_and_its_keys() -> None:
    state = PoolState(LIMITS, "expensive")
    state.locate("app:{abc}")
    assert (state.limit, state.window, state.period, state.margin) == (2, 60.0, 60.0, 1.0)
    assert state.span == 61.0 and state.rate == state.allowed == 2
    assert state.keys == [f"app:{{abc}}:expensive:{name}" for name in POOL_KEYS]
    assert not state.starts and not state.outcomes and state.next_at == -math.inf


def test_an_unlimited_pool_has_no_limit_to_share() -> None:
    state = PoolState(RateLimits(math.inf, 2), "default")
    assert math.isinf(state.limit)


def test_a_limit_below_one_a_period_is_one_per_a_longer_window() -> None:
    state = PoolState(RateLimits(15, 0.5, period=60.0), "expensive")
    assert (state.limit, state.window) == (1, 120.0)


def test_the_rate_is_reported_per_period_from_what_redis_said() -> None:
    shared_pool, shared = pool()
    assert shared_pool.rate == 15.0 and not shared_pool.stepping_up
    state = shared._pools["default"]
    state.rate, state.allowed = 6, 5  # read from the shared rule: a step up under way
    assert shared_pool.rate == 6.0 and shared_pool.stepping_up


def test_redis_takes_the_turns_not_the_pool() -> None:
    shared_pool, shared = pool()
    assert shared_pool.paced_start(0.0, 100, keyed=True, bulk=True) == -math.inf  # in Redis
    shared._pools["default"].next_at = 42.0  # when Redis said to ask again
    assert shared_pool.next_start(0.0) == 42.0


async def test_what_becomes_of_a_start_goes_to_the_shared_limiter() -> None:
    shared_pool, shared = pool("expensive")
    ok, limited, forgotten = Start(1.0, "c:1"), Start(2.0, "c:2"), Start(3.0, "c:3")
    limited.limited, limited.wait = True, 30.5
    shared_pool.start(ok)  # the admission already wrote it: nothing to tell
    shared_pool.answered(ok)
    shared_pool.answered(limited)
    shared_pool.forget(forgotten)
    shared_pool.give_back("c:4")
    shared_pool.learn(Verdict("proven", limited, 2.5, 32.5, 30.0))
    assert await shared_pool.admit(lambda: ("bulk", 3, False)) == "client:1"
    await shared_pool.aclose()
    assert shared.told == [
        ("outcome", "expensive", "ok", "c:1", 0.0),
        ("outcome", "expensive", "429", "c:2", 30.5),
        ("outcome", "expensive", "forget", "c:3", 0.0),
        ("outcome", "expensive", "forget", "c:4", 0.0),
        ("learn", "expensive", "proven"),
        ("admit", "expensive", ("bulk", 3, False)),
        ("aclose",),
    ]


@pytest.mark.parametrize("method", ["answered", "forget"])
def test_a_start_without_a_ticket_is_not_reported(method: str) -> None:
    # Without a ticket a start has no entry in the shared log: there is nothing to update.
    shared_pool, shared = pool()
    getattr(shared_pool, method)(Start(1.0))
    assert shared.told == []


# In virtual time, on an in-memory Redis ------------------------------------------------


def processes(
    memory_redis: object,
    clock: VirtualClock,
    limits: RateLimits,
    count: int,
    concurrency: int,
    *,
    hint: bool = True,
    prefix: str = "magisterium",
) -> tuple[list[SharedLimiter], list[Scheduler]]:
    """``count`` clients sharing one token's quota through one (in-memory) Redis, told how
    many they are (``hint``: ``workers=count``) or given the URL alone."""
    from fakeredis import FakeAsyncRedis

    config = SharedQuota("redis://memory", prefix=prefix)
    if hint:
        config = SharedQuota("redis://memory", workers=count, prefix=prefix)
    shared = [
        SharedLimiter(
            config,
            "token",
            limits,
            clock,
            redis=FakeAsyncRedis(server=memory_redis),
            first_round=concurrency,
        )
        for _ in range(count)
    ]
    scheds = [
        Scheduler(
            limits, max_concurrency=concurrency, clock=clock, limiters=s.limiters, gates=s.gates
        )
        for s in shared
    ]
    return shared, scheds


async def shared_scenario(
    memory_redis: object,
    quota: Quota,
    told: float,
    requests: int,
    count: int = 4,
    *,
    hint: bool = True,
    prefix: str = "magisterium",
    limiters: list[SharedLimiter] | None = None,
) -> tuple[float, list[Scheduler]]:
    """The scheduler tests' scenario, its requests split over ``count`` processes (their
    shared limiters added to ``limiters``)."""
    clock = VirtualClock()
    limits = RateLimits(told, told, period=quota.period)
    shared, scheds = processes(memory_redis, clock, limits, count, 16, hint=hint, prefix=prefix)
    if limiters is not None:
        limiters += shared
    rng = random.Random(1)

    def attempt(token: str | None = None) -> Awaitable[None]:
        return quota.attempt(clock, rng)

    tasks = [
        asyncio.create_task(
            call_with_retries(
                attempt,
                pool=scheds[i % count].pool("default"),
                policy=RetryPolicy(),
                clock=clock,
                what="x",
                priority="bulk",
            )
        )
        for i in range(requests)
    ]
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    for sched in scheds:
        await sched.aclose()
    return clock.now(), scheds


@pytest.mark.parametrize("name", ["right", "hidden", "shift"])
async def test_four_processes_adapt_as_one(memory_redis: object, name: str) -> None:
    """The scheduler's Pro-quota scenarios, spread over four processes told ``workers=4``:
    the same goals. Where the server's quota is not the one they were told (hidden,
    shift), four given the URL alone learn how many they are from Redis: the same starts,
    429s and wall time, within the same goals."""
    told, scenario, requests, most_429s, most_wall = PRO_SCENARIOS[name]
    seen = {}
    for hint in (True,) if name == "right" else (True, False):
        quota = Quota(scenario.schedule, scenario.period, jitter=scenario.jitter)
        shared: list[SharedLimiter] = []
        wall, _ = await shared_scenario(
            memory_redis, quota, told, requests, hint=hint, prefix=f"p{hint}", limiters=shared
        )
        assert quota.accepted == requests
        assert quota.refused / quota.accepted <= most_429s, quota.refused
        assert wall <= most_wall * quota.ideal(requests), (wall, quota.ideal(requests))
        assert [s._clients for s in shared] == [4] * 4  # each learned how many share it
        seen[hint] = (wall, quota.refused)
    assert seen.get(False, seen[True]) == seen[True]


async def test_a_lowered_rate_is_read_by_every_process(memory_redis: object) -> None:
    """One process proves a window ran out; the others' pools show the lower rate at once."""
    told, quota, _, _, _ = PRO_SCENARIOS["hidden"]
    quota = Quota(quota.schedule, quota.period)
    _, scheds = await shared_scenario(memory_redis, quota, told, 120)
    rates = {s.stats.default.current_rate for s in scheds}
    assert rates and max(rates) <= 16, rates  # 150 told, 15 allowed: all learned it


async def test_tries_that_never_reached_the_server_leave_the_shared_log(
    memory_redis: object,
) -> None:
    """Two processes, 2 a minute in the expensive pool: one's three refused tries are taken
    out of the shared log, so the other's two calls start at once."""
    clock = VirtualClock()
    shared, scheds = processes(memory_redis, clock, RateLimits.pro(), 2, 4)

    async def refused(token: str | None = None) -> None:
        error = APIConnectionError("connect failed: ClientConnectorError")
        error.reached_server = False
        raise error

    async def answered(token: str | None = None) -> float:
        return clock.now()

    policy = RetryPolicy(max_retries=2)
    first = asyncio.create_task(
        call_with_retries(
            refused, pool=scheds[0].pool("expensive"), policy=policy, clock=clock, what="x"
        )
    )
    await clock.run_until_idle()
    with pytest.raises(APIConnectionError):
        await first
    await shared[0].aflush()
    log_key, _ = shared[0].keys("expensive")
    assert await shared[0]._redis.zcard(log_key) == 0
    began = clock.now()
    later = [
        asyncio.create_task(
            call_with_retries(
                answered, pool=scheds[1].pool("expensive"), policy=policy, clock=clock, what="y"
            )
        )
        for _ in range(2)
    ]
    await clock.run_until_idle()
    assert [await t for t in later] == [began, began]
    for sched in scheds:
        await sched.aclose()


async def test_an_interactive_call_in_one_process_goes_before_bulk_in_others(
    memory_redis: object,
) -> None:
    """Three processes keep 30 bulk calls queued at 15 a minute; a fourth process's single
    interactive call starts at the next free start, not behind the bulk queue."""
    clock = VirtualClock()
    limits = RateLimits.pro()
    _, scheds = processes(memory_redis, clock, limits, 4, 8)
    starts: list[tuple[Priority, float]] = []

    async def call(sched: Scheduler, priority: Priority) -> None:
        async with slot(sched.pool("default"), priority):
            starts.append((priority, clock.now()))
            await clock.sleep(0.5)

    bulk = [asyncio.create_task(call(s, "bulk")) for s in scheds[:3] for _ in range(30)]
    await clock.advance(10)  # the first window's 15 started; 75 bulk calls wait
    interactive = asyncio.create_task(call(scheds[3], "interactive"))
    await clock.advance(70)
    assert interactive.done()
    at = next(t for p, t in starts if p == "interactive")
    first_free = min(t for p, t in starts if p == "bulk" and t > 10)
    assert at <= first_free  # the next free start was the interactive call's
    for task in bulk:
        task.cancel()
    await asyncio.gather(*bulk, return_exceptions=True)
    for sched in scheds:
        await sched.aclose()


async def test_after_the_first_interactive_calls_wait_one_interval_beside_bulk_in_others(
    memory_redis: object,
) -> None:
    """Three processes keep bulk calls queued at 15 a minute; a fourth asks every 47 s. Its
    first call waits out the burst the bulk made before anyone contended; its ask makes
    the shared admission pace bulk in every process, one start every quota interval, and
    each later call starts within one interval of arriving."""
    clock = VirtualClock()
    limits = RateLimits.pro()
    _, scheds = processes(memory_redis, clock, limits, 4, 8)
    starts: dict[str, float] = {}
    bulk_starts: list[float] = []

    async def call(sched: Scheduler, label: str, priority: Priority, at: float = 0.0) -> None:
        await clock.sleep(at)
        async with slot(sched.pool("default"), priority):
            if priority == "bulk":
                bulk_starts.append(clock.now())
            else:
                starts[label] = clock.now()
            await clock.sleep(0.5)

    bulk = [asyncio.create_task(call(s, "bulk", "bulk")) for s in scheds[:3] for _ in range(40)]
    arrivals = [10.0 + 47.0 * i for i in range(8)]
    people = [
        asyncio.create_task(call(scheds[3], f"person {i}", "interactive", at))
        for i, at in enumerate(arrivals)
    ]
    await clock.advance(arrivals[-1] + 20.0)
    assert all(task.done() for task in people)
    waits = [starts[f"person {i}"] - at for i, at in enumerate(arrivals)]
    assert waits[0] >= 50.0  # the first window's burst went before anyone contended
    interval = limits.period / 15
    assert max(waits[1:]) <= interval + limits.margin + 2 * LINE_POLL, waits
    paced = sorted(t for t in bulk_starts if arrivals[0] < t < arrivals[-1])
    assert len(paced) > 60  # bulk kept the quota busy meanwhile
    assert min(b - a for a, b in itertools.pairwise(paced)) >= limits.period / 15 - 1e-6
    for task in bulk:
        task.cancel()
    await asyncio.gather(*bulk, return_exceptions=True)
    for sched in scheds:
        await sched.aclose()


@pytest.mark.parametrize("phase", [0.5, 29.0, 59.5])
async def test_a_call_after_seven_windows_of_bulk_alone_in_others_waits_one_interval(
    memory_redis: object, phase: float
) -> None:
    """Three processes have had the quota alone with bulk calls for seven windows when a
    fourth asks, at any phase: the shared admission paces a run that lasted a few windows,
    so the call starts within an interval (and the margin) of arriving, and every span
    still held its 15 starts."""
    clock = VirtualClock()
    limits = RateLimits.pro()
    _, scheds = processes(memory_redis, clock, limits, 4, 8)
    bulk_starts: list[float] = []
    person: list[float] = []

    async def call(sched: Scheduler, priority: Priority, at: float = 0.0) -> None:
        await clock.sleep(at)
        async with slot(sched.pool("default"), priority):
            (bulk_starts if priority == "bulk" else person).append(clock.now())
            await clock.sleep(0.5)

    bulk = [asyncio.create_task(call(s, "bulk")) for s in scheds[:3] for _ in range(50)]
    arrive = 7 * limits.period + phase
    single = asyncio.create_task(call(scheds[3], "interactive", arrive))
    await clock.advance(arrive + 20.0)
    assert single.done()
    interval = limits.period / 15
    assert person[0] - arrive <= interval + limits.margin + 2 * LINE_POLL
    span = limits.period + limits.margin
    starts = bulk_starts + person
    assert [sum(1 for t in starts if j * span <= t < (j + 1) * span) for j in range(7)] == [15] * 7
    for task in bulk:
        task.cancel()
    await asyncio.gather(*bulk, return_exceptions=True)
    for sched in scheds:
        await sched.aclose()


# Fairness, the shared line, the step-up lease, what a newcomer reads ----------------------


class Calls:
    """Calls through one scheduler each, recording who started when."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.starts: list[tuple[str, float]] = []
        self.tasks: list[asyncio.Task[None]] = []

    def spawn(
        self,
        sched: Scheduler,
        label: str,
        n: int = 1,
        priority: Priority = "bulk",
        *,
        at: float = 0.0,
        duration: float = 0.5,
    ) -> list[asyncio.Task[None]]:
        async def call() -> None:
            await self.clock.sleep(at)
            async with slot(sched.pool("default"), priority):
                self.starts.append((label, self.clock.now()))
                await self.clock.sleep(duration)

        tasks = [asyncio.create_task(call()) for _ in range(n)]
        self.tasks += tasks
        return tasks

    def times(self, label: str) -> list[float]:
        return [t for name, t in self.starts if name == label]

    async def close(self, scheds: list[Scheduler]) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for sched in scheds:
            await sched.aclose()


async def crowd_and_latecomer(memory_redis: object) -> tuple[Calls, float]:
    """Bulk calls in two processes at 15 a minute: one has 60 queued (four windows'
    worth); the other's three arrive at 10 s. After 130 s: who started when, and the
    first start free after 10 s."""
    clock = VirtualClock()
    _, scheds = processes(memory_redis, clock, RateLimits.pro(), 2, 16)
    calls = Calls(clock)
    calls.spawn(scheds[0], "crowd", 60)
    calls.spawn(scheds[1], "late", 3, at=10.0)
    await clock.advance(130.0)
    await calls.close(scheds)
    return calls, min(t for t in calls.times("crowd") if t > 10.0)


async def test_a_latecomer_processs_first_call_starts_at_the_next_free_start(
    memory_redis: object,
) -> None:
    calls, first_free = await crowd_and_latecomer(memory_redis)
    assert first_free == pytest.approx(61.0, abs=0.1)
    assert calls.times("late")[0] == first_free  # not after the crowd's 45 left


async def test_a_latecomer_process_gets_turns_round_robin_in_the_next_window(
    memory_redis: object,
) -> None:
    calls, first_free = await crowd_and_latecomer(memory_redis)
    assert calls.times("late") == [first_free] * 3  # 3 of the window's 15, not 1


async def test_a_process_gone_with_its_head_in_the_line_holds_others_back_a_grace_at_most(
    memory_redis: object,
) -> None:
    """An interactive call in a process that then goes away ranks ahead of another
    process's bulk call in the shared line; it holds that call back no longer than
    ``LINE_GRACE`` past the moment it would have asked again."""
    clock = VirtualClock()
    limits = RateLimits(1, 1, period=10.0)  # one start per 10 s (+ the margin)
    _, scheds = processes(memory_redis, clock, limits, 2, 4)
    span = 10.0 + limits.margin
    calls = Calls(clock)
    calls.spawn(scheds[0], "bulk", 2)  # the first starts at 0, the second waits for the span
    gone = calls.spawn(scheds[1], "gone", 1, "interactive", at=1.0)  # its next ask: the span
    await clock.advance(5.0)
    assert calls.times("bulk") == [0.0] and not calls.times("gone")
    gone[0].cancel()
    await scheds[1].aclose()  # the process goes away; its head stays in Redis
    await clock.advance(20.0)
    (_, second) = calls.times("bulk")
    assert span < second <= span + LINE_GRACE + 2 * LINE_POLL
    await calls.close(scheds)


def rule_key(shared: SharedLimiter) -> str:
    return shared._pools["default"].keys[POOL_KEYS.index("rule")]


async def test_one_process_at_a_time_steps_the_shared_rate_up(
    memory_redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four processes with calls waiting when a step up falls due: one of them steps up
    (one start more than the server allowed), not four; the others do not step up while
    it is at it (its step up is held open for 5 s here), and keep to the rate meanwhile."""
    from fakeredis import FakeAsyncRedis

    clock = VirtualClock()
    limits = RateLimits(10, 2, period=60.0)
    shared, scheds = processes(memory_redis, clock, limits, 4, 4)
    redis = FakeAsyncRedis(server=memory_redis)
    learned = RuleState(rate=6, allowed=6, step_up_at=100.0)
    await redis.hset(rule_key(shared[0]), mapping={**_fields(learned), "version": 1})
    stepped: list[tuple[int, float]] = []
    for i, s in enumerate(shared):
        original = s._step_up

        async def step_up(pool: str, state: Any, i: int = i, original: Any = original) -> None:
            stepped.append((i, clock.now()))
            await clock.sleep(5.0)  # a slow step up: the lease is held meanwhile
            await original(pool, state)

        monkeypatch.setattr(s, "_step_up", step_up)
    calls = Calls(clock)
    for i, sched in enumerate(scheds):
        calls.spawn(sched, f"p{i}", 10)
    await clock.advance(99.0)
    before = len(calls.starts)
    await clock.advance(6.0)
    assert len(stepped) == 1, stepped
    assert 100.0 - 1e-6 <= stepped[0][1] < 101.0  # when it fell due (µs in Redis)
    assert len(calls.starts) - before <= 1  # the rate of 6 kept while it steps up
    await clock.advance(45.0)
    assert len(stepped) == 1, stepped
    rule = await redis.hgetall(rule_key(shared[0]))
    assert (int(rule[b"rate"]), int(rule[b"allowed"])) == (7, 6)
    assert {s.stats.default.current_rate for s in scheds} == {7.0}
    await calls.close(scheds)
    await redis.aclose()


async def test_a_lowered_rate_survives_a_new_client_joining(memory_redis: object) -> None:
    """One process proves a window ran out (two 429s pointing at its end); a client that
    joins later reads the lowered rate and keeps to it, and does not reset it."""
    from fakeredis import FakeAsyncRedis

    clock = VirtualClock()
    limits = RateLimits(10, 2, period=60.0)
    (first,), (sched,) = processes(memory_redis, clock, limits, 1, 4)
    pool = sched.pool("default")

    async def refused(at: float, wait: float) -> None:
        await clock.sleep(at)
        async with slot(pool) as permit:
            await clock.sleep(0.1)
            permit.rate_limited(wait)

    calls = Calls(clock)
    calls.spawn(sched, "first", 5, duration=0.1)
    # A suspect (the server's window ends at 60), then the check, pointing there too.
    tasks = [asyncio.create_task(refused(1.0, 58.9)), asyncio.create_task(refused(2.0, 57.9))]
    await clock.advance(5.0)
    await asyncio.gather(*tasks)
    await first.aflush()
    redis = FakeAsyncRedis(server=memory_redis)
    rule = rule_key(first)
    assert int((await redis.hgetall(rule))[b"rate"]) == 5  # what the server took

    (_,), (newcomer,) = processes(memory_redis, clock, limits, 1, 4)
    calls.spawn(newcomer, "new", 10, at=65.0)  # from t=70, after the pause to 60
    await clock.advance(70.0)
    assert newcomer.stats.default.current_rate == 5.0  # read at its first ask
    assert int((await redis.hgetall(rule))[b"rate"]) == 5  # not reset to the configured 10
    await clock.advance(50.0)
    spacing = (limits.period + limits.margin) / 5  # the learned 5 a window, evenly spaced
    assert calls.times("new") == pytest.approx([70.0 + i * spacing for i in range(5)])
    await calls.close([sched, newcomer])
    await redis.aclose()


async def test_next_start_in_says_how_long_the_shared_quota_keeps_the_first_waiter(
    memory_redis: object,
) -> None:
    clock = VirtualClock()
    _, (sched,) = processes(memory_redis, clock, RateLimits.pro(), 1, 16)
    calls = Calls(clock)
    calls.spawn(sched, "x", 16, duration=0.1)
    await clock.advance(1.0)
    stats = sched.stats.default
    assert stats.waiting == 1
    assert stats.next_start_in == pytest.approx(60.0, abs=0.1)  # the window (+ margin) ends at 61
    await calls.close([sched])


# Round-robin per call waiting, when one process asks Redis far more often than another ----

# A process farther from Redis: each of its asks reaches Redis this long after it is made,
# while a process next to Redis asks again and again meanwhile (in virtual time, in none).
_FAR = 0.05


def far_from_redis(
    shared: SharedLimiter, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each of ``shared``'s asks reaches Redis ``_FAR`` seconds after it is made."""
    ask = shared._shared

    async def late(*args: Any) -> Any:
        await clock.sleep(_FAR)
        return await ask(*args)

    monkeypatch.setattr(shared, "_shared", late)


def in_window(calls: Calls, label: str, start: float, span: float) -> list[float]:
    """``label``'s starts in the window from ``start`` (within float rounding)."""
    return [t for t in calls.times(label) if start - 1e-6 <= t < start + span - 1e-6]


# 10 starts per 10 s, no margin: each window's starts are free at once at 10, 20, ...
_TEN = RateLimits(10, 2, period=10.0, safety_margin=0.0)


def near_and_far(
    memory_redis: object, monkeypatch: pytest.MonkeyPatch, limits: RateLimits = _TEN
) -> tuple[VirtualClock, list[SharedLimiter], list[Scheduler], Calls]:
    """Two processes sharing ``limits`` (16 calls in flight each): the second one's asks
    reach Redis ``_FAR`` seconds late, so the first asks more often."""
    clock = VirtualClock()
    shared, scheds = processes(memory_redis, clock, limits, 2, 16)
    far_from_redis(shared[1], clock, monkeypatch)
    return clock, shared, scheds, Calls(clock)


async def test_a_process_asking_more_often_does_not_take_another_process_share(
    memory_redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both processes have calls waiting when a window's 10 starts come free; the one next
    to Redis asks ten times before the far one's ask arrives, yet takes only its 5: the
    far one's 5 are held for it until it asks."""
    clock, _, scheds, calls = near_and_far(memory_redis, monkeypatch)
    calls.spawn(scheds[0], "near", 30, duration=0.1)
    calls.spawn(scheds[1], "far", 30, at=1.0, duration=0.1)  # asks while the window is full
    await clock.advance(25.0)
    assert len(in_window(calls, "near", 0.0, 10.0)) == 10  # alone in the first window
    for window in (10.0, 20.0):
        assert in_window(calls, "near", window, 10.0) == pytest.approx([window] * 5)
        far = in_window(calls, "far", window, 10.0)
        assert len(far) == 5 and max(far) < window + 1.0, far
    await calls.close(scheds)


async def test_what_does_not_divide_evenly_goes_to_the_process_asking(
    memory_redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """5 starts a window over two processes with calls waiting: the one asking when they
    come free gets 3, not the one ranked ahead of it (that one may ask only at its next
    poll); the other's 2 are held for it."""
    limits = RateLimits(5, 2, period=10.0, safety_margin=0.0)
    clock, _, scheds, calls = near_and_far(memory_redis, monkeypatch, limits)
    calls.spawn(scheds[0], "near", 30, duration=0.1)
    calls.spawn(scheds[1], "far", 30, at=1.0, duration=0.1)
    await clock.advance(35.0)
    for window in (10.0, 20.0, 30.0):
        assert in_window(calls, "near", window, 10.0) == pytest.approx([window] * 3)
        assert len(in_window(calls, "far", window, 10.0)) == 2
    await calls.close(scheds)


async def test_a_process_with_fewer_calls_than_its_share_gets_them_and_the_rest_goes_on(
    memory_redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The far process has 2 calls waiting (less than half of the window's 10): Redis
    holds exactly 2 for it, and the near process starts the other 8 at once."""
    clock, _, scheds, calls = near_and_far(memory_redis, monkeypatch)
    calls.spawn(scheds[0], "near", 30, duration=0.1)
    calls.spawn(scheds[1], "far", 2, at=1.0, duration=0.1)
    await clock.advance(15.0)
    assert in_window(calls, "near", 10.0, 10.0) == pytest.approx([10.0] * 8)
    assert calls.times("far") == pytest.approx([10.0 + _FAR, 10.0 + 2 * _FAR])
    await calls.close(scheds)


async def test_a_process_whose_calls_grow_while_it_waits_gets_the_larger_share(
    memory_redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The far process told Redis of 1 call waiting; 4 more arrive while it waits for the
    window to end. It recounts within ``LINE_RECOUNT`` and tells Redis, so the next window
    holds 5 for it, not 1."""
    clock, _, scheds, calls = near_and_far(memory_redis, monkeypatch)
    calls.spawn(scheds[0], "near", 40, duration=0.1)
    calls.spawn(scheds[1], "far", 1, at=1.0, duration=0.1)  # its first round: 1, at 10.05
    calls.spawn(scheds[1], "far", 1, at=11.0, duration=0.1)  # told Redis at 11: 1 waiting
    calls.spawn(scheds[1], "far", 4, at=13.0, duration=0.1)  # 7 s before the window ends
    await clock.advance(25.0)
    assert len(in_window(calls, "far", 20.0, 10.0)) == 5
    assert in_window(calls, "near", 20.0, 10.0) == pytest.approx([20.0] * 5)
    await calls.close(scheds)


async def test_a_process_capped_at_one_call_reserves_no_more_than_it_can_start(
    memory_redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The far process runs one call at a time (``max_concurrency=1``) with 5 waiting: it
    tells Redis 1 could start, so the next window holds 1 for it and the near process
    starts the other 9 at once, none held back for calls the far one cannot start."""
    clock, shared, scheds, calls = near_and_far(memory_redis, monkeypatch)
    scheds[1] = Scheduler(  # the same process, running one call at a time
        _TEN, max_concurrency=1, clock=clock, limiters=shared[1].limiters, gates=shared[1].gates
    )
    calls.spawn(scheds[0], "near", 30, duration=0.1)
    calls.spawn(scheds[1], "far", 5, at=1.0, duration=1.0)
    await clock.advance(15.0)
    assert in_window(calls, "near", 10.0, 10.0) == pytest.approx([10.0] * 9)
    assert in_window(calls, "far", 10.0, 10.0) == pytest.approx([10.0 + _FAR])
    await calls.close(scheds)


async def test_a_lowered_rate_takes_turns_with_a_process_that_asks_late(
    memory_redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lowered to 4 starts a window, evenly spaced: each start is held for the process
    ranked ahead (the one that had no turn last), so the processes alternate though the
    near one asks first at every start."""
    from fakeredis import FakeAsyncRedis

    clock, shared, scheds, calls = near_and_far(memory_redis, monkeypatch)
    redis = FakeAsyncRedis(server=memory_redis)
    learned = RuleState(rate=4, allowed=4)
    await redis.hset(rule_key(shared[0]), mapping={**_fields(learned), "version": 1})
    calls.spawn(scheds[0], "near", 10, duration=0.1)
    calls.spawn(scheds[1], "far", 10, duration=0.1)
    await clock.advance(20.0)
    # The far process joins the line at its first ask (0.05), level with the near one.
    labels = [label for label, _ in calls.starts[2:8]]
    assert labels == ["far", "near"] * 3, calls.starts
    await calls.close(scheds)
    await redis.aclose()


# Processes, against a real Redis -------------------------------------------------------


async def test_four_processes_never_exceed_the_quota(
    emulator: Emulator, redis_server: RedisServer
) -> None:
    workers, each = 4, 8
    results = await run_quota_workers(emulator, redis_server.url, workers, each)
    assert sum(r["errors"] for r in results) == 0
    assert emulator.stats.count(outcome="rate_limited") == 0
    times = admitted_times(emulator)
    assert len(times) == workers * each
    assert max_in_window(times, PERIOD) <= LIMIT
    # And the quota was used: 32 starts of 10 per 2 s fit in 3 windows (6 s) at best.
    # And the first window's ten went out together. (How long the rest took is the machine's.)
    assert max(times) - min(times) >= 3 * PERIOD
    assert max_in_window(times, PERIOD) == LIMIT


async def test_a_proven_429_seen_by_one_pauses_all(redis_server: RedisServer) -> None:
    # The server allows 5 per 2 s, the clients believe 10: the first one's burst of 8 meets
    # three 429s pointing at one window end (whole seconds: three, not two), a proof, and
    # the pause goes to every client.
    limits = RateLimitConfig(default=5, expensive=2, period=PERIOD, algorithm="sliding")
    paused = asyncio.Event()

    def on_event(event: PoolEvent) -> None:
        if event.kind == "paused":
            paused.set()

    async with Emulator(EmulatorConfig(rate_limits=limits)) as emu:
        first = client_for(emu, redis_server, on_event=on_event)
        others = [client_for(emu, redis_server) for _ in range(2)]
        try:
            burst = [asyncio.ensure_future(first.search(f"grace {i}")) for i in range(8)]
            await paused.wait()
            shared = first._scheduler.shared
            assert shared is not None
            await shared.aflush()  # the pause is in Redis
            refused = [a.time for a in emu.arrivals if not a.admitted]
            assert len(refused) == 3
            await asyncio.gather(*burst, *(c.search(f"nature {i}") for i, c in enumerate(others)))
            assert [c.stats.default.rate_limited for c in others] == [0, 0]
        finally:
            for c in (first, *others):
                await c.aclose()
        later = [a.time for a in emu.arrivals if a.admitted][5:]
    assert len(later) == 5
    # Nobody, not even the clients that never met a 429, started before the pause ended.
    assert min(later) >= max(refused) + PERIOD - 0.1


async def test_redis_restarted_mid_run_loses_nothing(
    emulator: Emulator, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="magisterium_async")
    sent = 0
    unreachable = asyncio.Event()
    restarts: list[asyncio.Future[None]] = []

    class Heard(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "Redis unreachable" in record.getMessage():
                unreachable.set()

    async def restart() -> None:
        # No persistence. In a thread, as Redis stops and starts on its own: blocking this
        # loop would hold back the emulator too. Started again only once a client found it
        # down, however fast or slow the machine is.
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, redis_server.stop)
        await asyncio.wait_for(unreachable.wait(), 60)
        await loop.run_in_executor(None, redis_server.start)

    def on_event(event: PoolEvent) -> None:
        nonlocal sent
        if event.kind == "sent" and event.pool == "default":
            sent += 1
            if sent == 12:
                restarts.append(asyncio.ensure_future(restart()))

    heard = Heard()
    logging.getLogger("magisterium_async").addHandler(heard)
    clients = [client_for(emulator, redis_server, workers=3, on_event=on_event) for _ in range(3)]
    try:
        results = await asyncio.gather(
            *(c.search(f"grace {i} {j}") for i, c in enumerate(clients) for j in range(12))
        )
    finally:
        for c in clients:
            await c.aclose()
        await asyncio.gather(*restarts)
        logging.getLogger("magisterium_async").removeHandler(heard)
    assert len(restarts) == 1
    assert len(results) == 36
    assert emulator.stats.count(outcome="rate_limited") == 0
    times = admitted_times(emulator)
    assert len(times) == 36
    assert max_in_window(times, PERIOD) <= LIMIT
    assert any("Redis unreachable" in r.getMessage() for r in caplog.records)
    assert any("Redis is back" in r.getMessage() for r in caplog.records)


async def test_no_redis_at_all_falls_back_without_hanging(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="magisterium_async")
    nowhere = RedisServer()  # never started: connection refused
    began = time.monotonic()  # the emulator's clock
    async with client_for(emulator, nowhere, workers=2) as client:
        results = await asyncio.wait_for(
            asyncio.gather(*(client.search(f"grace {i}") for i in range(6))), 30
        )
    assert len(results) == 6
    times = admitted_times(emulator)
    # One window's wait first (others may have just spent the quota), then 10 / 2 workers.
    assert min(times) >= began + PERIOD
    assert max_in_window(times, PERIOD) <= LIMIT // 2
    assert any("Redis unreachable" in r.getMessage() for r in caplog.records)


async def test_bulk_is_paced_in_redis_once_another_process_asked_interactively(
    redis_server: RedisServer,
) -> None:
    """A real Redis, on its own clock: once another client's interactive call asked, every
    bulk start the shared log admits is at least a quota interval after the start before
    it (the script paces them: the gaps are Redis's times, however slow the machine)."""
    from magisterium_async._clock import LoopClock

    limits = RateLimits(10, 2, period=1.0)  # a quota interval of 0.1 s
    config = SharedQuota(redis_server.url, workers=2)
    shared = [SharedLimiter(config, "token", limits, LoopClock()) for _ in range(2)]
    scheds = [
        Scheduler(limits, max_concurrency=16, limiters=s.limiters, gates=s.gates) for s in shared
    ]
    burst = asyncio.Event()
    started = 0

    async def bulk_call() -> None:
        nonlocal started
        async with slot(scheds[0].pool("default"), "bulk"):
            started += 1
            if started == limits.default:
                burst.set()  # the first window's starts, before anyone contended

    tasks = [asyncio.create_task(bulk_call()) for _ in range(22)]
    await burst.wait()
    async with slot(scheds[1].pool("default"), "interactive"):
        pass
    await asyncio.gather(*tasks)
    log_key, _ = shared[0].keys("default")
    entries = await shared[0]._redis.zrange(log_key, 0, -1, withscores=True)
    for sched in scheds:
        await sched.aclose()
    person = shared[1]._id
    order = [(text_of(ticket).startswith(person), at) for ticket, at in entries]
    asked = next(at for interactive, at in order if interactive)
    after = [(interactive, at) for interactive, at in order if at >= asked]
    gaps = [b - a for (_, a), (interactive, b) in itertools.pairwise(after) if not interactive]
    assert len(gaps) >= 10  # the bulk calls after the interactive one, all paced
    assert min(gaps) >= 0.1 * 1e6 - 1  # µs


def text_of(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def test_closing_wakes_waiters(emulator: Emulator, redis_server: RedisServer) -> None:
    from magisterium_async import ClientClosedError

    client = client_for(emulator, redis_server, retry_policy=RetryPolicy(max_retries=0))
    calls = [asyncio.ensure_future(client.search(f"grace {i}")) for i in range(LIMIT + 3)]
    await asyncio.wait(calls, return_when=asyncio.FIRST_COMPLETED)
    await client.aclose()
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert any(isinstance(o, ClientClosedError) for o in outcomes)


def test_a_missing_redis_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)
    with pytest.raises(SharedQuotaError, match=r"pip install 'magisterium-async\[redis\]'"):
        AsyncMagisterium(token="t", shared_quota="redis://127.0.0.1:1/0")


# The same limiter in virtual time, on an in-memory Redis (the same Lua) -------------------


def shared_schedulers(
    memory_redis: object, clock: VirtualClock, limits: RateLimits, processes: int
) -> tuple[list[SharedLimiter], list[Scheduler]]:
    from fakeredis import FakeAsyncRedis

    config = SharedQuota("redis://memory", workers=processes)
    shared = [
        SharedLimiter(config, "token", limits, clock, redis=FakeAsyncRedis(server=memory_redis))
        for _ in range(processes)
    ]
    scheds = [
        # 15 in flight: one process may take a whole window when the others have no work left
        Scheduler(limits, max_concurrency=15, clock=clock, limiters=s.limiters, gates=s.gates)
        for s in shared
    ]
    return shared, scheds


async def test_four_processes_share_the_pro_quota_in_virtual_time(memory_redis: object) -> None:
    clock = VirtualClock()
    limits = RateLimits.pro()  # 15 a minute, the 1 s margin
    _, scheds = shared_schedulers(memory_redis, clock, limits, 4)
    arrivals: list[float] = []

    async def call(sched: Scheduler) -> None:
        async with slot(sched.pool("default")):
            await clock.sleep(0.5)  # on its way
            arrivals.append(clock.now())
            await clock.sleep(0.5)

    tasks = [asyncio.create_task(call(s)) for s in scheds for _ in range(15)]
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    for sched in scheds:
        await sched.aclose()
    assert len(arrivals) == 60
    assert max_in_window(arrivals, 60.0) <= 15  # never over the quota, all four together
    # and the quota used: 60 starts of 15 per 61 s fit in four windows, 3 x 61 s apart
    assert max(arrivals) - min(arrivals) <= 3 * 61.0 + 1e-6


async def test_a_proven_429_pauses_every_process_in_virtual_time(memory_redis: object) -> None:
    clock = VirtualClock()
    limits = RateLimits.pro()
    shared, scheds = shared_schedulers(memory_redis, clock, limits, 2)
    first, second = scheds
    starts: list[float] = []

    async def refused(at: float, retry_after: float) -> None:
        await clock.sleep(at)
        async with slot(first.pool("default")) as permit:
            await clock.sleep(0.5)
            permit.rate_limited(retry_after)

    async def later() -> None:
        await clock.sleep(2.0)
        async with slot(second.pool("default")):
            starts.append(clock.now())

    tasks = [
        asyncio.create_task(refused(0.0, 30.5)),  # window ends at 31
        asyncio.create_task(refused(0.2, 30.3)),  # it says so again: proof
        asyncio.create_task(later()),
    ]
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    await shared[0].aflush()
    for sched in scheds:
        await sched.aclose()
    assert starts == [pytest.approx(31.0)]  # the other process waited out the pause


async def test_a_suspect_proven_only_when_its_window_ended_pauses_no_one(
    memory_redis: object,
) -> None:
    clock = VirtualClock()
    shared, scheds = shared_schedulers(memory_redis, clock, RateLimits.pro(), 2)
    first, second = scheds
    starts: list[float] = []

    async def call(sched: Scheduler, at: float, retry_after: float | None = None) -> None:
        await clock.sleep(at)
        async with slot(sched.pool("default")) as permit:
            starts.append(clock.now())
            await clock.sleep(0.5)
            if retry_after is not None:
                permit.rate_limited(retry_after)

    # 15 at t=0 spend the minute; one of them gets a 429 whose window ends at t=11. No
    # probe can go before then: at t=61 it counts as proof, but its window is long over.
    tasks = [asyncio.create_task(call(first, 0.0)) for _ in range(14)]
    tasks.append(asyncio.create_task(call(first, 0.0, retry_after=10.5)))
    tasks.append(asyncio.create_task(call(first, 61.0)))
    tasks.append(asyncio.create_task(call(second, 61.5)))
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    await shared[0].aflush()
    for sched in scheds:
        await sched.aclose()
    assert starts[15:] == [61.0, 61.5]  # no pause left over for the other process


@pytest.mark.parametrize(
    ("first_pools", "noticed", "other"),
    [
        # The process used both pools; it meets the loss through catholic_qa first.
        (("default", "expensive"), "expensive", "default"),
        # It used the default pool alone; its first catholic_qa call comes after the loss.
        (("default",), "default", "expensive"),
    ],
)
async def test_a_lost_state_met_through_one_pool_still_pauses_the_other(
    memory_redis: object, first_pools: tuple[str, ...], noticed: str, other: str
) -> None:
    """Redis restarted without persistence, after the two processes spent the minute of
    both pools: the first process meets the loss through one pool, and its next call in the
    other pool waits out a window too, since the lost log's starts there (the two
    processes') may still be in the server's window."""
    from fakeredis import FakeAsyncRedis

    clock = VirtualClock()
    limits = RateLimits.pro()  # 15 and 2 a minute, the 1 s margin
    shared, scheds = shared_schedulers(memory_redis, clock, limits, 2)
    first, second = scheds
    starts: list[tuple[str, float]] = []

    async def call(sched: Scheduler, pool: str, at: float) -> None:
        await clock.sleep(at)
        async with slot(sched.pool(pool)):
            starts.append((pool, clock.now()))
            await clock.sleep(0.5)

    # Both pools' minute, spent between the two processes.
    spent = [(first, "default")] * 8 + [(second, "default")] * 7
    spent += [(first if "expensive" in first_pools else second, "expensive"), (second, "expensive")]
    tasks = [asyncio.create_task(call(sched, pool, 0.0)) for sched, pool in spent]
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert clock.now() < 10.0

    await FakeAsyncRedis(server=memory_redis).flushall()  # the restart: the state is gone
    later = [
        asyncio.create_task(call(first, noticed, 10.0 - clock.now())),
        asyncio.create_task(call(first, other, 11.0 - clock.now())),
    ]
    await clock.run_until_idle()
    await asyncio.gather(*later)
    for s in shared:
        await s.aflush()
    for sched in scheds:
        await sched.aclose()
    span = limits.period + limits.margin
    # Not at 11, the minute's third catholic_qa or sixteenth search: a window after 11.
    assert max(t for pool, t in starts if pool == other) >= 11.0 + span - 1e-6
    for pool, limit in (("default", limits.default), ("expensive", limits.expensive)):
        assert max_in_window([t for p, t in starts if p == pool], span) <= limit
