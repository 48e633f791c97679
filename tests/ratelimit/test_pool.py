"""The pools and their scheduler, through the engine's seam (``Scheduler``, ``Pool``,
``Permit``), in virtual time: who goes first, the caps, what a 429 does, what is told."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable

import pytest

import magisterium_async as m
from magisterium_async import RateLimits
from magisterium_async._ratelimit import Permit, Scheduler
from magisterium_async.testing import VirtualClock

PRO = RateLimits.pro()  # 15 and 2 a minute; the safety margin is 1 s


def scheduler(
    limits: RateLimits = PRO, *, max_concurrency: int = 32, clock: object = None
) -> tuple[Scheduler, VirtualClock, list[m.PoolEvent]]:
    events: list[m.PoolEvent] = []
    vclock = clock if isinstance(clock, VirtualClock) else VirtualClock()
    sched = Scheduler(
        limits, max_concurrency=max_concurrency, clock=clock or vclock, emit=events.append
    )
    return sched, vclock, events


async def starts(sched: Scheduler, n: int, *, pool: str = "default", **kw: str) -> list[float]:
    """``n`` calls through ``pool``, each let through then answered at once: their start
    times."""

    async def one() -> float:
        permit = await sched.pool(pool).acquire(**kw)  # type: ignore[arg-type]
        permit.release()
        return permit.started

    return list(await asyncio.gather(*(one() for _ in range(n))))


def order(sched: Scheduler) -> Callable[..., Awaitable[None]]:
    """A call that records its turn (by name) and holds its slot until released."""
    seen: list[str] = []
    order.seen = seen  # type: ignore[attr-defined]

    async def call(name: str, pool: str = "default", **kw: str) -> None:
        permit = await sched.pool(pool).acquire(**kw)  # type: ignore[arg-type]
        seen.append(name)
        permit.release()

    return call


async def test_a_burst_of_the_quota_goes_at_once_and_the_rest_a_window_later() -> None:
    sched, _clock, _ = scheduler()
    times = await starts(sched, 30)
    assert times == [0.0] * 15 + [61.0] * 15  # never more than 15 in a window (+ margin)


async def test_the_pro_quota_is_never_over_in_any_minute_whatever_the_arrivals() -> None:
    sched, clock, _ = scheduler()

    async def arrive(at: float) -> float:
        await clock.sleep(at)
        return (await starts(sched, 1))[0]

    times = sorted(await asyncio.gather(*(arrive(i * 1.7) for i in range(60))))
    for i, t in enumerate(times):
        assert sum(1 for u in times[i:] if u < t + 60.0) <= 15
    expensive = await starts(sched, 5, pool="expensive")
    assert expensive == [0.0 + expensive[0]] * 2 + [expensive[0] + 61.0] * 2 + [
        expensive[0] + 122.0
    ]


async def test_unmetered_is_none_and_only_the_caps_apply() -> None:
    sched, _, _ = scheduler(max_concurrency=4)
    assert sched.pool(None).name == "unmetered" and sched.pool(None).rate == math.inf
    assert await starts(sched, 100, pool="unmetered") == [0.0] * 100  # type: ignore[arg-type]


async def test_max_concurrency_caps_every_pool_together() -> None:
    sched, clock, _ = scheduler(RateLimits.unlimited(), max_concurrency=2)
    held = [await sched.pool("default").acquire(), await sched.pool("expensive").acquire()]
    third = asyncio.ensure_future(sched.pool(None).acquire())
    await clock.run_until_idle()
    assert not third.done() and sched.in_flight == 2
    held[0].release()
    (await third).release()
    held[1].release()
    assert sched.in_flight == 0


async def test_interactive_calls_go_before_bulk_ones_in_every_pool() -> None:
    sched, clock, _ = scheduler(RateLimits.unlimited(), max_concurrency=1)
    call = order(sched)
    busy = await sched.pool("default").acquire()
    waiting = [
        asyncio.ensure_future(call("bulk-1", priority="bulk")),
        asyncio.ensure_future(call("bulk-2", "expensive", priority="bulk")),
        asyncio.ensure_future(call("person", "expensive")),
    ]
    await clock.run_until_idle()
    busy.release()
    await asyncio.gather(*waiting)
    assert order.seen == ["person", "bulk-1", "bulk-2"]  # type: ignore[attr-defined]


async def test_fairness_keys_take_turns_and_a_newcomer_goes_next() -> None:
    sched, _, _ = scheduler(RateLimits.unlimited(), max_concurrency=1)
    pool = sched.pool("default")
    seen: list[str] = []
    held: asyncio.Queue[Permit] = asyncio.Queue()

    async def call(name: str, key: str) -> None:
        await held.put(await pool.acquire(key=key))
        seen.append(name)

    async def next_turn() -> None:  # the call holding the one slot ends
        (await held.get()).release()

    busy = await pool.acquire()
    waiting = [asyncio.ensure_future(call(f"a{i}", "a")) for i in range(3)]
    waiting += [asyncio.ensure_future(call(f"b{i}", "b")) for i in range(2)]
    await asyncio.sleep(0)
    busy.release()
    await next_turn()  # a0's turn ends
    await next_turn()  # b0's
    # a1 holds the slot now: a newcomer goes ahead of the key that just had its turn.
    waiting.append(asyncio.ensure_future(call("c0", "c")))
    await asyncio.sleep(0)
    for _ in range(4):
        await next_turn()
    await asyncio.gather(*waiting)
    assert seen == ["a0", "b0", "a1", "b1", "c0", "a2"]


async def test_a_cancelled_waiter_leaves_and_a_cancelled_permit_gives_its_start_back() -> None:
    sched, _clock, _ = scheduler(RateLimits(2, 2, period=60.0))
    first = await sched.pool("default").acquire()
    second = await sched.pool("default").acquire()
    third = asyncio.ensure_future(sched.pool("default").acquire())
    await asyncio.sleep(0)
    third.cancel()
    first.release()
    second.release(sent=False)  # cancelled before it sent: it spent nothing
    assert sched.pool("default").waiting == 0
    fourth = await sched.pool("default").acquire()  # the start given back, now
    assert fourth.started == 0.0
    fourth.release()


async def test_closing_fails_every_waiter_and_every_later_call() -> None:
    sched, clock, _ = scheduler(RateLimits(1, 1, period=60.0))
    (await sched.pool("default").acquire()).release()
    waiters = [asyncio.ensure_future(sched.pool("default").acquire()) for _ in range(3)]
    await asyncio.sleep(0)
    await sched.aclose()
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert all(isinstance(r, m.ClientClosedError) for r in results)
    assert len({id(r) for r in results}) == 3  # each its own
    with pytest.raises(m.ClientClosedError):
        await sched.pool("default").acquire()
    assert clock.sleepers == 0  # nothing left running


async def test_a_window_that_ran_out_pauses_and_lowers_and_says_so() -> None:
    sched, clock, events = scheduler(RateLimits(100, 2, period=60.0))
    pool = sched.pool("default")
    permits = [await pool.acquire() for _ in range(16)]
    await clock.advance(0.05)
    waits = [p.rate_limited(59.95) for p in permits[10:]]  # a window of ten: it ran out
    for p in permits[:10]:
        p.release()
    for p in permits[10:]:
        p.release()
    assert waits[-1] == pytest.approx(59.95)
    assert pool.rate == 10 and pool.next_start_in() == 0.0  # nobody waits
    kinds = [e.kind for e in events]
    assert kinds.count("sent") == 16 and kinds.count("rate_limited") == 6
    assert ("rate_changed", 10.0) in [(e.kind, e.value) for e in events]
    paused = [e for e in events if e.kind == "paused"]
    assert paused and paused[0].value == pytest.approx(59.95)
    later = asyncio.ensure_future(pool.acquire())
    await clock.run_until_idle()
    (await later).release()
    assert later.result().started == 61.0  # the ten left the window
    assert "resumed" in [e.kind for e in events]


async def test_a_wait_for_quota_is_told_once_however_many_wait() -> None:
    sched, _clock, events = scheduler(RateLimits(1, 1, period=60.0))
    (await sched.pool("default").acquire()).release()
    waiters = [asyncio.ensure_future(sched.pool("default").acquire()) for _ in range(3)]
    await asyncio.sleep(0)
    told = [e for e in events if e.kind == "waiting"]
    assert len(told) == 1 and told[0].value == pytest.approx(61.0)
    assert sched.pool("default").next_start_in() == pytest.approx(61.0)
    assert sched.pool("default").waiting == 3
    await sched.aclose()
    await asyncio.gather(*waiters, return_exceptions=True)


async def test_the_quota_says_what_is_left_and_reading_it_changes_nothing() -> None:
    sched, clock, _ = scheduler()
    await starts(sched, 5)
    await clock.advance(10.0)
    quota = await sched.quota()
    assert (quota.default.used, quota.default.left) == (5, 10)
    assert (quota.default.limit, quota.default.configured) == (15.0, 15.0)
    assert quota.default.next_start_in == 0.0 and not quota.shared
    assert await sched.quota() == quota
    unlimited, _, _ = scheduler(RateLimits.unlimited())
    assert (await unlimited.quota()).default.unlimited


class LateClock:
    """A busy machine: every timer fires up to half a window late."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock, self.turn = clock, 0

    def now(self) -> float:
        return self.clock.now()

    async def sleep(self, seconds: float) -> None:
        self.turn += 1
        await self.clock.sleep(seconds + (self.turn % 7) * 4.3 if seconds > 0 else seconds)


async def test_late_timers_start_calls_late_never_early() -> None:
    virtual = VirtualClock()
    sched, _, _ = scheduler(clock=LateClock(virtual))
    times = sorted(await starts(sched, 60))
    for i, t in enumerate(times):
        assert sum(1 for u in times[i:] if u < t + 60.0) <= 15


async def test_a_429_returns_the_wait_and_the_pause_whichever_is_longer() -> None:
    sched, _clock, _ = scheduler(RateLimits(10, 2, period=60.0))
    pool = sched.pool("default")
    permits: list[Permit] = [await pool.acquire() for _ in range(10)]
    for p in permits:
        assert p.rate_limited(30.0) == 30.0  # every one refused: the window was spent
        p.release()
    late = await pool.acquire()
    assert late.started == pytest.approx(30.0)
    assert late.rate_limited(1.0) == 1.0
    late.release()
    with pytest.raises(ValueError, match="retry_after"):
        (await pool.acquire()).rate_limited(math.nan)
