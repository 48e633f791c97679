"""Priorities and fairness through the pools, in virtual time: who starts, and when."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from magisterium_async._clock import VirtualClock
from magisterium_async._config import RateLimits
from magisterium_async._ratelimit import Pool, Priority, Scheduler

PRO = RateLimits.pro()  # 15 a minute in the default pool; the safety margin is 1 s
QUOTA_INTERVAL = PRO.period / 15  # 4 s between starts at the full rate


def scheduler(
    limits: RateLimits = PRO, *, max_concurrency: int = 64
) -> tuple[Scheduler, VirtualClock]:
    clock = VirtualClock()
    return Scheduler(limits, max_concurrency=max_concurrency, clock=clock), clock


class Starts:
    """Who started when: ``(label, time)`` in the order they started."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.seen: list[tuple[str, float]] = []

    async def call(
        self,
        pool: Pool,
        label: str,
        priority: Priority = "interactive",
        key: str | None = None,
        *,
        at: float = 0.0,
        duration: float = 1.0,
    ) -> None:
        await self.clock.sleep(at)
        async with pool.slot(priority, key):
            self.seen.append((label, self.clock.now()))
            await self.clock.sleep(duration)

    def spawn(
        self,
        n: int,
        pool: Pool,
        label: str,
        priority: Priority = "interactive",
        key: str | None = None,
        **kw: float,
    ) -> list[asyncio.Task[None]]:
        calls = (self.call(pool, label, priority, key, **kw) for _ in range(n))
        return [asyncio.create_task(c) for c in calls]

    def times(self, label: str) -> list[float]:
        return [t for name, t in self.seen if name == label]


async def finish(clock: VirtualClock, sched: Scheduler, tasks: list[asyncio.Task[None]]) -> None:
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    await sched.aclose()


# Priorities --------------------------------------------------------------------------------


async def test_an_interactive_call_starts_at_the_next_free_start_before_100_bulk_calls() -> None:
    sched, clock = scheduler()
    pool = sched.pool("default")
    seen = Starts(clock)
    tasks = seen.spawn(100, pool, "bulk", "bulk")
    tasks += seen.spawn(1, pool, "person", "interactive", at=10.0)
    await finish(clock, sched, tasks)
    (at,) = seen.times("person")
    assert at == 61.0  # the first start the quota frees after it arrived
    order = [name for name, t in seen.seen if t == 61.0]
    assert order[0] == "person"  # ahead of 85 bulk calls that waited longer
    assert max(seen.times("bulk")) < 7 * 61.0


async def test_bulk_still_gets_every_start_interactive_calls_leave() -> None:
    """Interactive calls cut in; the quota is used exactly as a bulk job alone uses it."""

    async def run(people: int) -> list[float]:
        sched, clock = scheduler()
        pool = sched.pool("default")
        seen = Starts(clock)
        tasks = seen.spawn(110 - people, pool, "bulk", "bulk")
        for i in range(people):
            tasks += seen.spawn(1, pool, "person", "interactive", at=5.0 + 20.0 * i)
        await finish(clock, sched, tasks)
        return sorted(t for _, t in seen.seen)

    alone, mixed = await run(0), await run(10)
    assert mixed == alone  # the same starts at the same times: nothing of the quota lost


async def test_interactive_calls_go_first_across_pools_under_max_concurrency() -> None:
    sched, clock = scheduler(RateLimits.unlimited(), max_concurrency=1)
    seen = Starts(clock)
    tasks = seen.spawn(3, sched.pool("default"), "bulk", "bulk", duration=5.0)
    tasks += seen.spawn(1, sched.pool("expensive"), "person", "interactive", at=1.0)
    tasks += seen.spawn(1, sched.pool(None), "late bulk", "bulk", at=0.5)
    await finish(clock, sched, tasks)
    assert [name for name, _ in seen.seen] == ["bulk", "person", "bulk", "bulk", "late bulk"]
    assert seen.times("person") == [5.0]  # the first slot freed, ahead of older bulk calls


async def test_within_one_priority_the_oldest_goes_first_across_pools() -> None:
    sched, clock = scheduler(RateLimits.unlimited(), max_concurrency=1)
    seen = Starts(clock)
    tasks = seen.spawn(1, sched.pool("default"), "first", "bulk", duration=5.0)
    tasks += seen.spawn(1, sched.pool("expensive"), "older", "bulk", at=1.0)
    tasks += seen.spawn(1, sched.pool("default"), "newer", "bulk", at=2.0)
    await finish(clock, sched, tasks)
    assert [name for name, _ in seen.seen] == ["first", "older", "newer"]


# Fairness ------------------------------------------------------------------------------


async def test_a_second_keys_first_call_starts_within_two_quota_intervals() -> None:
    """The issue's done-when: one key has 1,000 calls queued; another key's first call
    starts within two quota intervals of arriving, not after the thousand."""
    # One call at a time, each as long as a quota interval: a start every interval.
    sched, clock = scheduler(max_concurrency=1)
    pool = sched.pool("default")
    seen = Starts(clock)
    tasks = seen.spawn(1000, pool, "crowd", "bulk", "crowd", duration=QUOTA_INTERVAL)
    tasks += seen.spawn(1, pool, "other", "bulk", "other", at=30.0)
    tasks += seen.spawn(1, pool, "other later", "bulk", "other", at=30.0)
    await clock.advance(30.0 + 2 * QUOTA_INTERVAL)
    assert seen.times("other")
    assert seen.times("other")[0] - 30.0 <= 2 * QUOTA_INTERVAL
    # Round-robin after that: its second call comes one crowd turn later, not at the back.
    await clock.advance(2 * QUOTA_INTERVAL)
    assert seen.times("other later")
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await sched.aclose()


async def test_a_second_keys_calls_take_every_other_paced_start_of_a_crowd() -> None:
    """A crowd's backlog is paced, a start every quota interval (4 s), not a burst of 15 a
    window: a newcomer key's calls take the next start and every other one after it."""
    sched, clock = scheduler()
    pool = sched.pool("default")
    seen = Starts(clock)
    tasks = seen.spawn(1000, pool, "crowd", "bulk", "crowd")
    tasks += seen.spawn(3, pool, "other", "bulk", "other", at=10.0)
    await clock.advance(30.0)
    assert seen.times("other") == [12.0, 20.0, 28.0]
    assert seen.times("crowd") == [0.0, 4.0, 8.0, 16.0, 24.0]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await sched.aclose()


TEN = RateLimits(10, 2, period=1.0)  # 10 a second: a quota interval of 0.1 s; margin 20 ms


async def first_start_of_a_newcomer(arrives: float) -> float:
    """A key with 1,000 calls queued at 10 a second; another key's first call arrives at
    ``arrives``: how long it waits to start."""
    sched, clock = scheduler(TEN, max_concurrency=16)
    pool = sched.pool("default")
    seen = Starts(clock)
    tasks = seen.spawn(1000, pool, "crowd", "interactive", "crowd", duration=0.01)
    tasks += seen.spawn(1, pool, "new", "interactive", "new", at=arrives, duration=0.01)
    await clock.advance(arrives + 1.0)
    (started,) = seen.times("new")
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await sched.aclose()
    return started - arrives


@pytest.mark.parametrize("window", [0, 1, 4])
@pytest.mark.parametrize("phase", [0.0, 0.01, 0.05, 0.1, 0.33, 0.5, 0.9, 0.91, 0.99, 1.0, 1.01])
async def test_a_new_keys_first_call_starts_within_two_quota_intervals_at_any_phase(
    window: int, phase: float
) -> None:
    """The issue's done-when, in virtual time: paced starts (the log alone would let the
    crowd take a window's 10 starts in one burst as each window opens)."""
    waited = await first_start_of_a_newcomer(window * 1.02 + phase)
    assert waited <= 2 * 0.1


async def test_a_paced_backlog_still_gets_the_whole_quota() -> None:
    sched, clock = scheduler(TEN, max_concurrency=16)
    pool = sched.pool("default")
    seen = Starts(clock)
    tasks = seen.spawn(1000, pool, "crowd", "bulk", "crowd", duration=0.01)
    await clock.advance(10.2)
    starts = [t for t in seen.times("crowd") if t < 10 * 1.02 - 0.05]
    assert len(starts) == 10 * 10  # 10 a window of 1.02 s (the span), as without pacing
    assert all(b - a >= 0.1 - 1e-9 for a, b in itertools.pairwise(starts))  # never a burst
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await sched.aclose()


async def test_without_fairness_keys_a_gather_bursts_as_the_log_allows() -> None:
    sched, clock = scheduler(TEN)
    seen = Starts(clock)
    tasks = seen.spawn(20, sched.pool("default"), "job", duration=0.01)
    await finish(clock, sched, tasks)
    assert seen.times("job") == [0.0] * 10 + [pytest.approx(1.02)] * 10


async def test_keyed_calls_that_fit_in_the_free_starts_go_at_once() -> None:
    sched, clock = scheduler(TEN)
    seen = Starts(clock)
    tasks = seen.spawn(10, sched.pool("default"), "user", "interactive", "user", duration=0.01)
    await finish(clock, sched, tasks)
    assert seen.times("user") == [0.0] * 10


async def test_calls_without_a_key_share_one_turn() -> None:
    sched, clock = scheduler(RateLimits.unlimited(), max_concurrency=1)
    seen = Starts(clock)
    pool = sched.pool("default")
    tasks = seen.spawn(1, pool, "first", "bulk", duration=1.0)
    tasks += seen.spawn(2, pool, "none", "bulk", at=0.1)
    tasks += seen.spawn(1, pool, "k", "bulk", "k", at=0.2)
    await finish(clock, sched, tasks)
    assert [name for name, _ in seen.seen] == ["first", "none", "k", "none"]


# What the stats say ----------------------------------------------------------------------


async def test_next_start_in_says_how_long_until_the_first_waiter_may_start() -> None:
    sched, clock = scheduler()
    pool = sched.pool("default")
    seen = Starts(clock)
    assert sched.stats.default.next_start_in == 0.0  # nobody waits
    tasks = seen.spawn(16, pool, "x", duration=0.5)
    await clock.advance(0)
    stats = sched.stats.default
    assert (stats.waiting, stats.next_start_in) == (1, 61.0)  # a span after the burst
    await clock.advance(10.0)
    assert sched.stats.default.next_start_in == 51.0
    await finish(clock, sched, tasks)
    assert sched.stats.default.next_start_in == 0.0


async def test_next_start_in_is_zero_while_the_wait_is_for_a_slot_not_the_quota() -> None:
    sched, clock = scheduler(max_concurrency=1)
    seen = Starts(clock)
    tasks = seen.spawn(2, sched.pool("default"), "x", duration=5.0)
    await clock.advance(1.0)
    stats = sched.stats.default
    assert (stats.in_flight, stats.waiting, stats.next_start_in) == (1, 1, 0.0)
    await finish(clock, sched, tasks)


async def test_next_start_in_counts_a_pause() -> None:
    sched, clock = scheduler(RateLimits(15, 2, period=60.0, adaptive=False))
    pool = sched.pool("default")
    async with pool.slot() as permit:
        permit.rate_limited(30.5)  # a suspect: the window ends at 30.5
    await clock.advance(1.0)
    async with pool.slot() as permit:
        permit.rate_limited(29.5)  # the same window end: proven, the pool pauses to 30.5
    seen = Starts(clock)
    tasks = seen.spawn(1, pool, "x")
    await clock.advance(0.5)
    assert sched.stats.default.next_start_in == 29.0
    await finish(clock, sched, tasks)
    assert seen.times("x") == [30.5]
