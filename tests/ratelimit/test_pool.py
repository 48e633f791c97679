"""The pools, in virtual time through the scheduler: the window guarantee, full use, first
come first served, pauses, adaptation, the first round, priorities and fairness; and the
pool's first round and remote-gate admissions alone."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import math
import random
import socket
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import magisterium_async as m
from magisterium_async._clock import VirtualClock
from magisterium_async._config import RateLimits, RetryPolicy
from magisterium_async._errors import ClientClosedError, RateLimitError
from magisterium_async._events import PoolEvent
from magisterium_async._ratelimit import (
    Pool,
    Priority,
    Start,
)
from magisterium_async._ratelimit._scheduler import Admissions, FirstRound
from magisterium_async._ratelimit._tuning import PACE_QUIET_WINDOWS, ROUND_HOLD_ROUND_TRIPS
from tests.helpers.quota import (
    PRO,
    PRO_SCENARIOS,
    Quota,
    Scheduler,
    call_with_retries,
    retried,
    scenario,
    scheduler,
    slot,
)


async def request(
    pool: Pool,
    clock: VirtualClock,
    starts: list[float],
    *,
    at: float = 0.0,
    duration: float = 1.0,
    retry_after: float | None = None,
) -> None:
    """One request: arrives at ``at``, runs ``duration``, and may end in a 429."""
    await clock.sleep(at)
    async with slot(pool) as permit:
        starts.append(clock.now())
        await clock.sleep(duration)
        if retry_after is not None:
            permit.rate_limited(retry_after)


def spawn(
    n: int, pool: Pool, clock: VirtualClock, starts: list[float], **kwargs: float
) -> list[asyncio.Task[None]]:
    return [asyncio.create_task(request(pool, clock, starts, **kwargs)) for _ in range(n)]


def max_in_window(starts: list[float], period: float) -> int:
    """The most starts any closed interval of length ``period`` holds."""
    starts = sorted(starts)
    return max(
        (sum(1 for t in starts[i:] if t <= s + period) for i, s in enumerate(starts)), default=0
    )


# Full use ---------------------------------------------------------------------------------


async def test_a_burst_on_an_idle_pool_starts_at_once() -> None:
    sched, clock = scheduler()
    starts: list[float] = []
    tasks = spawn(16, sched.pool("default"), clock, starts)
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert starts == [0.0] * 15 + [61.0]  # the 16th waits a period plus the 1 s margin


async def test_a_backlog_drains_at_the_full_rate() -> None:
    sched, clock = scheduler()
    starts: list[float] = []
    tasks = spawn(200, sched.pool("default"), clock, starts, duration=3.0)
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    windows = 10
    used = sum(1 for t in starts if t < windows * 60) / (windows * 15)
    assert used >= 0.95, used
    assert max_in_window(starts, 60.0) == 15
    assert sched.stats.default.sent == 200


async def test_the_expensive_pool_runs_one_call_at_a_time_at_its_own_rate() -> None:
    sched, clock = scheduler(dataclasses.replace(PRO, expensive_concurrency=1))
    default: list[float] = []
    expensive: list[float] = []
    tasks = spawn(4, sched.pool("expensive"), clock, expensive, duration=20.0)
    tasks += spawn(15, sched.pool("default"), clock, default)
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert expensive == [0.0, 20.0, 61.0, 81.0]  # one in flight, and 2 per 60 s (+1 s)
    assert default == [0.0] * 15


# The window guarantee, whatever the pattern --------------------------------------------


@dataclass
class Call:
    pool: str
    at: float
    duration: float
    retry_after: float | None
    cancel_at: float | None


@dataclass
class Observed:
    starts: defaultdict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    order: defaultdict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    pauses: defaultdict[str, list[tuple[float, float]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    in_flight: Counter[str] = field(default_factory=Counter)
    peak: Counter[str] = field(default_factory=Counter)


async def play(
    limits: RateLimits, max_concurrency: int, calls: list[Call]
) -> tuple[Observed, Scheduler]:
    seen = Observed()

    def on_event(event: PoolEvent) -> None:
        if event.kind == "paused":
            seen.pauses[event.pool].append((event.time, event.time + event.value))

    sched, clock = scheduler(limits, max_concurrency=max_concurrency, on_event=on_event)
    arrivals: Counter[str] = Counter()

    async def one(call: Call) -> None:
        pool = sched.pool(None if call.pool == "unmetered" else call.pool)  # type: ignore[arg-type]
        await clock.sleep(call.at)
        ticket = arrivals[call.pool]
        arrivals[call.pool] += 1
        async with slot(pool) as permit:
            seen.starts[call.pool].append(clock.now())
            seen.order[call.pool].append(ticket)
            seen.in_flight[call.pool] += 1
            seen.in_flight["all"] += 1
            for key in (call.pool, "all"):
                seen.peak[key] = max(seen.peak[key], seen.in_flight[key])
            try:
                await clock.sleep(call.duration)
                if call.retry_after is not None:
                    permit.rate_limited(call.retry_after)
            finally:
                seen.in_flight[call.pool] -= 1
                seen.in_flight["all"] -= 1

    async def cancel_later(task: asyncio.Task[None], at: float) -> None:
        await clock.sleep(at)
        task.cancel()

    tasks = [asyncio.create_task(one(call)) for call in calls]
    cancellers = [
        asyncio.create_task(cancel_later(task, call.cancel_at))
        for task, call in zip(tasks, calls, strict=True)
        if call.cancel_at is not None
    ]
    await clock.run_until_idle()
    results = await asyncio.gather(*tasks, *cancellers, return_exceptions=True)
    assert all(r is None or isinstance(r, asyncio.CancelledError) for r in results), results
    await sched.aclose()
    return seen, sched


calls_strategy = st.lists(
    st.builds(
        Call,
        pool=st.sampled_from(["default", "default", "expensive", "unmetered"]),
        at=st.floats(0, 3),
        duration=st.floats(0, 1.5),
        retry_after=st.one_of(st.none(), st.none(), st.none(), st.floats(0, 1.5)),
        cancel_at=st.one_of(st.none(), st.none(), st.floats(0, 4)),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    calls=calls_strategy,
    default=st.integers(1, 6),
    expensive=st.integers(1, 3),
    period=st.sampled_from([1.0, 60.0]),
    default_concurrency=st.one_of(st.none(), st.integers(1, 4)),
    expensive_concurrency=st.one_of(st.none(), st.integers(1, 2)),
    adaptive=st.booleans(),
    max_concurrency=st.integers(1, 8),
)
def test_no_period_ever_holds_more_than_the_limit(
    calls: list[Call],
    default: int,
    expensive: int,
    period: float,
    default_concurrency: int | None,
    expensive_concurrency: int | None,
    adaptive: bool,
    max_concurrency: int,
) -> None:
    """Times in ``calls`` are in periods; durations, pauses and cancellations all mixed."""
    calls = [
        dataclasses.replace(
            c,
            at=c.at * period,
            duration=c.duration * period,
            retry_after=None if c.retry_after is None else c.retry_after * period,
            cancel_at=None if c.cancel_at is None else c.cancel_at * period,
        )
        for c in calls
    ]
    limits = RateLimits(
        default,
        expensive,
        period=period,
        default_concurrency=default_concurrency,
        expensive_concurrency=expensive_concurrency,
        adaptive=adaptive,
    )
    seen, sched = asyncio.run(play(limits, max_concurrency, calls))

    for name, limit, cap in [
        ("default", default, default_concurrency),
        ("expensive", expensive, expensive_concurrency),
    ]:
        starts = sorted(seen.starts[name])
        # Every window: the (i+N)-th start lies more than a period after the i-th.
        assert all(starts[i + limit] - starts[i] > period for i in range(len(starts) - limit))
        assert cap is None or seen.peak[name] <= cap
    for name in seen.starts:
        assert seen.order[name] == sorted(seen.order[name]), "first come, first served"
        for begin, end in seen.pauses[name]:
            assert not any(begin < t < end for t in seen.starts[name]), "started while paused"
    assert seen.peak["all"] <= max_concurrency
    stats = sched.stats
    for pool_stats in (stats.default, stats.expensive, stats.unmetered):
        assert pool_stats.sent == len(seen.starts[pool_stats.name])
        assert pool_stats.in_flight == pool_stats.waiting == 0
    assert stats.in_flight == 0


# Fairness and cancellation ---------------------------------------------------------------


async def test_first_come_first_served_within_a_pool() -> None:
    sched, clock = scheduler(RateLimits(1, 1, period=10.0))
    order: list[int] = []

    async def numbered(i: int) -> None:
        async with slot(sched.pool("default")):
            order.append(i)

    tasks = [asyncio.create_task(numbered(i)) for i in range(6)]
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert order == list(range(6))
    assert clock.now() == pytest.approx(5 * 10.2)


async def test_a_call_arriving_as_the_pool_frees_goes_after_those_already_waiting() -> None:
    sched, clock = scheduler(RateLimits(1, 1, period=10.0))
    order: list[int] = []

    async def numbered(i: int, at: float = 0.0) -> None:
        await clock.sleep(at)
        async with slot(sched.pool("default")):
            order.append(i)

    # Its sleep is set before the pool's wake-up: it is the first to run at t=10.2.
    late = asyncio.create_task(numbered(99, at=10.2))
    tasks = [asyncio.create_task(numbered(i)) for i in range(3)]
    await clock.run_until_idle()
    await asyncio.gather(late, *tasks)
    assert order == [0, 1, 2, 99]


async def test_a_cancelled_waiter_gives_its_place_back() -> None:
    sched, clock = scheduler()
    pool = sched.pool("default")
    starts: list[float] = []
    first = spawn(15, pool, clock, starts, duration=0.0)
    head = asyncio.create_task(request(pool, clock, starts))  # waits for t=61
    middle = asyncio.create_task(request(pool, clock, starts))
    last = asyncio.create_task(request(pool, clock, starts))
    await clock.advance(30)
    assert sched.stats.default.waiting == 3
    middle.cancel()
    head.cancel()
    await clock.run_until_idle()
    await asyncio.gather(last, *first)
    assert head.cancelled() and middle.cancelled()
    assert starts[15:] == [61.0]  # the last one takes the head's place and time
    assert sched.stats.default.waiting == 0


async def test_when_the_last_waiter_leaves_nothing_is_left_asleep() -> None:
    sched, clock = scheduler()
    starts: list[float] = []
    done = spawn(15, sched.pool("default"), clock, starts, duration=0.0)
    late = asyncio.create_task(request(sched.pool("default"), clock, starts))
    await clock.advance(1)
    assert clock.sleepers == 1  # the scheduler's one timer, for t=61
    late.cancel()
    await clock.advance(0)
    assert clock.sleepers == 0
    await asyncio.gather(*done)
    with pytest.raises(asyncio.CancelledError):
        await late


async def test_a_permit_granted_to_a_cancelled_waiter_is_given_back() -> None:
    sched, clock = scheduler(RateLimits(1, 1, period=60.0, expensive_concurrency=1))
    pool = sched.pool("expensive")
    holder = slot(pool)
    await holder.__aenter__()
    starts: list[float] = []
    first = asyncio.create_task(request(pool, clock, starts))
    second = asyncio.create_task(request(pool, clock, starts))
    await clock.advance(61)  # the rate would let `first` through; the concurrency cap does not
    await holder.__aexit__(None, None, None)  # lets `first` through, synchronously...
    first.cancel()  # ...but it is cancelled before it runs
    await clock.run_until_idle()
    await second
    assert first.cancelled()
    assert starts == [61.0]  # `second` got the permit at once: nothing leaked
    stats = sched.stats.expensive
    assert (stats.sent, stats.in_flight, stats.waiting) == (2, 0, 0)


async def test_max_concurrency_is_shared_first_come_first_served() -> None:
    sched, clock = scheduler(RateLimits.unlimited(), max_concurrency=2)
    order: list[str] = []

    async def call(name: str, pool: Pool) -> None:
        async with slot(pool):
            order.append(name)
            await clock.sleep(1)

    specs = [
        ("d1", "default"),
        ("d2", "default"),
        ("e1", "expensive"),
        ("d3", "default"),
        ("u1", None),
        ("e2", "expensive"),
    ]
    tasks = [asyncio.create_task(call(name, sched.pool(pool))) for name, pool in specs]  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert sched.stats.in_flight == 2
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert order == ["d1", "d2", "e1", "d3", "u1", "e2"]
    assert clock.now() == 3.0


async def test_a_pool_waiting_for_its_rate_holds_no_shared_slot() -> None:
    sched, clock = scheduler(PRO, max_concurrency=1)
    starts: list[float] = []
    unmetered: list[float] = []
    tasks = spawn(3, sched.pool("expensive"), clock, starts, duration=0.0)  # the 3rd: t=61
    tasks += spawn(3, sched.pool(None), clock, unmetered, at=5.0)
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert unmetered == [5.0, 6.0, 7.0]
    assert starts == [0.0, 0.0, 61.0]


# 429s: evidence, proof, pauses ------------------------------------------------------------


async def test_two_429s_pointing_at_one_window_end_pause_the_whole_pool_and_only_it() -> None:
    events: list[PoolEvent] = []
    limits = dataclasses.replace(PRO, adaptive=False, expensive_concurrency=1)
    sched, clock = scheduler(limits, on_event=events.append)
    pool = sched.pool("default")
    default: list[float] = []
    expensive: list[float] = []
    # A 429 at t=1 says the window ends at 31.5: only a suspect. The next request goes alone
    # (a probe); its 429 at t=3 points at 31.5 too: proof, the whole pool waits for 31.5.
    tasks = [asyncio.create_task(request(pool, clock, default, retry_after=30.5))]
    tasks.append(asyncio.create_task(request(pool, clock, default, at=2.0, retry_after=28.5)))
    tasks += spawn(2, pool, clock, default, at=2.0)
    tasks += spawn(2, sched.pool("expensive"), clock, expensive, at=5.0)
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert default == [0.0, 2.0, 31.5, 31.5]
    assert expensive == [5.0, 6.0]
    stats = sched.stats.default
    assert (stats.rate_limited, stats.paused_seconds, stats.current_rate) == (2, 28.5, 15.0)
    assert sched.stats.expensive.paused_seconds == 0.0
    kinds = [(e.kind, e.time, e.value) for e in events if e.pool == "default" and e.kind != "sent"]
    assert kinds == [
        ("rate_limited", 1.0, 30.5),
        ("waiting", 2.0, 29.5),  # the suspect's check is out: the next start waits
        ("rate_limited", 3.0, 28.5),
        ("paused", 3.0, 28.5),
        ("resumed", 31.5, 28.5),
    ]


async def test_whole_second_waits_take_three_429s_in_a_row() -> None:
    """The service rounds ``retryAfter`` up to whole seconds: two can agree by chance."""
    sched, clock = scheduler(dataclasses.replace(PRO, adaptive=False))
    pool = sched.pool("default")
    starts: list[float] = []
    tasks = [asyncio.create_task(request(pool, clock, starts, retry_after=30.0))]
    tasks.append(asyncio.create_task(request(pool, clock, starts, at=2.0, retry_after=28.0)))
    tasks.append(asyncio.create_task(request(pool, clock, starts, at=2.0, retry_after=27.0)))
    tasks += spawn(2, pool, clock, starts, at=2.0)
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    # Probes at 2 and 3 both point at t=31 (give or take the rounding): paused at t=4.
    assert starts == [0.0, 2.0, 3.0, 31.0, 31.0]
    assert sched.stats.default.paused_seconds == 27.0


async def test_an_isolated_429_sends_one_probe_alone_and_nothing_else_changes() -> None:
    """Random 429s with a fixed retryAfter point at a window end that moves with the clock."""
    events: list[PoolEvent] = []
    sched, clock = scheduler(RateLimits(100, 1, period=1.0), on_event=events.append)
    pool = sched.pool("default")
    starts: list[float] = []
    tasks = [asyncio.create_task(request(pool, clock, starts, duration=0.1, retry_after=0.2))]
    tasks.append(
        asyncio.create_task(request(pool, clock, starts, at=0.05, duration=0.1, retry_after=0.2))
    )
    tasks += spawn(3, pool, clock, starts, at=0.15, duration=0.1)
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    # 0.1: a 429 (window "ends" at 0.3); 0.15: another, "ending" at 0.35: no proof. The
    # first of the three waiting goes alone at 0.15 (once the first round is answered), gets
    # through at 0.25, the rest follow.
    assert starts == pytest.approx([0.0, 0.05, 0.15, 0.25, 0.25])
    stats = sched.stats.default
    assert (stats.rate_limited, stats.paused_seconds, stats.current_rate) == (2, 0.0, 100.0)
    assert not [e for e in events if e.kind in ("paused", "rate_changed")]


async def test_a_probe_that_hangs_holds_the_others_back_only_to_the_window_end() -> None:
    sched, clock = scheduler(RateLimits(100, 1, period=1.0))
    pool = sched.pool("default")
    starts: list[float] = []
    tasks = [asyncio.create_task(request(pool, clock, starts, duration=0.1, retry_after=0.5))]
    tasks.append(asyncio.create_task(request(pool, clock, starts, at=0.2, duration=30.0)))
    tasks += spawn(2, pool, clock, starts, at=0.3)
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert starts == [0.0, 0.2, 0.6, 0.6]  # the suspect's window ended at 0.6


async def test_after_a_pause_the_pool_resumes_paced() -> None:
    sched, clock = scheduler(RateLimits(5, 1, period=10.0, adaptive=False))
    starts: list[float] = []
    pool = sched.pool("default")
    tasks = [asyncio.create_task(request(pool, clock, starts, retry_after=3.9))]
    tasks += [asyncio.create_task(request(pool, clock, starts, at=0.5, retry_after=3.4))]
    tasks += spawn(30, pool, clock, starts, at=0.5)
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    # 5 start by 0.5; the 429s at t=1 and t=1.5 both point at t=4.9: a pause to 4.9, but
    # the log still holds those 5 starts, so the next ones wait for t=10.2, not the pause.
    assert starts[:5] == [0.0, 0.5, 0.5, 0.5, 0.5]
    assert starts[5] == pytest.approx(10.2)
    assert max_in_window(starts, 10.0) == 5
    assert sched.stats.default.paused_seconds == pytest.approx(3.4)


async def test_paused_seconds_counts_only_what_has_passed() -> None:
    sched, clock = scheduler()
    pool = sched.pool("default")
    async with slot(pool) as permit:
        permit.rate_limited(20.5)  # a suspect: the window ends at 20.5
    async with slot(pool) as permit:  # the probe
        await clock.advance(4)
        permit.rate_limited(16.5)  # the window ends at 20.5 again: proof, paused 16.5 s
        permit.rate_limited(5.0)  # within the pause: changes nothing
    await clock.advance(8)
    assert sched.stats.default.paused_seconds == 8.0
    await clock.advance(100)
    assert sched.stats.default.paused_seconds == 16.5


async def test_a_nonsense_retry_after_is_refused() -> None:
    sched, _ = scheduler()
    async with slot(sched.pool("default")) as permit:
        for bad in (-1.0, math.nan, math.inf):
            with pytest.raises(ValueError, match="retry_after"):
                permit.rate_limited(bad)


# Adaptive rate ------------------------------------------------------------------------------


async def test_a_proven_429_lowers_the_rate_to_what_the_server_took_in_its_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="magisterium_async")
    events: list[PoolEvent] = []
    sched, clock = scheduler(RateLimits(10, 1, period=10.0), on_event=events.append)
    pool = sched.pool("default")
    starts: list[float] = []
    server = FixedWindowServer(6, 10.0)  # allows 6 per [10k, 10k+10): the client thinks 10

    async def call(at: float, index: int) -> None:
        await clock.sleep(at)
        while True:
            async with slot(pool) as permit:
                starts.append(clock.now())
                await clock.sleep(0.5 + 0.01 * index)  # the server answers one at a time
                retry_after = server.answer(clock.now())
                if retry_after is None:
                    return
                permit.rate_limited(retry_after)
            await clock.sleep(retry_after)

    tasks = [asyncio.create_task(call(0.0, i)) for i in range(10)]
    tasks += [asyncio.create_task(call(0.5, i % 10)) for i in range(60)]
    await clock.advance(1)
    assert sched.stats.default.current_rate == 6  # the 6 the server took, not 10 - 1
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    changes = [(e.time, e.value) for e in events if e.kind == "rate_changed"]
    # Down to 6 at the second 429 (both point at t=10). One more than the server took is
    # tried after 10 of its starts (2 windows of 6), as the server's window that the 10th
    # falls in opens; its 429 sends the rate back to 6, and the next try waits twice as
    # long: 4 windows after that 429, from the start of the server's window then.
    assert [value for _, value in changes[:4]] == [6, 7, 6, 7]
    assert changes[0][0] == pytest.approx(0.57)
    assert changes[1][0] == pytest.approx(20.0)
    assert 20 < changes[2][0] < 30
    assert changes[3][0] == pytest.approx(math.floor((changes[2][0] + 40) / 10) * 10)
    assert max_in_window(starts, 10.0) <= 10
    # While lowered, the starts the server took are spread evenly: 6 per 10.2 s.
    lowered = [t for t in starts if 10 <= t < 20]
    assert lowered[0] == pytest.approx(10.2)  # 6 in any 10.2 s, the first 6 at t=0
    assert all(b - a == pytest.approx(1.7) for a, b in itertools.pairwise(lowered))
    messages = [r.getMessage() for r in caplog.records]
    assert "pool default rate 10 -> 6 per 10 s (rate limited by the server)" in messages
    assert "pool default rate 6 -> 7 per 10 s (stepping up)" in messages


async def test_without_adaptive_the_rate_stays() -> None:
    sched, clock = scheduler(RateLimits(10, 1, period=10.0, adaptive=False))
    tasks = spawn(10, sched.pool("default"), clock, [], retry_after=1.0)
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert sched.stats.default.current_rate == 10
    assert sched.stats.default.rate_limited == 10


class FixedWindowServer:
    """A quota counted per fixed window: ``limit`` accepted requests per ``[k*p, (k+1)*p)``."""

    def __init__(self, limit: int, period: float) -> None:
        self.limit, self.period = limit, period
        self.window, self.count = -1, 0

    def answer(self, t: float) -> float | None:
        """``None`` if accepted, else the ``retryAfter``."""
        window = math.floor(t / self.period)
        if window != self.window:
            self.window, self.count = window, 0
        if self.count < self.limit:
            self.count += 1
            return None
        return (window + 1) * self.period - t


class SlidingWindowServer:
    """A quota counted over the last ``period``: at most ``limit`` accepted requests."""

    def __init__(self, limit: int, period: float) -> None:
        self.limit, self.period = limit, period
        self.accepted: deque[float] = deque()

    def answer(self, t: float) -> float | None:
        """``None`` if accepted, else the ``retryAfter``."""
        while self.accepted and self.accepted[0] <= t - self.period:
            self.accepted.popleft()
        if len(self.accepted) < self.limit:
            self.accepted.append(t)
            return None
        return self.accepted[0] + self.period - t


Server = FixedWindowServer | SlidingWindowServer


@dataclass
class Run:
    accepted: list[float] = field(default_factory=list)
    limited: list[float] = field(default_factory=list)

    def steady(self, start: int, end: int, allowance: int) -> tuple[float, int, float]:
        """In [start, end): the share of the server's allowance used, and the most and the
        mean number of 429s in one second (one window)."""
        accepted = sum(1 for t in self.accepted if start <= t < end)
        per_second = Counter(math.floor(t) for t in self.limited if start <= t < end)
        seconds = end - start
        return (
            accepted / (allowance * seconds),
            max(per_second.values(), default=0),
            sum(per_second.values()) / seconds,
        )


async def against(
    server: Server, seconds: float, seed: int, limit_at: Callable[[float], int] | None = None
) -> tuple[Run, Scheduler]:
    """32 workers with an endless backlog, configured for 1000/s, against ``server``.

    One-way network delay is 5-15 ms: its jitter stays within the 20 ms safety margin.
    """
    sched, clock = scheduler(RateLimits(1000, 1000, period=1.0))
    pool = sched.pool("default")
    rng = random.Random(seed)
    run = Run()

    async def worker() -> None:
        while clock.now() < seconds:
            async with slot(pool) as permit:
                await clock.sleep(rng.uniform(0.005, 0.015))  # there
                if limit_at is not None:
                    server.limit = limit_at(clock.now())
                retry_after = server.answer(clock.now())
                (run.accepted if retry_after is None else run.limited).append(clock.now())
                await clock.sleep(rng.uniform(0.005, 0.015))  # and back
                if retry_after is not None:
                    permit.rate_limited(retry_after)
                    retried(sched, "default")
            if retry_after is not None:
                await clock.sleep(max(retry_after, 0.25))  # as the retry loop does

    workers = [asyncio.create_task(worker()) for _ in range(32)]
    await clock.run_until_idle()
    await asyncio.gather(*workers)
    return run, sched


@pytest.mark.parametrize("server", [FixedWindowServer, SlidingWindowServer])
@pytest.mark.parametrize("seed", [1, 2])
async def test_adapts_to_a_server_allowing_far_less_than_configured(
    server: Callable[[int, float], Server], seed: int
) -> None:
    """Steady state against 10/s when configured for 1000/s: 0.98 of it used."""
    run, sched = await against(server(10, 1.0), seconds=120.0, seed=seed)
    used, worst, mean = run.steady(10, 120, allowance=10)
    assert used >= 0.96
    assert worst <= 1
    assert mean <= 0.9  # a probe one above refused after 10 successes: < 0.1 per success
    assert sched.stats.default.current_rate in (10, 11)


@pytest.mark.parametrize("server", [FixedWindowServer, SlidingWindowServer])
async def test_follows_a_quota_shared_for_a_while(server: Callable[[int, float], Server]) -> None:
    """Someone else spends half the quota from t=30 to t=90: down to 5/s, then back to 10/s."""
    run, _ = await against(
        server(10, 1.0), seconds=150.0, seed=7, limit_at=lambda t: 5 if 30 <= t < 90 else 10
    )
    used, worst, _ = run.steady(35, 90, allowance=5)
    assert used >= 0.9
    assert worst <= 1
    used, worst, _ = run.steady(110, 150, allowance=10)  # back from 5 to 10 within 20 s
    assert used >= 0.93
    assert worst <= 1


async def test_the_first_burst_is_not_refilled_before_its_429s_come_back() -> None:
    """Told 1000/s, the server takes 10/s: of 16 sent at once 6 are refused. The slots the
    10 successes free are refilled only once those 429s are in (they prove the window ran
    out); refilled at once, each refill would be one more 429."""
    sched, clock = scheduler(RateLimits(1000, 1000, period=1.0), max_concurrency=16)
    server = FixedWindowServer(10, 1.0)
    refused: list[float] = []
    rng = random.Random(1)

    async def attempt(token: str | None = None) -> None:
        await clock.sleep(rng.uniform(0.004, 0.006))
        retry_after = server.answer(clock.now())
        await clock.sleep(0.005 if retry_after is None else 0.008)  # the 429s come back last
        if retry_after is not None:
            refused.append(clock.now())
            raise RateLimitError("Rate limit exceeded", data={"retryAfter": retry_after})

    calls = [
        call_with_retries(
            attempt, pool=sched.pool("default"), policy=RetryPolicy(), clock=clock, what="x"
        )
        for _ in range(40)
    ]
    tasks = [asyncio.create_task(call) for call in calls]
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert sum(1 for t in refused if t < 1.0) == 6
    assert sched.stats.default.sent == 40 + len(refused)


async def test_a_slow_request_holds_the_first_round_back_three_round_trips_at_most() -> None:
    sched, clock = scheduler(RateLimits(100, 100, period=1.0))
    pool = sched.pool("default")
    starts: list[float] = []
    slow = asyncio.create_task(request(pool, clock, starts, duration=60.0))
    fast = asyncio.create_task(request(pool, clock, starts, at=10.0, duration=0.1))
    late = spawn(2, pool, clock, starts, at=10.2)  # after the first answer, at 10.1
    await clock.run_until_idle()
    await asyncio.gather(slow, fast, *late)
    # 10.1 + 3 x the 0.1 s round trip of the request that answered (not the slow one's age)
    assert starts == pytest.approx([0.0, 10.0, 10.4, 10.4])
    assert clock.now() == pytest.approx(60.0)


async def test_a_first_round_that_waits_for_its_rate_is_woken_by_time() -> None:
    """Before any answer nothing holds the round: the 16th of a burst at 15 a minute starts
    when the window lets it (61 s), however long the first 15 take."""
    sched, clock = scheduler()
    starts: list[float] = []
    tasks = spawn(16, sched.pool("default"), clock, starts, duration=100.0)
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert starts == [0.0] * 15 + [61.0]


class HeldGate:
    """A remote gate whose leave comes only when the test gives it."""

    def __init__(self) -> None:
        self.leave = asyncio.Event()
        self.asked: list[tuple[str, int]] = []
        self.outcomes: list[str | None] = []

    async def admit(self, line: Callable[[], tuple[Priority, int, bool]]) -> str:
        self.asked.append(line())
        await self.leave.wait()
        self.leave.clear()
        return f"ticket-{len(self.asked)}"

    def answered(self, start: Start) -> None:
        self.outcomes.append(start.ticket)

    def give_back(self, ticket: str) -> None:
        self.outcomes.append(f"unused {ticket}")


async def test_a_call_waiting_for_the_remote_gate_holds_no_slot_and_gives_its_turn_on() -> None:
    clock = VirtualClock()
    gate = HeldGate()
    sched = Scheduler(
        RateLimits(10, 1, period=1.0), max_concurrency=1, clock=clock, gates={"default": gate}
    )

    async def call(priority: Priority = "interactive") -> None:
        async with slot(sched.pool("default"), priority):
            pass

    first = asyncio.create_task(call("bulk"))
    await clock.advance(1)
    # Waiting for the gate holds no slot: an unmetered call goes by.
    assert sched.stats.in_flight == 0 and sched.stats.default.waiting == 1
    async with slot(sched.pool(None)):
        pass
    assert gate.asked == [("bulk", 1, False)]
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    second = asyncio.create_task(call())
    await clock.advance(1)
    gate.leave.set()
    await second
    # The admission asked for the cancelled call went to whoever was first when it came.
    assert gate.outcomes == ["ticket-1"]
    assert sched.stats.in_flight == 0 and sched.stats.default.sent == 1
    await sched.aclose()


@pytest.mark.parametrize(
    "error",
    [
        m.CredentialsError("TLS: the certificate was refused", path="rediss://***"),
        RuntimeError("the token= callable's vault is down"),
    ],
    ids=["a MagisteriumError", "the application's"],
)
async def test_an_error_of_the_remote_gate_reaches_every_waiting_call(error: Exception) -> None:
    """A remote gate that raises (a TLS certificate refused; a token= callable, asked whose
    quota it is, failing) fails each waiting call with that error, each its own copy;
    nobody is left waiting, and a later call asks the gate again."""
    clock = VirtualClock()
    asks = 0

    class RaisingGate(HeldGate):
        async def admit(self, line: Callable[[], tuple[Priority, int, bool]]) -> str:
            nonlocal asks
            asks += 1
            raise error

    sched = Scheduler(
        RateLimits(10, 1, period=1.0), max_concurrency=4, clock=clock,
        gates={"default": RaisingGate()},
    )  # fmt: skip

    async def call() -> None:
        async with slot(sched.pool("default")):
            pass

    results = await asyncio.gather(*(call() for _ in range(3)), return_exceptions=True)
    assert [type(r) for r in results] == [type(error)] * 3, results
    assert len({id(r) for r in results}) == 3
    assert {str(r) for r in results} == {str(error)}
    assert {getattr(r, "path", None) for r in results} == {getattr(error, "path", None)}
    with pytest.raises(type(error)):
        await call()
    assert asks == 2
    assert sched.stats.in_flight == 0 and sched.stats.default.waiting == 0
    await sched.aclose()


# Lifecycle, observability, the hot path ------------------------------------------------


async def test_aclose_wakes_every_waiter_and_leaves_nothing_running() -> None:
    sched, clock = scheduler()
    starts: list[float] = []
    running = spawn(15, sched.pool("default"), clock, starts, duration=100.0)
    waiting = spawn(3, sched.pool("default"), clock, starts)
    await clock.advance(10)
    assert sched.stats.default.waiting == 3
    await sched.aclose()
    assert clock.sleepers == 15  # only the requests in flight sleep: no timer left
    for task in waiting:
        with pytest.raises(ClientClosedError, match="closed while this call waited"):
            await task
    with pytest.raises(ClientClosedError):
        async with slot(sched.pool(None)):
            pass
    await clock.run_until_idle()
    await asyncio.gather(*running)  # in flight when closed: they finish, and free their slots
    assert sched.stats.in_flight == 0
    await sched.aclose()


async def test_a_failing_event_callback_is_logged_and_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(event: PoolEvent) -> None:
        raise RuntimeError("metrics backend down")

    sched, clock = scheduler(on_event=broken)
    starts: list[float] = []
    tasks = spawn(16, sched.pool("default"), clock, starts, retry_after=1.0)
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert len(starts) == 16
    said = "on_event callback failed on sent event (RuntimeError: metrics backend down); ignored"
    assert said in caplog.messages


async def test_unlimited_pools_let_everything_through_at_once() -> None:
    sched, clock = scheduler(RateLimits.unlimited(), max_concurrency=100)
    starts: list[float] = []
    tasks = spawn(100, sched.pool("expensive"), clock, starts)
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert starts == [0.0] * 100
    stats = sched.stats.expensive
    assert (stats.current_rate, stats.configured_rate, stats.sent) == (math.inf, math.inf, 100)
    assert sched.pool("expensive")._limiter is None  # no limiter work at all


async def test_a_limit_below_one_per_period_spreads_over_longer_windows() -> None:
    sched, clock = scheduler(RateLimits(15, 0.5, period=60.0))
    starts: list[float] = []
    tasks = spawn(3, sched.pool("expensive"), clock, starts, duration=0.0)
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert starts == [0.0, 121.0, 242.0]  # 1 per 120 s, plus the margin
    assert sched.stats.expensive.current_rate == 0.5


async def test_the_default_clock_is_the_loop() -> None:
    sched = Scheduler(
        RateLimits(2, 1, period=0.02, adaptive=False), max_concurrency=4, safety_margin=0.0
    )
    loop = asyncio.get_running_loop()
    starts: list[float] = []

    async def call() -> None:
        async with slot(sched.pool("default")):
            starts.append(loop.time())

    await asyncio.gather(*(call() for _ in range(3)))
    assert starts[2] - starts[0] >= 0.02 - 1e-3
    await sched.aclose()


# The issue's scenarios at the Pro plan's quota, in virtual time ----------------------------


@pytest.mark.parametrize("name", list(PRO_SCENARIOS))
async def test_the_issues_scenarios_hold_at_the_pro_quota(name: str) -> None:
    """Whole seconds in ``retryAfter`` (as the service sends), 15 a minute, an hour or so."""
    told, quota, requests, most_429s, most_wall = PRO_SCENARIOS[name]
    wall, sched = await scenario(quota, told, requests)
    assert quota.accepted == requests
    assert quota.refused / quota.accepted <= most_429s
    assert wall <= most_wall * quota.ideal(requests), (wall, quota.ideal(requests))
    assert sched.stats.default.rate_limited == quota.refused


async def test_catholic_qa_at_two_a_minute_when_the_server_allows_one() -> None:
    quota = Quota(((0, 1),), 60.0)
    wall, sched = await scenario(quota, 2, 20, pool="expensive")
    assert quota.accepted == 20
    assert quota.refused / quota.accepted <= 0.10
    assert wall <= 1.10 * quota.ideal(20)
    assert sched.stats.expensive.current_rate in (1, 2)


# A quota another process had spent -------------------------------------------------------


async def after_a_spent_window(
    limits: RateLimits,
    pool: str,
    period: float,
    limit: int,
    windows: int,
    *,
    spent: int | None = None,
    arrive: float = 0.5,
) -> tuple[list[float], list[float], Quota]:
    """Another process spent ``spent`` of the server's first window (all ``limit`` of it
    unless told); this one, told the same quota, arrives at ``arrive`` and calls one after
    another until ``windows`` windows are over. Its starts (refused ones too), the starts
    the server took, and the server."""
    clock = VirtualClock()
    quota = Quota(((0, limit),), period)
    quota.window, quota.count = 0, limit if spent is None else spent  # the other's calls
    sched = Scheduler(limits, max_concurrency=16, clock=clock)
    rng = random.Random(1)
    starts: list[float] = []
    accepted: list[float] = []

    async def attempt(token: str | None = None) -> None:
        at = clock.now()
        starts.append(at)
        await quota.attempt(clock, rng)
        accepted.append(at)

    async def one_after_another() -> None:
        await clock.sleep(arrive)
        while clock.now() < windows * period:
            await call_with_retries(
                attempt,
                pool=sched.pool(pool),  # type: ignore[arg-type]
                policy=RetryPolicy(),
                clock=clock,
                what="x",
            )

    task = asyncio.create_task(one_after_another())
    await clock.run_until_idle()
    await task
    await sched.aclose()
    return starts, accepted, quota


def per_window(times: list[float], period: float, windows: int) -> list[int]:
    counts = Counter(math.floor(t / period) for t in times)
    return [counts[w] for w in range(windows)]


async def test_a_window_another_process_spent_leaves_the_rate_at_what_was_told() -> None:
    """15 per 4 s (the Pro quota's shape), the first window spent by another process: its
    429 says the quota is busy now, not that it allows 1; from the third window (the 429's
    wait over) every window holds at least 12 of the 15."""
    starts, accepted, quota = await after_a_spent_window(
        RateLimits(15, 2, period=4.0), "default", 4.0, 15, windows=12
    )
    assert all(n >= 12 for n in per_window(accepted, 4.0, 12)[2:]), per_window(accepted, 4.0, 12)
    assert quota.refused <= 2
    assert max_in_window(starts, 4.0) <= 15


@pytest.mark.parametrize(("pool", "limit"), [("default", 15), ("expensive", 2)])
async def test_at_the_pro_quota_a_minute_another_process_spent_costs_that_minute_alone(
    pool: str, limit: int
) -> None:
    """The Pro quota (15 a minute, 2 for catholic_qa), the first minute spent by another
    process: back to the whole quota by the third minute, never over it in any 60 s."""
    starts, accepted, quota = await after_a_spent_window(PRO, pool, 60.0, limit, windows=8)
    assert per_window(accepted, 60.0, 8)[2:] == [limit] * 6
    assert quota.refused <= 2
    assert max_in_window(starts, 60.0) <= limit


async def test_at_the_pro_quota_a_minute_another_process_spent_part_of_is_not_learned() -> None:
    """The Pro quota, 10 of the first minute's 15 spent by another process before this one
    arrives (20 s in): the 5 left and a 429 say the quota is busy now, not that it is 5;
    back to 15 a minute by the third minute, 2 429s at most in all."""
    starts, accepted, quota = await after_a_spent_window(
        PRO, "default", 60.0, 15, windows=8, spent=10, arrive=20.0
    )
    assert per_window(accepted, 60.0, 8)[2:] == [15] * 6, per_window(accepted, 60.0, 8)
    assert quota.refused <= 2
    assert max_in_window(starts, 60.0) <= 15


# Priorities and fairness ---------------------------------------------------------------

QUOTA_INTERVAL = PRO.period / 15  # 4 s between starts at the full rate


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
        async with slot(pool, priority, key):
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
    sched, clock = scheduler(max_concurrency=64)
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
    """Interactive calls cut in, and bulk is paced once they come (and, alone, once its
    run lasted four windows): every span of the quota still holds its 15 starts, and the
    job ends at most one window later than bursting each window would (its last window's
    starts spread instead of sent at once)."""

    async def run(people: int) -> list[float]:
        sched, clock = scheduler(max_concurrency=64)
        pool = sched.pool("default")
        seen = Starts(clock)
        tasks = seen.spawn(110 - people, pool, "bulk", "bulk")
        for i in range(people):
            tasks += seen.spawn(1, pool, "person", "interactive", at=5.0 + 20.0 * i)
        await finish(clock, sched, tasks)
        return sorted(t for _, t in seen.seen)

    span = PRO.period + PRO.margin
    alone, mixed = await run(0), await run(10)
    windows = [sum(1 for t in mixed if j * span <= t < (j + 1) * span) for j in range(7)]
    assert windows == [15] * 7  # nothing of the quota lost while paced
    assert max_in_window(mixed, PRO.period) == 15
    bursts = (110 // 15) * span  # when the last window's burst would start
    assert bursts < max(alone) <= max(mixed) <= bursts + PRO.period


async def test_once_an_interactive_call_came_the_next_ones_wait_one_quota_interval() -> None:
    """A bulk job keeps the quota busy; a person asks every 47 s. The first waits for the
    window the job's burst filled; from then bulk starts are paced, one every quota
    interval (4 s), and every later call starts within one interval of arriving."""
    sched, clock = scheduler(max_concurrency=64)
    pool = sched.pool("default")
    seen = Starts(clock)
    tasks = seen.spawn(300, pool, "bulk", "bulk")
    arrivals = [10.0 + 47.0 * i for i in range(12)]
    for i, at in enumerate(arrivals):
        tasks += seen.spawn(1, pool, f"person {i}", "interactive", at=at)
    await clock.advance(arrivals[-1] + 10.0)
    waits = [seen.times(f"person {i}")[0] - at for i, at in enumerate(arrivals)]
    assert waits[0] == 51.0  # to 61 s, when the first window's burst leaves the span
    assert max(waits[1:]) <= QUOTA_INTERVAL + PRO.margin, waits
    bulk = [t for t in seen.times("bulk") if 61.0 <= t <= arrivals[-1]]
    assert all(b - a >= QUOTA_INTERVAL - 1e-9 for a, b in itertools.pairwise(bulk))
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await sched.aclose()


@pytest.mark.parametrize("every", [0.3, 0.35, 0.45, 0.55, 0.9])
async def test_at_any_phase_a_call_after_the_first_window_waits_one_interval(
    every: float,
) -> None:
    """At 10 a second (an interval of 0.1 s), calls every ``every`` s beside a bulk
    backlog. Those of the first window wait out its burst and start together when it
    leaves the span; the paced starts after them still leave a start free within an
    interval and the safety margin (they do not fill the log until those leave), so every
    later call starts within that of arriving."""
    sched, clock = scheduler(TEN, max_concurrency=64)
    pool = sched.pool("default")
    seen = Starts(clock)
    tasks = seen.spawn(300, pool, "bulk", "bulk", duration=0.01)
    arrivals = [every * (i + 1) for i in range(int(8 / every))]
    for i, at in enumerate(arrivals):
        tasks += seen.spawn(1, pool, f"person {i}", "interactive", at=at, duration=0.01)
    await clock.advance(arrivals[-1] + 1.0)
    waits = {at: seen.times(f"person {i}")[0] - at for i, at in enumerate(arrivals)}
    span, bound = TEN.period + TEN.margin, TEN.period / 10 + TEN.margin
    assert max(w for at, w in waits.items() if at >= span) <= bound + 1e-9, waits
    assert len(seen.times("bulk")) >= 8 * 10 - len(arrivals)  # bulk used what was left
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await sched.aclose()


@pytest.mark.parametrize("in_flight", [16, 64])
@pytest.mark.parametrize("phase", [0.5, 13.0, 29.0, 44.5, 59.5])
async def test_a_call_after_seven_windows_of_bulk_alone_waits_one_interval(
    in_flight: int, phase: float
) -> None:
    """A harvest has had the quota alone for seven windows when a person asks, at any
    phase of the window: a bulk run that lasted a few windows is paced (a start stays free
    within an interval), so the call waits one quota interval and the margin at most, not
    the rest of the window; and the harvest still gets every start of every span."""
    sched, clock = scheduler(max_concurrency=in_flight)
    pool = sched.pool("default")
    seen = Starts(clock)
    tasks = seen.spawn(200, pool, "bulk", "bulk")
    arrive = 7 * PRO.period + phase
    tasks += seen.spawn(1, pool, "person", "interactive", at=arrive)
    await finish(clock, sched, tasks)
    (at,) = seen.times("person")
    assert at - arrive <= QUOTA_INTERVAL + PRO.margin
    span = PRO.period + PRO.margin
    starts = sorted(t for _, t in seen.seen)
    assert [sum(1 for t in starts if j * span <= t < (j + 1) * span) for j in range(12)] == [
        15
    ] * 12


async def test_a_lone_bulk_job_bursts_and_bursts_again_once_quiet() -> None:
    """Nobody else seen: a bulk job's window goes at once. Within five windows of an
    interactive call, bulk is paced; after them, it bursts again."""
    sched, clock = scheduler(max_concurrency=64)
    pool = sched.pool("default")
    seen = Starts(clock)
    tasks = seen.spawn(15, pool, "alone", "bulk", duration=0.5)
    tasks += seen.spawn(1, pool, "person", "interactive", at=100.0, duration=0.5)
    tasks += seen.spawn(3, pool, "paced", "bulk", at=200.0, duration=0.5)
    quiet = 100.0 + PACE_QUIET_WINDOWS * PRO.period
    tasks += seen.spawn(15, pool, "again", "bulk", at=quiet, duration=0.5)
    await finish(clock, sched, tasks)
    assert seen.times("alone") == [0.0] * 15
    assert seen.times("paced") == [200.0, 204.0, 208.0]
    assert seen.times("again") == [quiet] * 15


async def test_interactive_calls_are_not_paced() -> None:
    sched, clock = scheduler(max_concurrency=64)
    seen = Starts(clock)
    tasks = seen.spawn(5, sched.pool("default"), "bulk", "bulk", duration=0.5)
    tasks += seen.spawn(10, sched.pool("default"), "person", "interactive", at=1.0)
    await finish(clock, sched, tasks)
    assert seen.times("person") == [1.0] * 10  # the free starts, at once


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
    sched, clock = scheduler(max_concurrency=64)
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
    sched, clock = scheduler(TEN, max_concurrency=64)
    seen = Starts(clock)
    tasks = seen.spawn(20, sched.pool("default"), "job", duration=0.01)
    await finish(clock, sched, tasks)
    assert seen.times("job") == [0.0] * 10 + [pytest.approx(1.02)] * 10


async def test_keyed_calls_that_fit_in_the_free_starts_go_at_once() -> None:
    sched, clock = scheduler(TEN, max_concurrency=64)
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
    sched, clock = scheduler(max_concurrency=64)
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
    sched, clock = scheduler(RateLimits(15, 2, period=60.0, adaptive=False), max_concurrency=64)
    pool = sched.pool("default")
    async with slot(pool) as permit:
        permit.rate_limited(30.5)  # a suspect: the window ends at 30.5
    await clock.advance(1.0)
    async with slot(pool) as permit:
        permit.rate_limited(29.5)  # the same window end: proven, the pool pauses to 30.5
    seen = Starts(clock)
    tasks = seen.spawn(1, pool, "x")
    await clock.advance(0.5)
    assert sched.stats.default.next_start_in == 29.0
    await finish(clock, sched, tasks)
    assert seen.times("x") == [30.5]


# The first round alone -----------------------------------------------------------------


def round_of(*times: float) -> tuple[FirstRound, list[Start]]:
    first = FirstRound()
    starts = [Start(t) for t in times]
    for start in starts:
        first.started(start)
    return first, starts


def answer(first: FirstRound, start: Start, now: float) -> bool:
    start.done = True
    return first.answered(start.time, now)


def test_before_any_answer_nothing_is_held() -> None:
    first, _ = round_of(0.0, 0.0, 0.0)
    assert first.holds(5.0) is False
    assert first.held_until() == -math.inf


def test_after_the_first_answer_starts_wait_for_the_rest_of_the_round() -> None:
    first, starts = round_of(0.0, 0.0, 0.0)
    assert answer(first, starts[0], 0.1) is False
    assert first.held_until() == 0.1 + ROUND_HOLD_ROUND_TRIPS * 0.1
    assert first.holds(0.2) is True
    answer(first, starts[1], 0.2)
    assert answer(first, starts[2], 0.25) is True  # every answer in: the round is over
    assert first.holds(0.26) is None


def test_one_slow_request_holds_the_pool_a_few_round_trips_at_most() -> None:
    first, starts = round_of(0.0, 0.0)
    answer(first, starts[0], 0.1)
    ends = 0.1 + ROUND_HOLD_ROUND_TRIPS * 0.1
    assert first.holds(ends - 0.001) is True
    assert first.holds(ends) is None  # the slow one is still out, but the hold is over


# A remote gate's admissions alone ------------------------------------------------------


class Gate:
    """A gate that admits when the test says so, and records what it is told."""

    def __init__(self) -> None:
        self.asks = 0
        self.told: list[tuple[Priority, int, bool]] = []
        self.given_back: list[str] = []
        self.answered_starts: list[Start] = []
        self.admit_now = asyncio.Event()
        self.asked = asyncio.Event()
        self.gave_back = asyncio.Event()

    async def admit(self, line: Callable[[], tuple[Priority, int, bool]]) -> str:
        self.asks += 1
        self.told.append(line())
        self.asked.set()
        await self.admit_now.wait()
        return f"ticket-{self.asks}"

    def give_back(self, ticket: str) -> None:
        self.given_back.append(ticket)
        self.gave_back.set()

    def answered(self, start: Start) -> None:
        self.answered_starts.append(start)


async def test_the_line_asks_once_at_a_time_and_tells_the_gate_how_many_wait() -> None:
    gate = Gate()
    admissions = Admissions(gate)
    for _ in range(3):  # three pumps while the first ask is out
        assert admissions.ready(lambda: ("bulk", 7, False), lambda: None) is False
    await gate.asked.wait()
    assert admissions.ready(lambda: ("bulk", 7, False), lambda: None) is False
    assert gate.asks == 1 and gate.told == [("bulk", 7, False)]
    await admissions.aclose()


async def test_an_admission_the_head_takes_at_once_is_kept() -> None:
    gate = Gate()
    admissions = Admissions(gate)
    taken: list[str] = []
    started = asyncio.Event()

    def pump() -> None:  # the pool's pump: the head starts now, with the admission
        assert admissions.ready(lambda: ("interactive", 1, True), pump) is True
        taken.append(admissions.take())
        started.set()

    admissions.ready(lambda: ("interactive", 1, True), pump)
    gate.admit_now.set()
    await started.wait()  # the ask's step ends (given back or not) before this resumes
    assert taken == ["ticket-1"] and gate.given_back == []


async def test_an_admission_nobody_takes_in_that_turn_is_given_back() -> None:
    gate = Gate()
    admissions = Admissions(gate)
    admissions.ready(lambda: ("interactive", 1, True), lambda: None)  # the waiter left meanwhile
    gate.admit_now.set()
    await gate.gave_back.wait()
    assert gate.given_back == ["ticket-1"]
    assert admissions.ready(lambda: ("interactive", 1, True), lambda: None) is False  # asks anew
    await admissions.aclose()


async def test_closing_stops_the_ask_in_flight() -> None:
    gate = Gate()
    admissions = Admissions(gate)
    admissions.ready(lambda: ("bulk", 1, False), lambda: None)
    await gate.asked.wait()
    await admissions.aclose()  # returns once the ask is cancelled and done
    gate.admit_now.set()
    assert (
        gate.given_back == []
        and admissions.ready(lambda: ("bulk", 1, False), lambda: None) is False
    )
    await admissions.aclose()


# A try that never reached the server --------------------------------------------------


def dead_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def until_done(clock: VirtualClock, task: asyncio.Task[Any]) -> None:
    """Move virtual time whenever the call sleeps on it (its backoff); yield to the loop
    while it waits on real sockets (a refused connection)."""
    while not task.done():
        wake = clock.next_wakeup
        if wake is not None:
            await clock.advance(max(wake - clock.now(), 0.0))
        else:
            await asyncio.sleep(0)


async def test_refused_connections_spend_no_start_of_the_quota() -> None:
    # catholic_qa at the Pro quota: 2 a minute. Three refused tries (two retries), then two
    # calls more: had the refused tries spent the log, the last would wait a minute.
    clock = VirtualClock()
    events: list[PoolEvent] = []
    async with m.AsyncMagisterium(
        token="t",
        base_url=f"http://127.0.0.1:{dead_port()}",
        rate_limits=PRO,
        max_retries=2,
        clock=clock,
        on_event=events.append,
    ) as client:
        call = asyncio.create_task(client.ask("Who wrote the Summa?"))
        await until_done(clock, call)
        with pytest.raises(m.APIConnectionError, match="failed") as refused:
            call.result()
        assert not refused.value.reached_server
        once = client.with_options(max_retries=0)
        calls = [asyncio.create_task(once.ask("again")) for _ in range(2)]
        await until_done(clock, asyncio.ensure_future(asyncio.wait(calls)))
        assert all(isinstance(c.exception(), m.APIConnectionError) for c in calls)
        sent = [e for e in events if e.kind == "sent" and e.pool == "expensive"]
        assert len(sent) == 5
        assert [e.value for e in sent] == [0.0] * 5  # none waited for the quota
        assert client.stats.expensive.retries == 2


async def test_a_try_that_reached_the_server_keeps_its_start() -> None:
    # A timeout after sending may have been counted by the server: its start stays logged.
    sched, clock = scheduler(RateLimits(15, 1, period=60.0), max_concurrency=4)
    pool = sched.pool("expensive")

    async def attempt(token: str | None = None) -> None:
        raise m.APITimeoutError("timed out")

    call = asyncio.create_task(
        call_with_retries(
            attempt,
            pool=pool,
            policy=RetryPolicy(max_retries=1, retry_expensive_timeouts=True),
            clock=clock,
            what="x",
        )
    )
    await clock.run_until_idle()
    with pytest.raises(m.APITimeoutError):
        await call
    assert sched.stats.expensive.sent == 2
    assert clock.now() == pytest.approx(61.0, abs=1.0)  # the retry waited out the minute


async def test_a_permit_marked_not_sent_gives_its_start_back() -> None:
    sched, clock = scheduler(RateLimits(15, 1, period=60.0), max_concurrency=4)
    pool = sched.pool("expensive")
    permit = await pool.acquire("interactive", None)
    permit.release(sent=False)
    assert sched.stats.expensive.in_flight == 0
    async with slot(pool) as permit:  # the one start a minute is still there
        assert permit.started == 0.0
    starts: list[float] = []
    tasks = spawn(1, pool, clock, starts)
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert starts == [61.0]  # that one was spent
    await sched.aclose()
