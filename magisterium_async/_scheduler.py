"""The scheduler: one pool per quota, each a rate limiter plus a concurrency cap.

A request enters ``async with pool.slot() as permit:`` and is let through, first come first
served within its pool, once four things hold at the same instant: a free slot under the
pool's concurrency cap, a free slot under the client-wide ``max_concurrency``, no pause, and
a rate permit. Its start is recorded at that instant, so a request never holds a permit while
it waits for anything else.

The rate limiter is a sliding log of the last starts: a start is allowed at ``t`` only if
fewer than N starts lie in ``(t - period - margin, t]``. So no interval of ``period`` seconds
ever holds more than N starts, however the server counts (fixed window, sliding window,
token bucket), while a burst of N on an idle pool still goes at once. (``aiolimiter`` is a
leaky bucket that starts empty: up to about 2N starts fit in one period, so it is not used.)

A 429 pauses the whole pool for its ``retryAfter``. An adaptive pool (the quota is shared
with the user's MCP calls) also steps its rate down: by one, and to no more than the starts
of the last period not refused, so a burst of 429s lands on what the server allows. While
lowered, starts are spread evenly over the period, and the rate probes back up by one per
period without a 429 in which it held a request back; it waits 4 such periods before it
tries again the rate refused last, and before it passes it.

Everything happens in :meth:`Scheduler._pump`, a plain function run whenever something
changes (a request arrives, leaves, is cancelled, or a wait ends). When the first waiter of
a pool must wait for time to pass, one timer task sleeps on the clock until then; it is the
only task the scheduler ever starts, it exists only while someone waits for time, and
:meth:`Scheduler.aclose` cancels and awaits it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
from collections import deque
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import Literal, Protocol

from ._clock import Clock, LoopClock
from ._config import PoolName, RateLimits
from ._errors import ClientClosedError

__all__ = [
    "Permit",
    "Pool",
    "PoolEvent",
    "PoolName",
    "PoolStats",
    "Scheduler",
    "SchedulerStats",
    "SharedLimit",
]

logger = logging.getLogger("magisterium_async")

# Clean periods a pool waits before it tries again the rate the server refused last time,
# and before it goes past it.
_CAUTIOUS_PERIODS = 4
EventKind = Literal["sent", "rate_limited", "paused", "resumed", "rate_changed", "retried"]


class SharedLimit(Protocol):
    """A rate limiter shared with other processes (``_redis.SharedLimiter``).

    A metered pool awaits :meth:`acquire` after its local admission (concurrency caps,
    pause) and tells :meth:`rate_limited` of every 429; its own rate is lifted.
    """

    async def acquire(self, pool: str) -> None: ...

    def rate_limited(self, pool: str, retry_after: float) -> None: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class PoolEvent:
    """One thing that happened in a pool, for ``on_event`` callbacks (your own metrics).

    ``pool`` is ``"default"``, ``"expensive"`` or ``"unmetered"`` (``tasks/get``,
    ``tasks/cancel``, the agent card); ``time`` is the clock's ``now()``. ``value`` by kind:
    ``sent``: seconds the request waited for its slot; ``rate_limited``: the ``retryAfter``;
    ``paused``: seconds until the pool resumes; ``resumed``: seconds the pause lasted;
    ``rate_changed``: the new rate (requests per period); ``retried``: 1.
    """

    kind: EventKind
    pool: str
    time: float
    value: float


@dataclass(frozen=True)
class PoolStats:
    """A snapshot of one pool.

    ``sent``: requests let through (a retry is one more); ``rate_limited``: 429s;
    ``retries``: retries counted by the client; ``paused_seconds``: time spent paused so far;
    ``current_rate`` / ``configured_rate``: requests per ``RateLimits.period`` now in force
    (lower after a 429 when adaptive) and as configured (``inf``: unlimited); ``in_flight``:
    requests let through and not yet done; ``waiting``: requests waiting for their turn.
    """

    name: str
    sent: int
    rate_limited: int
    retries: int
    paused_seconds: float
    current_rate: float
    configured_rate: float
    in_flight: int
    waiting: int


@dataclass(frozen=True)
class SchedulerStats:
    """A snapshot of every pool, and the requests in flight over all of them."""

    default: PoolStats
    expensive: PoolStats
    unmetered: PoolStats
    in_flight: int
    max_concurrency: int


class _Start:
    __slots__ = ("limited", "time")

    def __init__(self, time: float) -> None:
        self.time = time
        self.limited = False


class _Waiter:
    __slots__ = ("future", "seq", "since")

    def __init__(self, seq: int, since: float) -> None:
        self.seq = seq
        self.since = since
        self.future: asyncio.Future[Permit] = asyncio.get_running_loop().create_future()


class Permit:
    """A request's place in its pool, from its start until it leaves ``slot()``.

    ``started`` is the clock time at which it was let through.
    """

    __slots__ = ("_pool", "_released", "_start", "started")

    def __init__(self, pool: Pool, start: _Start | None, now: float) -> None:
        self._pool = pool
        self._start = start
        self._released = False
        self.started = now

    def rate_limited(self, retry_after: float) -> None:
        """The request got HTTP 429: pause the whole pool ``retry_after`` seconds from now.

        A pause already set lasts to the later of the two ends; other requests in flight
        that get a 429 join it. With adaptive limits the pool's rate also steps down.
        """
        if math.isnan(retry_after) or retry_after < 0 or math.isinf(retry_after):
            raise ValueError(f"retry_after must be a finite number >= 0, got {retry_after!r}")
        if self._start is not None:
            self._start.limited = True
        self._pool._on_rate_limited(retry_after)

    def retried(self) -> None:
        """Count a retry of this request in the pool's stats."""
        self._pool._retries += 1
        self._pool._emit("retried", 1.0)

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self._pool._in_flight -= 1
            self._pool._scheduler._in_flight -= 1
            self._pool._scheduler._pump()


class _Slot(AbstractAsyncContextManager["Permit"]):
    __slots__ = ("_permit", "_pool")

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._permit: Permit | None = None

    async def __aenter__(self) -> Permit:
        self._permit = await self._pool._acquire()
        return self._permit

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._permit is not None:
            self._permit._release()


class Pool:
    """One quota: a sliding-log rate limiter, a concurrency cap, a pause and FIFO waiters."""

    def __init__(
        self,
        scheduler: Scheduler,
        name: str,
        limit: float,
        period: float,
        concurrency: int | None,
        *,
        adaptive: bool,
        margin: float,
    ) -> None:
        self.name = name
        self._scheduler = scheduler
        self._configured = limit
        self._period = period
        self._cap = concurrency if concurrency is not None else math.inf
        self._waiters: deque[_Waiter] = deque()
        self._in_flight = 0
        self._sent = self._rate_limited = self._retries = 0
        self._pause_start = self._pause_until = -math.inf
        self._paused = False
        self._paused_total = 0.0
        metered = math.isfinite(limit)
        # A limit below 1 per period becomes 1 per a longer window: 0.5/min is 1 per 2 min.
        self._window = period if not metered or limit >= 1 else period / limit
        self._span = self._window + margin
        self._max_rate = max(1, math.floor(limit)) if metered else 0
        self._rate = self._max_rate
        self._log: deque[_Start] | None = deque() if metered else None
        self._adaptive = adaptive and metered
        self._probe_from = -math.inf
        self._refused = self._max_rate + 1  # the rate in force at the last 429

    def slot(self) -> AbstractAsyncContextManager[Permit]:
        """``async with pool.slot() as permit:``, the request's turn; leaving frees the slot.

        Raises :class:`ClientClosedError` if the scheduler is (or gets) closed meanwhile. A
        waiter that is cancelled gives its place back.
        """
        return _Slot(self)

    async def _acquire(self) -> Permit:
        scheduler = self._scheduler
        if scheduler._closed:
            raise ClientClosedError("the client is closed")
        waiter = _Waiter(next(scheduler._seq), scheduler._clock.now())
        self._waiters.append(waiter)
        scheduler._pump()
        try:
            permit = await waiter.future
        except asyncio.CancelledError:
            self._abandon(waiter)
            raise
        # --- shared quota hook: the shared limiter decides the rate (see _redis.py) ---
        shared = scheduler._shared
        if shared is not None and self.name != "unmetered":
            try:
                await shared.acquire(self.name)
            except BaseException:
                permit._release()
                raise
            permit.started = scheduler._clock.now()
        # --- end of the shared quota hook ---
        self._sent += 1
        self._emit("sent", permit.started - waiter.since)
        return permit

    def _abandon(self, waiter: _Waiter) -> None:
        future = waiter.future
        if not future.done() or future.cancelled():
            if waiter in self._waiters:
                self._waiters.remove(waiter)
        elif future.exception() is None:
            # Let through, then cancelled before it could send: give the permit back.
            permit = future.result()
            if permit._start is not None and self._log is not None:
                with contextlib.suppress(ValueError):  # already aged out of the log
                    self._log.remove(permit._start)
            permit._release()
            return
        self._scheduler._pump()

    def _head(self) -> _Waiter | None:
        while self._waiters and self._waiters[0].future.done():
            self._waiters.popleft()  # cancelled, its task not yet run to say so
        return self._waiters[0] if self._waiters else None

    def _refresh(self, now: float) -> None:
        if self._paused and now >= self._pause_until:
            self._paused = False
            logger.debug("pool %s resumed", self.name)
            self._emit("resumed", self._pause_until - self._pause_start, self._pause_until)
        log = self._log
        if log is None:
            return
        while log and log[0].time + self._span <= now:
            log.popleft()
        if now >= self._next_probe() and now < self._rate_allows():
            self._probe_from = now
            if self._rate >= self._refused:
                self._refused = self._max_rate + 1  # passed: whoever shared the quota stopped
            self._set_rate(self._rate + 1, "probing up")

    def _ready(self, now: float) -> bool:
        if self._head() is None or self._in_flight >= self._cap:
            return False
        self._refresh(now)
        return now >= self._pause_until and now >= self._rate_allows()

    def _wake_time(self, now: float) -> float:
        """When time alone next lets this pool's first waiter through (``now``: it does)."""
        return max(min(self._rate_allows(), self._next_probe()), self._pause_until, now)

    def _rate_allows(self) -> float:
        """The earliest time the sliding log lets the next request start."""
        log = self._log
        if log is None:
            return -math.inf
        at = log[-self._rate].time + self._span if len(log) >= self._rate else -math.inf
        if self._rate < self._max_rate and log:
            # Lowered after a 429: starts evenly spaced, so wherever the server's window
            # falls it holds as many, and a probe one too high is refused at once, not after
            # a run of luck with the window's phase.
            at = max(at, log[-1].time + self._span / self._rate)
        return at

    def _next_probe(self) -> float:
        """When a pool held back by its lowered rate may try one more per period."""
        if self._rate >= self._max_rate:
            return math.inf
        cautious = self._refused - 1 <= self._rate <= self._refused
        return self._probe_from + (_CAUTIOUS_PERIODS if cautious else 1) * self._window

    def _grant(self, now: float) -> None:
        waiter = self._waiters.popleft()
        start = None
        if self._log is not None:
            start = _Start(now)
            self._log.append(start)
        self._in_flight += 1
        self._scheduler._in_flight += 1
        waiter.future.set_result(Permit(self, start, now))

    def _on_rate_limited(self, retry_after: float) -> None:
        now = self._scheduler._clock.now()
        if self._scheduler._shared is not None:  # shared quota hook: pause every process
            self._scheduler._shared.rate_limited(self.name, retry_after)
        self._rate_limited += 1
        self._emit("rate_limited", retry_after, now)
        until = now + retry_after
        if until > max(self._pause_until, now):
            if self._pause_until > now:
                self._paused_total += until - self._pause_until
            else:
                self._paused_total += retry_after
                self._pause_start = now
            self._pause_until = until
            self._paused = True
            logger.debug("pool %s paused for %.3f s after a 429", self.name, retry_after)
            self._emit("paused", retry_after, now)
        self._probe_from = max(self._probe_from, until)
        if self._adaptive and self._log is not None:
            # One less, and no more than the starts of the last period not (yet) refused: a
            # single 429 above the server's limit steps back by one; a burst of them (each one
            # counted) lands where the server's limit is.
            since = now - self._span
            passed = sum(1 for s in self._log if s.time > since and not s.limited)
            self._refused = self._rate
            if self._rate > 1:
                self._set_rate(max(1, min(self._rate - 1, passed)), "rate limited by the server")

    def _set_rate(self, rate: int, why: str) -> None:
        old, self._rate = self._rate, rate
        logger.debug("pool %s rate %d -> %d per %g s (%s)", self.name, old, rate, self._window, why)
        self._emit("rate_changed", self._rate_per_period())

    def _rate_per_period(self) -> float:
        if self._log is None:
            return math.inf
        return self._rate * self._period / self._window

    def _emit(self, kind: EventKind, value: float, time: float | None = None) -> None:
        callback = self._scheduler._on_event
        if callback is None:
            return
        when = self._scheduler._clock.now() if time is None else time
        try:
            callback(PoolEvent(kind, self.name, when, value))
        except Exception:
            logger.warning("on_event callback failed on %s event; ignored", kind, exc_info=True)

    def _stats(self, now: float) -> PoolStats:
        return PoolStats(
            name=self.name,
            sent=self._sent,
            rate_limited=self._rate_limited,
            retries=self._retries,
            paused_seconds=self._paused_total - max(0.0, self._pause_until - now),
            current_rate=self._rate_per_period(),
            configured_rate=self._configured,
            in_flight=self._in_flight,
            waiting=sum(1 for w in self._waiters if not w.future.done()),
        )

    def __repr__(self) -> str:
        return f"<Pool {self.name} rate={self._rate_per_period():g}/{self._period:g}s>"


class Scheduler:
    """The pools of one client: ``default``, ``expensive`` and an unmetered one.

    ``safety_margin`` (seconds, default ``min(0.02 * period, 1)``) is added to the period
    between the N-th most recent start and the next, against network jitter. ``on_event``
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
        shared: SharedLimit | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        period = rate_limits.period
        if safety_margin is None:
            safety_margin = rate_limits.safety_margin
        margin = min(0.02 * period, 1.0) if safety_margin is None else safety_margin
        if not margin >= 0 or math.isinf(margin):
            raise ValueError(f"safety_margin must be a finite number >= 0, got {margin!r}")
        self._clock: Clock = clock if clock is not None else LoopClock()
        self._on_event = on_event
        self._max_concurrency = max_concurrency
        self._in_flight = 0
        self._seq = itertools.count()
        self._closed = False
        self._timer: asyncio.Task[None] | None = None
        self._timer_at = math.inf
        # Shared quota hook: with a shared limiter the local rate is lifted (it decides),
        # the concurrency caps stay.
        self._shared = shared
        self._pools = {
            name: Pool(
                self,
                name,
                math.inf if shared is not None else rate_limits.limit_for(name),
                period,
                rate_limits.concurrency_for(name),
                adaptive=rate_limits.adaptive and shared is None,
                margin=margin,
            )
            for name in ("default", "expensive")
        }
        self._pools["unmetered"] = Pool(
            self, "unmetered", math.inf, period, None, adaptive=False, margin=margin
        )

    def pool(self, name: PoolName | None) -> Pool:
        """The pool a request draws on; ``None``: the unmetered one (only concurrency caps)."""
        return self._pools["unmetered" if name is None else name]

    @property
    def stats(self) -> SchedulerStats:
        """A snapshot of every pool's counters."""
        now = self._clock.now()
        pools = self._pools
        return SchedulerStats(
            default=pools["default"]._stats(now),
            expensive=pools["expensive"]._stats(now),
            unmetered=pools["unmetered"]._stats(now),
            in_flight=self._in_flight,
            max_concurrency=self._max_concurrency,
        )

    async def aclose(self) -> None:
        """Close: every waiting request raises :class:`ClientClosedError`, as does every later
        ``slot()``; requests already let through run on (their transport decides). Idempotent;
        on return the scheduler has nothing running.
        """
        self._closed = True
        for pool in self._pools.values():
            while pool._waiters:
                future = pool._waiters.popleft().future
                if not future.done():
                    future.set_exception(
                        ClientClosedError("the client was closed while this call waited")
                    )
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            await asyncio.wait((timer,))
        if self._shared is not None:  # shared quota hook
            await self._shared.aclose()

    def _pump(self) -> None:
        """Let through every waiter that may start now, oldest first; wake up for the rest."""
        if self._closed:
            return
        now = self._clock.now()
        pools = self._pools.values()
        while self._in_flight < self._max_concurrency:
            ready = [pool for pool in pools if pool._ready(now)]
            if not ready:
                break
            min(ready, key=lambda pool: pool._waiters[0].seq)._grant(now)
        waiting = [pool for pool in pools if pool._head() is not None]
        wake = min((pool._wake_time(now) for pool in waiting), default=math.inf)
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
        await self._clock.sleep(when - self._clock.now())
        self._timer, self._timer_at = None, math.inf
        self._pump()
