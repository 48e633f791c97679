"""The scheduler of one client, in virtual time: its pools, the one cap over all of them,
which waiter the freed slot goes to, what it tells its users (the ``PoolStats`` and
``SchedulerStats`` snapshots of ``client.stats``, the ``PoolEvent``s of ``on_event``), and
the scheduler a client gets (local limiters, or the shared quota's)."""

from __future__ import annotations

import asyncio
import dataclasses
import math

import pytest

from magisterium_async import RateLimits, SharedQuota
from magisterium_async._clock import VirtualClock
from magisterium_async._events import PoolEvent
from magisterium_async._ratelimit import (
    PoolStats,
    Priority,
    SharedPool,
    WindowLimiter,
)
from tests.helpers.quota import PRO, Scheduler, retried, scheduler, slot

UNLIMITED = RateLimits.unlimited()


async def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="max_concurrency"):
        Scheduler(PRO, max_concurrency=0)
    with pytest.raises(ValueError, match="safety_margin"):
        Scheduler(PRO, max_concurrency=1, safety_margin=-1)


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"max_concurrency": 2.5}, TypeError, "max_concurrency"),
        ({"max_concurrency": 1, "safety_margin": float("nan")}, ValueError, "safety_margin"),
        ({"max_concurrency": 1, "safety_margin": float("inf")}, ValueError, "safety_margin"),
    ],
)
def test_a_bad_value_is_refused_naming_it(
    kwargs: dict[str, object], error: type, name: str
) -> None:
    with pytest.raises(error, match=name):
        Scheduler(PRO, **kwargs)  # type: ignore[arg-type]


async def test_three_pools_and_none_is_the_unmetered_one() -> None:
    sched = Scheduler(PRO, max_concurrency=4, clock=VirtualClock())
    assert [sched.pool(name).name for name in ("default", "expensive", None)] == [
        "default", "expensive", "unmetered",
    ]  # fmt: skip
    assert sched.pool(None)._limiter is None  # only the concurrency caps apply there
    assert sched.idle()
    await sched.aclose()


async def test_max_concurrency_caps_every_pool_together() -> None:
    clock = VirtualClock()
    sched = Scheduler(UNLIMITED, max_concurrency=2, clock=clock)
    started: list[tuple[str, float]] = []

    async def call(pool: str | None, duration: float) -> None:
        async with slot(sched.pool(pool)):  # type: ignore[arg-type]
            started.append((str(pool), clock.now()))
            await clock.sleep(duration)

    tasks = [asyncio.create_task(call(p, d)) for p, d in (("default", 5.0), (None, 3.0))]
    await clock.advance(0)
    tasks.append(asyncio.create_task(call("expensive", 1.0)))
    await clock.advance(0)
    assert sched.stats.in_flight == 2 and sched.stats.expensive.waiting == 1
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert started == [("default", 0.0), ("None", 0.0), ("expensive", 3.0)]
    await sched.aclose()


async def test_a_freed_slot_goes_to_an_interactive_call_in_any_pool_before_bulk() -> None:
    clock = VirtualClock()
    sched = Scheduler(UNLIMITED, max_concurrency=1, clock=clock)
    started: list[str] = []

    async def call(label: str, pool: str, priority: Priority, at: float) -> None:
        await clock.sleep(at)
        async with slot(sched.pool(pool), priority):  # type: ignore[arg-type]
            started.append(label)
            await clock.sleep(1.0)

    calls = [
        ("first", "default", "bulk", 0.0),
        ("bulk", "default", "bulk", 0.1),
        ("person", "expensive", "interactive", 0.2),  # arrived last, in another pool
    ]
    tasks = [asyncio.create_task(call(*c)) for c in calls]  # type: ignore[arg-type]
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert started == ["first", "person", "bulk"]
    await sched.aclose()


# What it tells -------------------------------------------------------------------------

# 2 a minute in the default pool, 1 in the expensive one; the safety margin is 1 s.
LIMITS = RateLimits(2, 1, period=60.0, adaptive=False)


def with_events(limits: RateLimits = LIMITS) -> tuple[Scheduler, VirtualClock, list[PoolEvent]]:
    clock = VirtualClock()
    events: list[PoolEvent] = []
    sched = Scheduler(limits, max_concurrency=4, clock=clock, on_event=events.append)
    return sched, clock, events


async def test_a_burst_shows_what_went_what_waits_and_for_how_long() -> None:
    sched, clock, events = with_events()

    async def call() -> None:
        async with slot(sched.pool("default")):
            await clock.sleep(5.0)

    tasks = [asyncio.create_task(call()) for _ in range(3)]
    await clock.advance(0)
    stats = sched.stats
    assert stats.default == PoolStats(
        name="default", sent=2, rate_limited=0, retries=0, paused_seconds=0.0,
        current_rate=2.0, configured_rate=2.0, in_flight=2, waiting=1,
        next_start_in=61.0,  # a span (the minute and the margin) after the first start
    )  # fmt: skip
    assert (stats.in_flight, stats.max_concurrency) == (2, 4)
    assert (stats.expensive.sent, stats.expensive.configured_rate) == (0, 1.0)
    assert stats.unmetered.configured_rate == stats.unmetered.current_rate == math.inf
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert (sched.stats.default.sent, sched.stats.default.waiting, sched.stats.in_flight) == (
        3,
        0,
        0,
    )
    # ``sent`` says how long each request waited for its slot; ``waiting``, as the wait
    # for quota begins, how long it will last.
    assert events == [
        PoolEvent("sent", "default", 0.0, 0.0),
        PoolEvent("sent", "default", 0.0, 0.0),
        PoolEvent("waiting", "default", 0.0, 61.0),
        PoolEvent("sent", "default", 61.0, 61.0),
    ]
    await sched.aclose()


async def test_a_proven_429_is_counted_and_its_pause_adds_up_as_it_passes() -> None:
    sched, clock, events = with_events(RateLimits(15, 2, period=60.0, adaptive=False))
    # Two 429s naming the same window end (30.5): proven, the pool pauses until then.
    for at, wait in ((0.0, 30.5), (1.0, 29.5)):
        await clock.advance(at - clock.now())
        async with slot(sched.pool("default")) as permit:
            permit.rate_limited(wait)
            retried(sched, "default")
    await clock.advance(10.0)
    stats = sched.stats.default
    assert (stats.sent, stats.rate_limited, stats.retries) == (2, 2, 2)
    assert stats.paused_seconds == 10.0  # so far, not the whole pause
    await clock.advance(30.0)
    assert sched.stats.default.paused_seconds == 29.5
    assert [(e.kind, e.time, e.value) for e in events] == [
        ("sent", 0.0, 0.0),
        ("rate_limited", 0.0, 30.5),
        ("sent", 1.0, 0.0),
        ("rate_limited", 1.0, 29.5),
        ("paused", 1.0, 29.5),  # seconds until the pool resumes
    ]
    await sched.aclose()


async def test_stats_are_frozen_snapshots() -> None:
    sched, _ = scheduler()
    stats = sched.stats
    assert (stats.default.configured_rate, stats.expensive.configured_rate) == (15, 2)
    assert stats.max_concurrency == 32
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.default.sent = 3  # type: ignore[misc]
    async with slot(sched.pool("default")):
        retried(sched, "default")
        assert sched.stats.default.in_flight == 1
    assert stats.default.sent == 0
    assert (sched.stats.default.sent, sched.stats.default.retries) == (1, 1)


def test_next_start_in_is_zero_unless_said_otherwise() -> None:
    stats = PoolStats("default", 0, 0, 0, 0.0, 2.0, 2.0, 0, 0)
    assert stats.next_start_in == 0.0


# The scheduler a client gets -----------------------------------------------------------


async def test_without_a_shared_quota_each_metered_pool_limits_itself() -> None:
    scheduler = Scheduler(RateLimits(10, 2), max_concurrency=4, clock=VirtualClock(), account="t")
    assert scheduler.shared is None
    for name in ("default", "expensive"):
        assert isinstance(scheduler.pool(name)._limiter, WindowLimiter)
    await scheduler.aclose()


async def test_with_a_shared_quota_the_pools_take_the_shared_limiters() -> None:
    # Nothing connects before a request: an unreachable URL is fine here.
    quota = SharedQuota("redis://127.0.0.1:1")
    scheduler = Scheduler(
        RateLimits(10, 2), max_concurrency=4, clock=VirtualClock(), shared=quota, account="t"
    )
    shared = scheduler.shared
    assert shared is not None
    for name in ("default", "expensive"):
        limiter = scheduler.pool(name)._limiter
        assert isinstance(limiter, SharedPool) and limiter is shared.limiters[name]
        # Redis admits each start: without its gate a pool would start on its own count.
        admissions = scheduler.pool(name)._admissions
        assert admissions is not None and admissions.gate is shared.gates[name]
    assert scheduler.pool(None)._limiter is None  # the unmetered pool stays unmetered
    await scheduler.aclose()
