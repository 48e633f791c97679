"""The scheduler: one pool per quota, each a rate limiter plus a concurrency cap.

A request enters ``async with pool.slot() as permit:`` and is let through, first come first
served within its pool, once four things hold at the same instant: a free slot under the
pool's concurrency cap, a free slot under the client-wide ``max_concurrency``, no pause, and
its :class:`Limiter`'s leave. Its start is recorded at that instant, so a request never holds
a permit while it waits for anything else.

The limiter is the seam: :class:`WindowLimiter` here (a sliding log, adaptive), the
Redis-shared one in ``_redis.py``, or a test's fake, all on the client's clock. A sliding
log allows a start at ``t`` only if fewer than N starts lie in ``(t - period - margin, t]``,
so no interval of ``period`` seconds ever holds more than N starts, however the server
counts (fixed window, sliding window, token bucket), while a burst of N on an idle pool
still goes at once. (``aiolimiter`` is a leaky bucket that starts empty: up to about 2N
starts fit in one period, so it is not used.)

What a 429 teaches is decided in one place, :meth:`Pool._on_rate_limited`; the wait it
carries says where the server's window ends (``now + retryAfter``). An isolated 429 is
evidence, not proof: the next request goes alone, a probe, and a request sent no earlier
that gets through refutes it (a fluke; or, at a window's edge, timing: an adaptive limiter
widens its margin). Proof is two 429s pointing at the same window end (three when the
waits are whole seconds), or a suspect whose window ended with nothing sent since getting
through: the whole pool pauses until that end, and an adaptive limiter lowers its rate to
what the server took of its starts in that window. Lowered, starts are spread evenly; after
10 of the server's starts it tries one more (a 429 to that try sends it back at once, and
the next try waits twice as long, up to 4x), and once a window of the server's took more
than before it doubles back toward the configured rate.

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
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import Literal, Protocol

from ._clock import Clock, LoopClock
from ._config import PoolName, RateLimits
from ._errors import ClientClosedError

__all__ = [
    "Limiter",
    "Permit",
    "Pool",
    "PoolEvent",
    "PoolName",
    "PoolStats",
    "Scheduler",
    "SchedulerStats",
    "Start",
    "WindowLimiter",
]

logger = logging.getLogger("magisterium_async")

# A lowered pool tries one more than the server allowed after this many starts the server
# took (at least one window): a refused try costs one 429, one in this many at most.
_STARTS_PER_PROBE = 10
# The widest a learned safety margin gets, as a share of the window.
_MAX_MARGIN_SHARE = 0.125
EventKind = Literal["sent", "rate_limited", "paused", "resumed", "rate_changed", "retried"]


class Start:
    """One request's start, as a limiter records it: ``time``, whether it got a 429
    (``limited``) and whether it is over (``done``)."""

    __slots__ = ("done", "limited", "time")

    def __init__(self, time: float) -> None:
        self.time = time
        self.limited = False
        self.done = False


class Limiter(Protocol):
    """The rate limit of one metered pool: the seam between the scheduler and a quota.

    The scheduler asks :meth:`next_start` while the pool has a waiter (first come first
    served), records every start with :meth:`start`, and reports what the server said.
    ``remote`` limiters (another process decides, as the Redis-shared one) are also awaited
    in :meth:`admit` after the local admission; local ones never are.
    """

    remote: bool

    @property
    def rate(self) -> float:
        """Requests per ``RateLimits.period`` now in force (``inf``: no limit here)."""
        ...

    def next_start(self, now: float) -> float:
        """When the next start may happen: ``<= now`` lets it start now; else ask again
        then (the answer may move when asked again)."""
        ...

    def start(self, start: Start) -> None:
        """A request started (``next_start`` allowed it)."""
        ...

    def forget(self, start: Start) -> None:
        """A recorded start was given back before anything was sent."""
        ...

    async def admit(self, start: Start) -> None:
        """Wait for the remote side's leave (only called when ``remote``)."""
        ...

    def refused(self, start: Start, now: float, window_end: float, *, proven: bool) -> None:
        """A 429 to ``start``; the server says its window ends at ``window_end``.
        ``proven``: a window ran out (see :meth:`Pool._on_rate_limited`); else a suspect."""
        ...

    def refuted(self, start: Start, suspect: Start, wait: float) -> None:
        """``start``, sent no earlier than ``suspect`` (refused, the window ending ``wait``
        seconds later, it said), got through: that 429 was no window running out."""
        ...

    @property
    def probing(self) -> bool:
        """Whether the rate is above what the server allowed last: a 429 now answers that
        step up (the pool pauses to the window's end, the rate goes back)."""
        ...

    async def aclose(self) -> None:
        """Release what the limiter holds (connections, tasks). Idempotent."""
        ...


class WindowLimiter:
    """The local limiter: a sliding log of starts, ``limit`` per ``window + margin``.

    Adaptive, it learns from 429s: a proven one lowers the rate to what the server accepted
    in its window; a refuted one that came at a window's edge while the log was full
    widens the margin (doubling, up to an eighth of the window), since it came from timing
    (network jitter) rather than rate.
    """

    remote = False

    def __init__(
        self,
        name: str,
        limit: int,
        window: float,
        margin: float,
        *,
        period: float | None = None,
        adaptive: bool = True,
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self.name = name
        self._max = limit
        self._window = window
        self._period = window if period is None else period
        self._margin = margin
        self._span = window + margin
        self._rate = limit
        self._log: deque[Start] = deque()
        self._adaptive = adaptive
        self._allowed = limit  # what the server accepted in its window at the last 429
        self._probe_at = math.inf
        self._probe_refused: Start | None = None
        self._refused_tries = 0  # tries one above refused in a row
        self._phase: float | None = None  # where the server's windows end, modulo one
        self._rtt = 0.0  # the round trip of the last request refused

    @property
    def rate(self) -> float:
        return self._rate * self._period / self._window

    @property
    def margin(self) -> float:
        """The safety margin in force, in seconds (it may have grown)."""
        return self._margin

    @property
    def probing(self) -> bool:
        return self._rate > self._allowed

    def next_start(self, now: float) -> float:
        log = self._log
        keep = 2 * self._span  # _allows needs one span; _step_up looks a window further
        while log and log[0].time + keep <= now:
            log.popleft()
        allows = self._allows()
        if self._rate < self._max:
            if self._probe_at <= now < allows:  # held back for a clean window: step up
                self._step_up(now)
                allows = self._allows()
            return min(allows, self._probe_at)
        return allows

    def _allows(self) -> float:
        log, rate, span = self._log, self._rate, self._span
        # The guarantee: never more than the configured number of starts in a span.
        at = log[-self._max].time + span if len(log) >= self._max else -math.inf
        if rate < self._max:
            # Lowered: the starts the server took (a 429 took nothing), evenly spaced, so
            # wherever the server's window falls it holds as many, and a probe one too high
            # is refused at once, not after a run of luck with the window's phase.
            taken = 0
            for s in reversed(log):
                if not s.limited:
                    if taken == 0:
                        at = max(at, s.time + span / rate)
                    taken += 1
                    if taken == rate:
                        at = max(at, s.time + span)
                        break
        return at

    def start(self, start: Start) -> None:
        self._log.append(start)

    def forget(self, start: Start) -> None:
        with contextlib.suppress(ValueError):  # already aged out of the log
            self._log.remove(start)

    async def admit(self, start: Start) -> None:
        return None

    def refused(self, start: Start, now: float, window_end: float, *, proven: bool) -> None:
        if not self._adaptive:
            return
        # The server's window began one window before it ends: what it accepted of ours
        # since then is what it allows now (all of it, when it counts no one else's).
        self._phase = window_end % self._window
        self._rtt = min(now - start.time, 0.1 * self._window)
        # Where the server's window began, give or take the request's round trip (the
        # server counts on arrival, and said where its window ends before the way back).
        slack = self._margin + self._rtt
        accepted = self._accepted(window_end - self._window - slack, now)
        if not proven:
            if self.probing:  # the step up was refused: back to what the server allowed
                self._probe_refused = start
                self._refused_tries = min(self._refused_tries + 1, 2)
                self._probe_at = now + self._cautious()
                self._set(self._allowed, "a probe up was refused")
            return
        self._refused_tries = 0
        rate = max(1, min(accepted, self._rate - 1))
        self._allowed = rate
        self._probe_at = max(now + self._cautious(), window_end)
        if rate < self._rate:
            self._set(rate, "rate limited by the server")

    def refuted(self, start: Start, suspect: Start, wait: float) -> None:
        if suspect is self._probe_refused:
            return  # that 429 answered a step up, not the timing
        if not self._adaptive or self._margin >= _MAX_MARGIN_SHARE * self._window:
            return
        if wait > 2 * self._margin:
            return  # not at a window's edge: a fluke, not the jitter
        began = suspect.time
        full = sum(1 for s in self._log if began - self._span < s.time <= began)
        if full >= self._rate:
            self._margin = min(
                max(2 * self._margin, 0.01 * self._window), _MAX_MARGIN_SHARE * self._window
            )
            self._span = self._window + self._margin
            logger.debug(
                "pool %s safety margin -> %.3g s (a 429 from timing, not rate)",
                self.name,
                self._margin,
            )

    def _cautious(self) -> float:
        # Each try refused in a row waits twice as long (at most 4x): a limit that stays
        # put costs fewer 429s, one that comes back is still found within a few windows.
        windows = math.ceil(_STARTS_PER_PROBE / self._allowed) << self._refused_tries
        return windows * self._window

    def _step_up(self, now: float) -> None:
        rate, window = self._rate, self._window
        if rate > self._allowed:
            # Passed only once one window of the server's (its phase known from the ends
            # its 429s gave) took more than it allowed before: not by luck with the phase.
            end = now if self._phase is None else now - (now - self._phase) % window
            # The window's end as measured is late by the way back; starts reach the
            # server late by the way there: a round trip (and the jitter margin) before
            # it, they surely fell in.
            took = self._accepted(end - window, end - self._rtt - self._margin)
            if took <= self._allowed:
                self._probe_at = end + window
                return
            self._allowed = took  # whoever shared the quota stopped, or it grew back
            self._refused_tries = 0
            new = 2 * rate
        elif rate < self._allowed:
            new = min(self._allowed, 2 * rate)
        else:
            new = rate + 1  # one more than the server allowed last time
        self._probe_at = now + window
        self._set(min(new, self._max), "probing up")

    def _accepted(self, begin: float, end: float) -> int:
        return sum(1 for s in self._log if begin <= s.time < end and s.done and not s.limited)

    def _set(self, rate: int, why: str) -> None:
        old, self._rate = self._rate, rate
        if rate >= self._max:
            self._allowed = self._max
            self._probe_at = math.inf
        logger.debug("pool %s rate %d -> %d per %g s (%s)", self.name, old, rate, self._window, why)

    async def aclose(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"<WindowLimiter {self.name} {self._rate}/{self._window:g}s>"


@dataclass(frozen=True)
class PoolEvent:
    """One thing that happened in a pool, for ``on_event`` callbacks (your own metrics).

    ``pool`` is ``"default"``, ``"expensive"`` or ``"unmetered"`` (``tasks/get``,
    ``tasks/cancel``, the agent card); ``time`` is the clock's ``now()``. ``value`` by kind:
    ``sent``: seconds the request waited for its slot; ``rate_limited``: the wait after the
    429; ``paused``: seconds until the pool resumes; ``resumed``: seconds the pause lasted;
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
    requests let through and not yet done; ``waiting``: requests waiting for their turn;
    ``next_start_in``: seconds until time alone lets the first of them start (``0.0`` when
    nobody waits, or the wait is for a free slot rather than for quota).
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
    next_start_in: float = 0.0


@dataclass(frozen=True)
class SchedulerStats:
    """A snapshot of every pool, and the requests in flight over all of them."""

    default: PoolStats
    expensive: PoolStats
    unmetered: PoolStats
    in_flight: int
    max_concurrency: int


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

    def __init__(self, pool: Pool, start: Start) -> None:
        self._pool = pool
        self._start = start
        self._released = False
        self.started = start.time

    def rate_limited(self, retry_after: float) -> None:
        """The request got HTTP 429: the server's window ends ``retry_after`` seconds from
        now (the request itself may wait longer before it retries).

        The pool decides what that means for everyone else (see
        :meth:`Pool._on_rate_limited`): nothing more than a probe for an isolated 429; a
        pause to the later of the two ends, and with adaptive limits a lower rate, for one
        that is proven.
        """
        if math.isnan(retry_after) or retry_after < 0 or math.isinf(retry_after):
            raise ValueError(f"retry_after must be a finite number >= 0, got {retry_after!r}")
        self._pool._on_rate_limited(self._start, retry_after)

    def retried(self) -> None:
        """Count a retry of this request in the pool's stats."""
        self._pool._retries += 1
        self._pool._emit("retried", 1.0)

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self._start.done = True
            pool = self._pool
            pool._in_flight -= 1
            pool._scheduler._in_flight -= 1
            if pool._suspect is not None:
                pool._answered(self._start)
            if pool._round is not None:
                pool._round_answered(self.started)
            pool._scheduler._pump()


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
    """One quota: a limiter, a concurrency cap, a pause, a probe and FIFO waiters."""

    def __init__(
        self,
        scheduler: Scheduler,
        name: str,
        limiter: Limiter | None,
        configured: float,
        concurrency: int | None,
    ) -> None:
        self.name = name
        self._scheduler = scheduler
        self._limiter = limiter
        self._configured = configured
        self._cap = concurrency if concurrency is not None else math.inf
        self._waiters: deque[_Waiter] = deque()
        self._in_flight = 0
        self._sent = self._rate_limited = self._retries = 0
        self._pause_start = self._pause_until = -math.inf
        self._paused = False
        self._paused_total = 0.0
        self._rate = limiter.rate if limiter is not None else math.inf
        # After an isolated 429 (``_suspect``), one request goes alone (``_probe``) until
        # it is answered or the server's window ends (``_suspect_until``).
        self._suspect: Start | None = None
        self._suspect_until = -math.inf
        self._probe: Start | None = None
        self._suspect_at = self._suspect_end = -math.inf  # when it came, where it points
        self._suspect_wait = 0.5
        self._agreeing = 0  # 429s pointing at the suspect's window end, itself included
        # The first round: what a metered pool starts before its first answer. Once that
        # answer is in, the next starts wait for the rest of the round (see _round_held).
        self._round: list[Start] | None = [] if limiter is not None else None
        self._round_ends = math.inf  # the most they wait: set by the first answer

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
        now = scheduler._clock.now()
        if (
            scheduler._idle()
            and scheduler._in_flight < scheduler._max_concurrency
            and self._may_start(now)
        ):
            # Nobody waits and the pool may start now: no place in line to keep.
            return await self._admitted(self._start_now(now), now)
        waiter = _Waiter(next(scheduler._seq), now)
        self._waiters.append(waiter)
        scheduler._pump()
        while True:
            try:
                permit = await waiter.future
            except asyncio.CancelledError:
                self._abandon(waiter)
                raise
            if scheduler._closed or (
                permit.started >= self._pause_until
                and (
                    self._suspect is None
                    or self._suspect_at < permit.started
                    or self._probe is permit._start
                )
            ):
                break
            # Let through, then a 429 came before this task could send (answers that came
            # in the same turn of the loop): back in line, in its place.
            self._give_back(permit)
            waiter = _Waiter(waiter.seq, waiter.since)
            self._requeue(waiter)
            scheduler._pump()
        return await self._admitted(permit, waiter.since)

    async def _admitted(self, permit: Permit, since: float) -> Permit:
        """A permit let through locally, once a remote limiter (if any) admits it too."""
        limiter = self._limiter
        if limiter is not None and limiter.remote:
            try:
                await limiter.admit(permit._start)
            except BaseException:
                permit._release()
                raise
            permit.started = self._scheduler._clock.now()
        self._sent += 1
        self._emit("sent", permit.started - since)
        return permit

    def _requeue(self, waiter: _Waiter) -> None:
        waiters = self._waiters
        at = 0
        while at < len(waiters) and waiters[at].seq < waiter.seq:
            at += 1
        waiters.insert(at, waiter)

    def _give_back(self, permit: Permit) -> None:
        """A permit let through but never used: its start is forgotten, its slot freed."""
        if self._limiter is not None:
            self._limiter.forget(permit._start)
        if self._probe is permit._start:
            self._probe = None  # not answered: the next start probes instead
        permit._released = True
        permit._start.done = True
        self._in_flight -= 1
        self._scheduler._in_flight -= 1

    def _abandon(self, waiter: _Waiter) -> None:
        future = waiter.future
        if not future.done() or future.cancelled():
            if waiter in self._waiters:
                self._waiters.remove(waiter)
        elif future.exception() is None:
            # Let through, then cancelled before it could send: give the permit back.
            self._give_back(future.result())
        self._scheduler._pump()

    def _head(self) -> _Waiter | None:
        while self._waiters and self._waiters[0].future.done():
            self._waiters.popleft()  # cancelled, its task not yet run to say so
        return self._waiters[0] if self._waiters else None

    def _ready(self, now: float) -> bool:
        return self._head() is not None and self._may_start(now)

    def _may_start(self, now: float) -> bool:
        """Whether a request may start now (waiters aside): cap, pause, probe, limiter."""
        if self._in_flight >= self._cap:
            return False
        if self._paused and now >= self._pause_until:
            self._paused = False
            logger.debug("pool %s resumed", self.name)
            self._emit("resumed", self._pause_until - self._pause_start, self._pause_until)
        if now < self._pause_until:
            return False
        if self._suspect is not None:
            if now >= self._suspect_until:
                self._expire()
            elif self._probe is not None:
                return False  # the probe goes alone
        if self._round is not None and self._round_held(now):
            return False
        limiter = self._limiter
        if limiter is None:
            return True
        at = limiter.next_start(now)
        self._check_rate()
        return at <= now

    def _wake_time(self, now: float) -> float:
        """When time alone next lets this pool's first waiter through (``now``: it does)."""
        at = self._limiter.next_start(now) if self._limiter is not None else now
        if self._probe is not None:
            at = max(at, self._suspect_until)
        if self._round is not None and self._round_ends != math.inf:
            at = max(at, self._round_ends)  # held: until the round is in, at the latest
        return max(at, self._pause_until, now)

    def _round_held(self, now: float) -> bool:
        """Whether starts wait for the first round's answers.

        Told a rate above the server's, a pool would refill the slots its first successes
        free before the 429s of the same burst come back, and each refill is one more 429
        (the first burst against a hidden 10/s: 16 instead of 6). So once the first answer
        is in, the next starts wait until every request of the first round is answered, or
        three of that first round trip more at most (one slow request must not hold the
        pool): by then the answers say what the server allows.
        """
        starts = self._round
        if starts is None or self._round_ends == math.inf:
            return False  # over, or no answer yet: still the first round
        if now < self._round_ends and not all(s.done for s in starts):
            return True
        self._round = None
        return False

    def _round_answered(self, started: float) -> None:
        """A request sent at ``started`` is over while the first round is open or held."""
        assert self._round is not None
        if self._round_ends == math.inf:
            now = self._scheduler._clock.now()
            self._round_ends = now + 3 * (now - started)  # its own round trip
        if all(s.done for s in self._round):
            self._round = None

    def _grant(self, now: float) -> None:
        waiter = self._waiters.popleft()
        waiter.future.set_result(self._start_now(now))

    def _start_now(self, now: float) -> Permit:
        start = Start(now)
        if self._limiter is not None:
            self._limiter.start(start)
        if self._suspect is not None and self._probe is None:
            self._probe = start
        if self._round is not None:  # only open here: _may_start ends a held round first
            self._round.append(start)
        self._in_flight += 1
        self._scheduler._in_flight += 1
        return Permit(self, start)

    def _on_rate_limited(self, start: Start, wait: float) -> None:
        """The one place that decides what the pool learns from a 429.

        ``now + wait`` is where the server says its window ends. Two 429s that point at
        the same end (closer to each other than half the time between them, give or take
        a second when both waits are whole seconds) prove a window ran out; a 429 that
        points elsewhere (random 429s with a fixed ``retryAfter`` move with the clock) is
        only a suspect, and the next start goes alone as a probe.
        """
        now = self._scheduler._clock.now()
        start.limited = True
        self._rate_limited += 1
        self._emit("rate_limited", wait, now)
        until = now + wait
        if now < self._pause_until:
            self._pause(now, until, wait)  # an answer to a request sent before the pause
            return
        if self._suspect is not None and now >= self._suspect_until:
            self._expire()
        limiter = self._limiter
        suspect = self._suspect
        # Whole seconds (the service rounds up) blur where the window ends by up to one:
        # then it takes three 429s in a row, not two.
        blur = 1.0 if wait.is_integer() and self._suspect_wait.is_integer() else 0.0
        agrees = (
            suspect is not None
            and suspect is not start
            and abs(until - self._suspect_end) < 0.5 * (now - self._suspect_at) + blur
        )
        if agrees:
            self._agreeing += 1
        proven = agrees and self._agreeing >= (3 if blur else 2)
        if agrees and not proven:
            return
        if not proven and limiter is not None and limiter.probing:
            # The answer to a step up: the rest of the window is spent; back to the rate
            # the server allowed (only a suspect: it is not lowered below that).
            self._pause(now, until, wait)
            limiter.refused(start, now, until, proven=False)
            self._check_rate()
            return
        if not proven:
            # Isolated: maybe a fluke, maybe timing. One request goes alone to find out.
            self._suspect, self._suspect_at, self._suspect_end = start, now, until
            self._suspect_wait, self._agreeing = wait, 1
            self._suspect_until = max(self._suspect_until, until)
            if limiter is not None:
                limiter.refused(start, now, until, proven=False)
            return
        self._suspect = self._probe = None
        self._pause(now, until, wait)
        if limiter is not None:
            limiter.refused(start, now, until, proven=True)
            self._check_rate()

    def _expire(self) -> None:
        """The suspect's window ended and nothing sent since got through: it was real,
        unless its probe is still out (then nobody knows)."""
        suspect = self._suspect
        assert suspect is not None
        out, self._suspect, self._probe = self._probe, None, None
        if out is None and self._limiter is not None:
            self._limiter.refused(suspect, self._suspect_at, self._suspect_end, proven=True)
            self._check_rate()

    def _answered(self, start: Start) -> None:
        """A request is over while a 429 is suspect: one sent no earlier that got through
        refutes it (the server still took requests: a fluke, or timing)."""
        suspect = self._suspect
        assert suspect is not None
        if start is self._probe:
            self._probe = None  # answered: the next start probes, if still in doubt
        if not start.limited and start is not suspect and start.time >= suspect.time:
            self._suspect = self._probe = None
            if self._limiter is not None:
                self._limiter.refuted(start, suspect, self._suspect_wait)

    def _pause(self, now: float, until: float, wait: float) -> None:
        if until <= max(self._pause_until, now):
            return
        if self._pause_until > now:
            self._paused_total += until - self._pause_until
        else:
            self._paused_total += wait
            self._pause_start = now
        self._pause_until = until
        self._paused = True
        logger.debug("pool %s paused for %.3f s after a 429", self.name, wait)
        self._emit("paused", wait, now)

    def _check_rate(self) -> None:
        rate = self._limiter.rate if self._limiter is not None else math.inf
        if rate != self._rate:
            self._rate = rate
            self._emit("rate_changed", rate)

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
            current_rate=self._limiter.rate if self._limiter is not None else math.inf,
            configured_rate=self._configured,
            in_flight=self._in_flight,
            waiting=sum(1 for w in self._waiters if not w.future.done()),
            next_start_in=self._wake_time(now) - now if self._head() is not None else 0.0,
        )

    def __repr__(self) -> str:
        return f"<Pool {self.name} rate={self._rate:g}>"


class Scheduler:
    """The pools of one client: ``default``, ``expensive`` and an unmetered one.

    The metered pools get a :class:`WindowLimiter` each from ``rate_limits`` (its
    ``safety_margin``, or ``safety_margin`` here, is added to the period between the N-th
    most recent start and the next, against network jitter), unless ``limiters`` gives
    theirs (the Redis-shared ones). ``on_event`` receives every :class:`PoolEvent`; an
    exception it raises is logged and ignored.
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
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        margin = rate_limits.margin if safety_margin is None else safety_margin
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
            configured = rate_limits.limit_for(name)
            self._pools[name] = Pool(
                self, name, limiter, configured, rate_limits.concurrency_for(name)
            )
        self._pools["unmetered"] = Pool(self, "unmetered", None, math.inf, None)
        self._queues = tuple(pool._waiters for pool in self._pools.values())

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
        for pool in self._pools.values():
            if pool._limiter is not None:
                await pool._limiter.aclose()

    def _idle(self) -> bool:
        """Whether no request waits in any pool (a cancelled waiter may still count)."""
        return not any(self._queues)

    def _pump(self) -> None:
        """Let through every waiter that may start now, oldest first; wake up for the rest."""
        if self._closed or (self._timer is None and self._idle()):
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
