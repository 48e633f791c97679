"""What the engine tells its users, from a scheduler in virtual time: the ``PoolStats`` and
``SchedulerStats`` snapshots of ``client.stats``, and the ``PoolEvent``s of ``on_event``."""

from __future__ import annotations

import asyncio
import dataclasses
import math

import pytest

from magisterium_async._clock import VirtualClock
from magisterium_async._config import RateLimits
from magisterium_async._ratelimit import PoolEvent, PoolStats, Scheduler

from ..test_scheduler import scheduler

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
        async with sched.pool("default").slot():
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
    # ``sent`` says how long each request waited for its slot.
    assert events == [
        PoolEvent("sent", "default", 0.0, 0.0),
        PoolEvent("sent", "default", 0.0, 0.0),
        PoolEvent("sent", "default", 61.0, 61.0),
    ]
    await sched.aclose()


async def test_a_proven_429_is_counted_and_its_pause_adds_up_as_it_passes() -> None:
    sched, clock, events = with_events(RateLimits(15, 2, period=60.0, adaptive=False))
    # Two 429s naming the same window end (30.5): proven, the pool pauses until then.
    for at, wait in ((0.0, 30.5), (1.0, 29.5)):
        await clock.advance(at - clock.now())
        async with sched.pool("default").slot() as permit:
            permit.rate_limited(wait)
            permit.retried()  # as the client does when it will try again
    await clock.advance(10.0)
    stats = sched.stats.default
    assert (stats.sent, stats.rate_limited, stats.retries) == (2, 2, 2)
    assert stats.paused_seconds == 10.0  # so far, not the whole pause
    await clock.advance(30.0)
    assert sched.stats.default.paused_seconds == 29.5
    assert [(e.kind, e.time, e.value) for e in events] == [
        ("sent", 0.0, 0.0),
        ("rate_limited", 0.0, 30.5),
        ("retried", 0.0, 1.0),
        ("sent", 1.0, 0.0),
        ("rate_limited", 1.0, 29.5),
        ("paused", 1.0, 29.5),  # seconds until the pool resumes
        ("retried", 1.0, 1.0),
    ]
    await sched.aclose()


async def test_stats_are_frozen_snapshots() -> None:
    sched, _ = scheduler()
    stats = sched.stats
    assert (stats.default.configured_rate, stats.expensive.configured_rate) == (15, 2)
    assert stats.max_concurrency == 32
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.default.sent = 3  # type: ignore[misc]
    async with sched.pool("default").slot() as permit:
        permit.retried()
        assert sched.stats.default.in_flight == 1
    assert stats.default.sent == 0
    assert (sched.stats.default.sent, sched.stats.default.retries) == (1, 1)


def test_next_start_in_is_zero_unless_said_otherwise() -> None:
    stats = PoolStats("default", 0, 0, 0, 0.0, 2.0, 2.0, 0, 0)
    assert stats.next_start_in == 0.0
