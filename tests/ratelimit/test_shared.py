"""The shared quota in virtual time, on an in-memory Redis running the same Lua: what one
process learns, every process acts on; interactive calls go first across processes."""

from __future__ import annotations

import asyncio
import math
import random

import pytest

from magisterium_async._clock import VirtualClock
from magisterium_async._config import Priority, RateLimits, RetryPolicy
from magisterium_async._errors import RateLimitError
from magisterium_async._ratelimit import Scheduler, SharedLimiter, SharedQuota
from magisterium_async._retry import call_with_retries

from ..test_scheduler import PRO_SCENARIOS, Quota


@pytest.fixture
def memory_redis() -> object:
    fakeredis = pytest.importorskip("fakeredis", reason="needs fakeredis[lua]")
    pytest.importorskip("lupa", reason="needs fakeredis[lua]")
    return fakeredis.FakeServer()


def processes(
    memory_redis: object, clock: VirtualClock, limits: RateLimits, count: int, concurrency: int
) -> tuple[list[SharedLimiter], list[Scheduler]]:
    """``count`` clients sharing one token's quota through one (in-memory) Redis."""
    from fakeredis import FakeAsyncRedis

    config = SharedQuota("redis://memory", workers=count)
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
    memory_redis: object, quota: Quota, told: float, requests: int, count: int = 4
) -> tuple[float, list[Scheduler]]:
    """The scheduler tests' scenario, its requests split over ``count`` processes."""
    clock = VirtualClock()
    limits = RateLimits(told, told, period=quota.period)
    _, scheds = processes(memory_redis, clock, limits, count, 16)
    rng = random.Random(1)
    window, seen = -1, 0

    async def attempt() -> None:
        nonlocal window, seen
        await clock.sleep(0.05 + rng.uniform(0, quota.jitter))
        now = clock.now()
        wait: float | None = None
        if math.floor(now / quota.period) != window:
            window, seen = math.floor(now / quota.period), 0
        if seen < quota.limit_at(window * quota.period):
            seen += 1
        else:
            wait = (window + 1) * quota.period - now
        await clock.sleep(0.05)
        if wait is not None:
            quota.refused += 1
            raise RateLimitError("Rate limit exceeded", data={"retryAfter": math.ceil(wait)})
        quota.accepted += 1

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
    """The scheduler's Pro-quota scenarios, spread over four processes: the same goals."""
    told, quota, requests, most_429s, most_wall = PRO_SCENARIOS[name]
    quota = Quota(quota.schedule, quota.period, jitter=quota.jitter)
    wall, _ = await shared_scenario(memory_redis, quota, told, requests)
    assert quota.accepted == requests
    assert quota.refused / quota.accepted <= most_429s, quota.refused
    assert wall <= most_wall * quota.ideal(requests), (wall, quota.ideal(requests))


async def test_a_lowered_rate_is_read_by_every_process(memory_redis: object) -> None:
    """One process proves a window ran out; the others' pools show the lower rate at once."""
    told, quota, _, _, _ = PRO_SCENARIOS["hidden"]
    quota = Quota(quota.schedule, quota.period)
    _, scheds = await shared_scenario(memory_redis, quota, told, 120)
    rates = {s.stats.default.current_rate for s in scheds}
    assert rates and max(rates) <= 16, rates  # 150 told, 15 allowed: all learned it


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
        async with sched.pool("default").slot(priority):
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
