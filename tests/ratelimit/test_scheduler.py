"""The scheduler of one client, in virtual time: its pools, the one cap over all of them,
and which waiter the freed slot goes to. (The exact-timestamp tests of the whole engine
are in tests/test_scheduler.py.)"""

from __future__ import annotations

import asyncio

import pytest

from magisterium_async._clock import VirtualClock
from magisterium_async._config import RateLimits
from magisterium_async._ratelimit import Priority, Scheduler

from ..test_scheduler import PRO

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
        async with sched.pool(pool).slot():  # type: ignore[arg-type]
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
        async with sched.pool(pool).slot(priority):  # type: ignore[arg-type]
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
