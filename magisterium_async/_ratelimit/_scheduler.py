"""The scheduler: the pools of one client, and the one loop that lets waiters through.

The scheduler makes its pools and owns them; each gets what it needs through its
constructor (the shared :class:`~._pool.Capacity`, the ``pump`` and ``idle`` callbacks),
and none knows of the scheduler. :func:`client_scheduler` is the one place that decides
which limiters a client's pools use: the local ones, or a shared quota's.

Everything happens in :meth:`Scheduler.pump`, a plain function run whenever something
changes (a request arrives, leaves, is cancelled, a wait ends, a remote gate answers).
When the first waiter of a pool must wait for time to pass, one timer task sleeps on the
clock until then; besides the timer, the only tasks the scheduler starts are a remote
gate's admissions (one per pool at a time, only while someone waits for it), and
:meth:`Scheduler.aclose` cancels and awaits them all.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from magisterium_async._clock import Clock, LoopClock
from magisterium_async._config import PoolName, RateLimits, non_negative_number, whole_number
from magisterium_async._events import PoolEvent
from magisterium_async._ratelimit._limiter import Limiter, RemoteGate, WindowLimiter
from magisterium_async._ratelimit._pool import Capacity, Pool, PoolStats
from magisterium_async._ratelimit._quota import Quota, SharedQuota
from magisterium_async._ratelimit._shared import SharedLimiter

__all__ = ["Scheduler", "SchedulerStats", "client_scheduler"]


@dataclass(frozen=True)
class SchedulerStats:
    """A snapshot of every pool, and the requests in flight over all of them."""

    default: PoolStats
    expensive: PoolStats
    unmetered: PoolStats
    in_flight: int
    max_concurrency: int


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
        self._period = rate_limits.period
        self.max_concurrency = max_concurrency
        self.closed = False
        # Requests let through and not yet done over every pool, and the arrivals' order.
        self._capacity = Capacity(max_concurrency)
        self._timer: asyncio.Task[None] | None = None
        self._timer_at = math.inf
        self._pools: dict[str, Pool] = {}
        for name in ("default", "expensive", "unmetered"):
            limiter = limiters.get(name) if limiters is not None else None
            gate = gates.get(name) if gates is not None else None
            configured, concurrency = math.inf, None
            if name != "unmetered":
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
                configured = rate_limits.limit_for(name)
                concurrency = rate_limits.concurrency_for(name)
            # What a pool needs of the rest is handed to it: it knows nothing of the scheduler.
            self._pools[name] = Pool(
                name,
                limiter,
                configured,
                concurrency,
                gate,
                clock=self.clock,
                capacity=self._capacity,
                pump=self.pump,
                idle=self.idle,
                on_event=on_event,
            )
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
            in_flight=self._capacity.in_flight,
            max_concurrency=self.max_concurrency,
        )

    def quota(self) -> Quota:
        """What is left of each metered pool's quota now, as this process's limiters see
        it (a shared quota reads Redis for every process's: ``SharedLimiter.quota``)."""
        now = self.clock.now()
        return Quota(
            default=self._pools["default"].quota(now, self._period),
            expensive=self._pools["expensive"].quota(now, self._period),
        )

    def idle(self) -> bool:
        """Whether no request waits in any pool (a cancelled waiter may still count)."""
        return not any(self._lines)

    async def aclose(self) -> None:
        """Close: every waiting request raises :class:`ClientClosedError`, as does every later
        ``slot()``; requests already let through run on (their transport decides). Idempotent;
        on return the scheduler has nothing running.
        """
        self.closed = True
        for pool in self._pools.values():
            pool.close()
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            await asyncio.wait((timer,))
        for pool in self._pools.values():
            await pool.aclose()

    def pump(self) -> None:
        """Let through every waiter that may start now, interactive before bulk, then oldest
        first; wake up for the rest."""
        capacity = self._capacity
        if capacity.full():
            return  # nothing can start before a slot frees, and freeing one pumps again
        if self.closed or (self._timer is None and self.idle()):
            return
        now = self.clock.now()
        pools = self._pools.values()
        while not capacity.full():
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
        if capacity.full():
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


def client_scheduler(
    rate_limits: RateLimits,
    *,
    max_concurrency: int,
    clock: Clock,
    on_event: Callable[[PoolEvent], None] | None,
    shared_quota: SharedQuota | None,
    account: str | Callable[[], Awaitable[str]] | None,
) -> tuple[Scheduler, SharedLimiter | None]:
    """The client's scheduler, and its :class:`SharedLimiter` when ``shared_quota`` is set.

    With a shared quota the pools' rate is decided in Redis, with every process on the
    same account: ``SharedQuota.account`` when the application names it, else
    ``account`` (the token, a stored sign-in's name, or a function returning the token,
    whose hash then names the account). Its limiters and remote gates take the local
    limiters' place. Closing the scheduler closes it.
    """
    shared = None
    if shared_quota is not None:
        whose = shared_quota.account or account
        assert whose is not None
        shared = SharedLimiter(shared_quota, whose, rate_limits, clock, first_round=max_concurrency)
    scheduler = Scheduler(
        rate_limits,
        max_concurrency=max_concurrency,
        clock=clock,
        on_event=on_event,
        limiters=shared.limiters if shared is not None else None,
        gates=shared.gates if shared is not None else None,
    )
    return scheduler, shared
