"""The scheduler: the pools of one client, and the one loop that lets waiters through.

Everything happens in :meth:`Scheduler.pump`, a plain function run whenever something
changes (a request arrives, leaves, is cancelled, a wait ends, a remote gate answers).
When the first waiter of a pool must wait for time to pass, one timer task sleeps on the
clock until then; besides the timer, the only tasks the scheduler starts are a remote
gate's admissions (one per pool at a time, only while someone waits for it), and
:meth:`Scheduler.aclose` cancels and awaits them all.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Callable, Mapping

from magisterium_async._clock import Clock, LoopClock
from magisterium_async._config import PoolName, RateLimits, non_negative_number, whole_number
from magisterium_async._ratelimit._limiter import Limiter, RemoteGate, WindowLimiter
from magisterium_async._ratelimit._pool import Pool
from magisterium_async._ratelimit._stats import PoolEvent, SchedulerStats

__all__ = ["Scheduler"]


class Scheduler:
    """The pools of one client: ``default``, ``expensive`` and an unmetered one.

    The metered pools get a :class:`WindowLimiter` each from ``rate_limits`` (its
    ``safety_margin``, or ``safety_margin`` here, is added to the window between the N-th
    most recent start and the next, against network jitter), unless ``limiters`` gives
    theirs (the Redis-shared ones), with ``gates`` for their remote admission. ``on_event``
    receives every :class:`PoolEvent`; an exception it raises is logged and ignored.
    """

    def __init__(
        self,
        rate_limits: RateLimits,
        *,
        max_concurrency: int,
        clock: Clock | None = None,
        on_event: Callable[[PoolEvent], None] | None = None,
        safety_margin: float | None = None,
        limiters: Mapping[str, Limiter] | None = None,
        gates: Mapping[str, RemoteGate] | None = None,
    ) -> None:
        whole_number("max_concurrency", max_concurrency)
        margin = rate_limits.margin if safety_margin is None else safety_margin
        non_negative_number("safety_margin", margin)
        self.clock: Clock = clock if clock is not None else LoopClock()
        self.on_event = on_event
        self.max_concurrency = max_concurrency
        self.in_flight = 0  # requests let through and not yet done, over every pool
        self.closed = False
        self._seq = itertools.count()
        self._timer: asyncio.Task[None] | None = None
        self._timer_at = math.inf
        self._pools: dict[str, Pool] = {}
        for name in ("default", "expensive"):
            limiter = limiters.get(name) if limiters is not None else None
            starts, window = rate_limits.window_for(name)
            if limiter is None and starts:
                limiter = WindowLimiter(
                    name,
                    starts,
                    window,
                    margin,
                    period=rate_limits.period,
                    adaptive=rate_limits.adaptive,
                )
            gate = gates.get(name) if gates is not None else None
            configured = rate_limits.limit_for(name)
            concurrency = rate_limits.concurrency_for(name)
            self._pools[name] = Pool(self, name, limiter, configured, concurrency, gate)
        self._pools["unmetered"] = Pool(self, "unmetered", None, math.inf, None)
        self._lines = tuple(pool.line for pool in self._pools.values())

    def pool(self, name: PoolName | None) -> Pool:
        """The pool a request draws on; ``None``: the unmetered one (only concurrency caps)."""
        return self._pools["unmetered" if name is None else name]

    @property
    def stats(self) -> SchedulerStats:
        """A snapshot of every pool's counters."""
        now = self.clock.now()
        pools = self._pools
        return SchedulerStats(
            default=pools["default"].stats(now),
            expensive=pools["expensive"].stats(now),
            unmetered=pools["unmetered"].stats(now),
            in_flight=self.in_flight,
            max_concurrency=self.max_concurrency,
        )

    def next_seq(self) -> int:
        """The next arrival number (orders waiters of one priority across pools)."""
        return next(self._seq)

    def idle(self) -> bool:
        """Whether no request waits in any pool (a cancelled waiter may still count)."""
        return not any(self._lines)

    def release_slot(self) -> None:
        """A request let through is over: its client-wide slot is free."""
        self.in_flight -= 1
        self.pump()

    async def aclose(self) -> None:
        """Close: every waiting request raises :class:`ClientClosedError`, as does every later
        ``slot()``; requests already let through run on (their transport decides). Idempotent;
        on return the scheduler has nothing running.
        """
        self.closed = True
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            await asyncio.wait((timer,))
        for pool in self._pools.values():
            await pool.aclose()

    def pump(self) -> None:
        """Let through every waiter that may start now, interactive before bulk, then oldest
        first; wake up for the rest."""
        if self.in_flight >= self.max_concurrency:
            return  # nothing can start before a slot frees, and freeing one pumps again
        if self.closed or (self._timer is None and self.idle()):
            return
        now = self.clock.now()
        pools = self._pools.values()
        while self.in_flight < self.max_concurrency:
            best: Pool | None = None
            best_order = (2, 0)
            for pool in pools:
                head = pool.ready(now)
                if head is not None:
                    order = (head.rank, head.seq)
                    if order < best_order or best is None:
                        best, best_order = pool, order
            if best is None:
                break
            best.grant(now)
        if self.in_flight >= self.max_concurrency:
            return  # the next start waits for a slot, whose release pumps: no wake-up needed
        wake = math.inf
        waiting = False
        for pool in pools:
            if pool.head() is not None:
                waiting = True
                wake = min(wake, pool.wake_time(now))
        if not waiting and self._timer is not None:
            self._timer.cancel()
            self._timer, self._timer_at = None, math.inf
        elif now < wake < self._timer_at:
            # Only an earlier wake-up replaces the timer; a late timer re-arms when it fires.
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = wake
            self._timer = asyncio.ensure_future(self._sleep_until(wake))

    async def _sleep_until(self, when: float) -> None:
        await self.clock.sleep(when - self.clock.now())
        self._timer, self._timer_at = None, math.inf
        self.pump()
