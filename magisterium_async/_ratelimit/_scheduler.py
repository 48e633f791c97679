"""The scheduler and its pools: each pool one quota's waiting line, concurrency cap, pause
and first-round hold; the scheduler the one loop that lets waiters through over them all.

A pool owns the machinery; the decisions are made elsewhere: the judge (``_judge.py``)
says what a 429 means, the limiter (``_limiter.py``) when the next start may happen, the
line (``_lines.py``) whose turn it is. A request holds a :class:`Permit` from its start
until it releases it; while it waits it holds nothing (no slot under any cap, and
with a remote gate no admission either: the pool asks the gate for the line, and the
admission goes to whoever is first when it comes, see :class:`Admissions`).

A pool knows nothing of its scheduler. The scheduler makes its pools and hands each what
they share (one :class:`Capacity`: the client-wide cap on requests in flight, and the
counter that numbers arrivals over every pool) and two callbacks: ``pump`` (something
changed: let through whoever may start now) and ``idle`` (whether nobody waits in any
pool). What the pool tells its users is its events (``emit``, the client's stream: see
:mod:`magisterium_async._events`) and its live fields (rate, requests in flight and
waiting); the scheduler decides which limiters its pools use: the local ones, or a
shared quota's.

Everything happens in :meth:`Scheduler.pump`, a plain function run whenever something
changes (a request arrives, leaves, is cancelled, a wait ends, a remote gate answers).
When the first waiter of a pool must wait for time to pass, one timer task sleeps on the
clock until then; besides the timer, the only tasks the scheduler starts are a remote
gate's admissions (one per pool at a time, only while someone waits for it), and
:meth:`Scheduler.aclose` cancels and awaits them all.

The first round: a metered pool's first burst is sent before any answer says what the
server allows. Told a rate above the server's, the pool would send a whole window of
requests only to collect 429s. So once the first answer of that burst is back, further
starts wait until every request of the first round is answered, or
:data:`~._tuning.ROUND_HOLD_ROUND_TRIPS` of that first round trip at most (one slow
request must not hold the pool): by then the answers say what the server allows
(:class:`FirstRound`; the pool drops it once the round is over).
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from magisterium_async._clock import Clock, LoopClock
from magisterium_async._config import (
    PoolName,
    Priority,
    RateLimits,
    non_negative_number,
    whole_number,
)
from magisterium_async._errors import ClientClosedError
from magisterium_async._events import EventKind, OnEvent, PoolEvent, unheard
from magisterium_async._ratelimit._judge import Judge, Verdict
from magisterium_async._ratelimit._limiter import Limiter, RemoteGate, WindowLimiter
from magisterium_async._ratelimit._lines import Waiter, WaitingLine
from magisterium_async._ratelimit._log import Start
from magisterium_async._ratelimit._quota import PoolQuota, Quota, SharedQuota
from magisterium_async._ratelimit._shared import SharedLimiter
from magisterium_async._ratelimit._tuning import ROUND_HOLD_ROUND_TRIPS

__all__ = [
    "Admissions",
    "Capacity",
    "FirstRound",
    "Permit",
    "Pool",
    "PoolStats",
    "Scheduler",
    "SchedulerStats",
]


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


class Capacity:
    """What the pools of one scheduler share: the cap on requests in flight over all of
    them (``limit``, the client's ``max_concurrency``; ``in_flight``: let through and not
    yet done), and the numbering of arrivals (waiters of one priority go oldest first
    across pools)."""

    __slots__ = ("_arrivals", "in_flight", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0
        self._arrivals = itertools.count()

    def full(self) -> bool:
        """Whether every client-wide slot is taken."""
        return self.in_flight >= self.limit

    def room(self) -> int:
        """How many more requests may start before the cap is reached."""
        return self.limit - self.in_flight

    def arrival(self) -> int:
        """The next arrival number."""
        return next(self._arrivals)


class FirstRound:
    """The starts of the first round, and when the hold after its first answer ends."""

    __slots__ = ("ends", "starts")

    def __init__(self) -> None:
        self.starts: list[Start] = []
        self.ends = math.inf  # the most the hold lasts: set by the first answer

    def started(self, start: Start) -> None:
        """A request of the first round started."""
        self.starts.append(start)

    def holds(self, now: float) -> bool | None:
        """Whether starts wait for the round's answers now; ``None``: the round is over
        (the pool drops it)."""
        if self.ends == math.inf:
            return False  # no answer yet: still the first round
        if now < self.ends and not all(s.done for s in self.starts):
            return True
        return None

    def answered(self, started: float, now: float) -> bool:
        """A request sent at ``started`` is over at ``now``; whether the round is over."""
        if self.ends == math.inf:
            self.ends = now + ROUND_HOLD_ROUND_TRIPS * (now - started)
        return all(s.done for s in self.starts)

    def held_until(self) -> float:
        """When the hold ends at the latest (``-inf``: no hold yet)."""
        return self.ends if self.ends != math.inf else -math.inf


class Admissions:
    """The admissions of one pool's :class:`RemoteGate`: asked for, held, used or given back.

    While calls wait, the pool asks the gate for one start at a time on behalf of its line
    (never one per call: the gate is told how many wait). An admission that comes back is
    used by the line's head in the same turn of the loop, or given back: the gate logged
    its start then, and a request sent later would not be where the shared log says.
    """

    __slots__ = ("_asking", "_fail", "_tickets", "gate")

    def __init__(self, gate: RemoteGate, fail: Callable[[Exception], None] | None = None) -> None:
        self.gate = gate
        self._fail = fail  # the gate could not admit (its error is each waiter's)
        self._asking: asyncio.Task[None] | None = None
        self._tickets: deque[str] = deque()

    def ready(
        self, line: Callable[[], tuple[Priority, int, bool]], pump: Callable[[], None]
    ) -> bool:
        """Whether an admission is in hand; if not, ask the gate for one (one ask at a
        time). ``line`` tells the gate the line's first priority, how many could start and
        whether the line contends (see :class:`RemoteGate`); ``pump`` is called once an
        admission comes, to use it."""
        if self._tickets:
            return True
        if self._asking is None:
            self._asking = asyncio.ensure_future(self._ask(line, pump))
        return False

    def take(self) -> str:
        """The admission in hand, for the start being made now."""
        return self._tickets.popleft()

    def answered(self, start: Start) -> None:
        """A request the gate admitted is over."""
        self.gate.answered(start)

    async def _ask(
        self, line: Callable[[], tuple[Priority, int, bool]], pump: Callable[[], None]
    ) -> None:
        try:
            ticket = await self.gate.admit(line)
        except ClientClosedError:
            return  # closing: every waiter is told
        except Exception as exc:
            # Not an outage (the gate rides those out): a TLS certificate refused, a
            # token= callable that raised. Every waiting call raises it.
            if self._fail is None:
                raise
            self._fail(exc)
            return
        finally:
            self._asking = None
        self._tickets.append(ticket)
        pump()
        if ticket in self._tickets:  # not used in this turn of the loop: given back
            self._tickets.remove(ticket)
            self.gate.give_back(ticket)

    async def aclose(self) -> None:
        """Stop asking."""
        asking, self._asking = self._asking, None
        if asking is not None:
            asking.cancel()
            await asyncio.wait((asking,))


class Permit:
    """A request's place in its pool, from its start until :meth:`release`.

    ``started`` is the clock time at which it was let through.
    """

    __slots__ = ("_pool", "_released", "_start", "started")

    def __init__(self, pool: Pool, start: Start) -> None:
        self._pool = pool
        self._start = start
        self._released = False
        self.started = start.time

    def rate_limited(self, retry_after: float) -> float:
        """The request got HTTP 429; ``retry_after``: the seconds until the server's window
        ends, already clamped by the caller's ``RetryPolicy``. The pool's judge decides what
        that means for everyone; this returns the seconds the call waits before its next
        try: ``retry_after``, or until the pool resumes if it is paused for longer."""
        if not 0 <= retry_after < math.inf:
            raise ValueError(f"retry_after must be a finite number >= 0, got {retry_after!r}")
        return max(retry_after, self._pool.rate_limited(self._start, retry_after))

    def release(self, *, sent: bool = True) -> None:
        """The request is over (idempotent). ``sent=False``: nothing reached the server
        (the connection was refused, the call was cancelled before it sent): its start is
        given back to the pool's log, as if it had never been made."""
        if not self._released:
            self._released = True
            self._pool.release(self._start, sent=sent)


class Pool:
    """One quota: a limiter (or none: unmetered), an optional remote gate, a cap on requests
    in flight, a pause, a judge and a waiting line.

    Args:
        name: ``"default"``, ``"expensive"`` or ``"unmetered"``.
        limiter: when the next start may happen (``None``: unmetered).
        configured: the configured rate, for the stats.
        concurrency: the pool's own cap on requests in flight (``None``: none).
        gate: another party's leave for each start (the shared quota), or ``None``.
        clock: the client's clock.
        capacity: the client-wide cap, shared with the scheduler's other pools.
        pump: called whenever someone may start now (the scheduler decides whom).
        idle: whether nobody waits in any pool of the scheduler.
        emit: receives every :class:`PoolEvent` (the client's stream).
    """

    def __init__(
        self,
        name: str,
        limiter: Limiter | None,
        configured: float,
        concurrency: int | None,
        gate: RemoteGate | None = None,
        *,
        clock: Clock,
        capacity: Capacity,
        pump: Callable[[], None],
        idle: Callable[[], bool],
        emit: OnEvent = unheard,
    ) -> None:
        self.name = name
        self._clock = clock
        self._capacity = capacity
        self._pump = pump
        self._idle = idle
        self._emit_event = emit
        self.closed = False
        self._limiter = limiter
        self._admissions = Admissions(gate, self.fail) if gate is not None else None
        self._configured = configured
        self._cap = concurrency if concurrency is not None else math.inf
        self.line: WaitingLine[Permit] = WaitingLine()
        self.judge = Judge()
        self._in_flight = 0
        self._pause_start = self._pause_until = -math.inf
        self._paused = False
        self._rate = limiter.rate if limiter is not None else math.inf
        # The first round: what a metered pool starts before its first answer. Once that
        # answer is in, the next starts wait for the rest of the round (FirstRound).
        self._round: FirstRound | None = FirstRound() if limiter is not None else None
        self._pump_due = False  # a pump is scheduled for the end of this turn of the loop
        self._waiting_until = -math.inf  # the end of the last wait for quota told

    # What the pool is now --------------------------------------------------------------

    @property
    def rate(self) -> float:
        """Requests per period in force now (lower after a 429 when adaptive)."""
        return self._limiter.rate if self._limiter is not None else math.inf

    @property
    def configured(self) -> float:
        """Requests per period as configured (``inf``: unlimited)."""
        return self._configured

    @property
    def in_flight(self) -> int:
        """Requests let through and not yet released."""
        return self._in_flight

    @property
    def waiting(self) -> int:
        """Requests waiting for their turn."""
        return self.line.waiting()

    def next_start_in(self) -> float:
        """Seconds until time alone lets the first waiter start (``0.0`` when nobody
        waits, or the wait is for a free slot rather than for quota)."""
        now = self._clock.now()
        return self.wake_time(now) - now if self.line.waiting() else 0.0

    # Entering and leaving -------------------------------------------------------------

    async def acquire(self, priority: Priority, key: str | None) -> Permit:
        """Wait for this request's turn; release the permit when the request is over.

        ``priority`` and ``key`` (a fairness key) place it in the line (see ``_lines.py``).
        Raises :class:`ClientClosedError` if the scheduler is (or gets) closed meanwhile. A
        waiter that is cancelled gives its place back.
        """
        if self.closed:
            raise ClientClosedError("the client is closed")
        now = self._clock.now()
        paced = key is not None and self._limiter is not None
        if self._limiter is not None and (priority == "interactive" or key is not None):
            self._limiter.contention(now)  # a burst would hold it back: bulk is paced
        if (
            not paced
            and not self._capacity.full()
            and self._admissions is None
            and self._idle()
            and self._may_start(now, bulk=priority == "bulk")
        ):
            # Nobody waits and the pool may start now: no place in line to keep.
            return self._sent_now(self._start_now(now), now)
        waiter: Waiter[Permit] = Waiter(self._capacity.arrival(), now, priority, key)
        self.line.push(waiter)
        if paced:
            self._pump_soon()  # calls that arrive together are in line when pacing counts
        else:
            self._pump()
        self._tell_wait(now)
        while True:
            try:
                permit = await waiter.future
            except asyncio.CancelledError:
                self._abandon(waiter)
                raise
            judge = self.judge
            if self.closed or (
                permit.started >= self._pause_until
                and (
                    judge.suspect is None
                    or judge.suspect_at < permit.started
                    or judge.check is permit._start
                )
            ):
                break
            # Let through, then a 429 came before this task could send (answers that came
            # in the same turn of the loop): back in line, in its place.
            self._give_back(permit)
            waiter = Waiter(waiter.seq, waiter.since, waiter.priority, waiter.key)
            self.line.requeue(waiter)
            self._pump()
        return self._sent_now(permit, waiter.since)

    def _tell_wait(self, now: float) -> None:
        """Tell a wait for quota as it begins (a ``waiting`` event), once per wait however
        many calls share it (the log says a long one)."""
        if self._limiter is None:
            return
        wake = self.wake_time(now)
        if wake > now and wake > self._waiting_until:
            self._waiting_until = wake
            self._emit("waiting", wake - now, now)
        # A long wait is told by the log subscriber, from this event.

    def _sent_now(self, permit: Permit, since: float) -> Permit:
        self._emit("sent", permit.started - since)
        return permit

    def release(self, start: Start, *, sent: bool = True) -> None:
        """A request let through is over: free its slot, tell the judge and the gate
        (``sent=False``: nothing reached the server; the start is forgotten instead)."""
        if not sent:
            self._forget(start)
            self._pump()
            return
        start.done = True
        self._in_flight -= 1
        self.judge.on_answer(start)
        if self._round is not None and self._round.answered(start.time, self._clock.now()):
            self._round = None
        if self._admissions is not None:
            self._admissions.answered(start)
        self._capacity.in_flight -= 1
        self._pump()

    def _give_back(self, permit: Permit) -> None:
        """A permit let through but never used: its start is forgotten, its slot freed."""
        permit._released = True
        self._forget(permit._start)

    def _forget(self, start: Start) -> None:
        """A start that sent nothing: out of the log (and the shared one), its slot freed.
        It answers nothing: the judge's check goes to the next start, and the first round
        does not count it as an answer."""
        if self._limiter is not None:
            self._limiter.forget(start)
        if self.judge.check is start:
            self.judge.check = None  # not answered: the next start checks instead
        start.done = True
        self._in_flight -= 1
        self._capacity.in_flight -= 1

    def _abandon(self, waiter: Waiter[Permit]) -> None:
        future = waiter.future
        if not future.done() or future.cancelled():
            self.line.remove(waiter)
        elif future.exception() is None:
            # Let through, then cancelled before it could send: give the permit back.
            self._give_back(future.result())
        self._pump()

    # Whose turn, and when --------------------------------------------------------------

    def ready(self, now: float) -> Waiter[Permit] | None:
        """The pool's head, if it may start now."""
        head = self.line.head()
        if head is None or not self._may_start(now, bulk=head.priority == "bulk"):
            return None
        admissions = self._admissions
        if admissions is None or admissions.ready(lambda: self._gate_line(head), self._pump):
            return head
        return None

    def _gate_line(self, head: Waiter[Permit]) -> tuple[Priority, int, bool]:
        """What the gate is told of the line: its first priority, how many calls could
        start now (the caps bound what this process would take), and whether it contends
        (an interactive call first, or calls with a fairness key: see :class:`RemoteGate`)."""
        line = self.line
        priority = (line.head() or head).priority
        room = min(self._cap - self._in_flight, self._capacity.room())
        waiting = line.waiting()
        count = max(1, int(room) if room < waiting else waiting)
        return priority, count, priority == "interactive" or line.keyed()

    def _may_start(self, now: float, *, bulk: bool) -> bool:
        """Whether a request may start now (waiters aside): cap, pause, check, round,
        limiter, pacing (``bulk``: whether it is a bulk call)."""
        if self._in_flight >= self._cap:
            return False
        if self._paused and now >= self._pause_until:
            self._paused = False
            self._emit("resumed", self._pause_until - self._pause_start, self._pause_until)
        if now < self._pause_until:
            return False
        held, expired = self.judge.holds(now)
        if expired is not None:
            self._apply(expired)
        if held:
            return False  # the check goes alone
        if self._round is not None:
            holds = self._round.holds(now)
            if holds is None:
                self._round = None  # the round is over
            elif holds:
                return False
        limiter = self._limiter
        if limiter is None:
            return True
        at = limiter.next_start(now)
        self._check_rate()
        return at <= now and self._paced_start(now, bulk) <= now

    def wake_time(self, now: float) -> float:
        """When time alone next lets this pool's first waiter through (``now``: it does)."""
        at = self._limiter.next_start(now) if self._limiter is not None else now
        head = self.line.head()
        if self._limiter is not None and head is not None:
            at = max(at, self._paced_start(now, head.priority == "bulk"))
        if self.judge.check is not None:
            at = max(at, self.judge.suspect_until)
        if self._round is not None:
            at = max(at, self._round.held_until())  # until the round is in, at the latest
        return max(at, self._pause_until, now)

    def _paced_start(self, now: float, bulk: bool) -> float:
        """When pacing (:meth:`RateRule.paced_start`) lets the next start happen, a bulk
        one (``bulk``) or not."""
        assert self._limiter is not None
        line = self.line
        return self._limiter.paced_start(now, line.held(), keyed=line.keyed(), bulk=bulk)

    def _pump_soon(self) -> None:
        """Pump once at the end of this turn of the event loop."""
        if not self._pump_due:
            self._pump_due = True
            asyncio.get_running_loop().call_soon(self._pump_now)

    def _pump_now(self) -> None:
        self._pump_due = False
        self._pump()

    def grant(self, now: float) -> None:
        """Start the head now (:meth:`ready` said it may)."""
        ticket = self._admissions.take() if self._admissions is not None else None
        waiter = self.line.pop()
        waiter.future.set_result(self._start_now(now, ticket))

    def _start_now(self, now: float, ticket: str | None = None) -> Permit:
        start = Start(now, ticket)
        if self._limiter is not None:
            self._limiter.start(start)
        self.judge.started(start)
        if self._round is not None:  # only open here: _may_start ends a held round first
            self._round.started(start)
        self._in_flight += 1
        self._capacity.in_flight += 1
        return Permit(self, start)

    # 429s ------------------------------------------------------------------------------

    def rate_limited(self, start: Start, wait: float) -> float:
        """A 429 to ``start``, its window ending ``wait`` seconds from now: ask the judge,
        apply its verdicts; the seconds until the pool resumes (0: it is not paused)."""
        now = self._clock.now()
        start.limited, start.wait = True, wait
        self._emit("rate_limited", wait, now)
        limiter = self._limiter
        verdicts = self.judge.on_429(
            start,
            now,
            wait,
            paused=now < self._pause_until,
            stepping_up=limiter is not None and limiter.stepping_up,
        )
        for verdict in verdicts:
            self._apply(verdict)
        return max(0.0, self._pause_until - now)

    def _apply(self, verdict: Verdict) -> None:
        """The pool's part of a verdict (a pause), then the limiter's (what it learns)."""
        if verdict.pause:
            self._pause(verdict.at, verdict.window_end, verdict.wait)
        if verdict.kind in ("late", "agreeing") or self._limiter is None:
            return
        self._limiter.learn(verdict)
        self._check_rate()

    def _pause(self, now: float, until: float, wait: float) -> None:
        if until <= max(self._pause_until, now):
            return
        if self._pause_until <= now:
            self._pause_start = now
        self._pause_until = until
        self._paused = True
        self._emit("paused", until - now, now)

    # What it tells ---------------------------------------------------------------------

    def _check_rate(self) -> None:
        rate = self._limiter.rate if self._limiter is not None else math.inf
        if rate != self._rate:
            self._rate = rate
            self._emit("rate_changed", rate)

    def _emit(self, kind: EventKind, value: float, time: float | None = None) -> None:
        when = self._clock.now() if time is None else time
        self._emit_event(PoolEvent(kind, self.name, when, value))

    def quota(self, now: float, period: float) -> PoolQuota:
        """What is left of this pool's quota at ``now``, as its own limiter sees it
        (``period``: ``RateLimits.period``); reading it changes nothing."""
        paused_for = max(0.0, self._pause_until - now)
        limiter = self._limiter
        if limiter is None or math.isinf(limiter.rate):
            return PoolQuota(
                self.name, math.inf, self._configured, period, 0, None, paused_for, paused_for
            )
        used, left, at = limiter.usage(now)
        return PoolQuota(
            pool=self.name,
            limit=limiter.rate,
            configured=self._configured,
            period=period,
            used=used,
            left=0 if paused_for else left,
            next_start_in=max(at - now, paused_for),
            paused_for=paused_for,
        )

    def fail(self, error: Exception) -> None:
        """Fail every waiter with ``error`` (a copy each: each call raises its own); later
        calls may still succeed."""
        for waiter in self.line.drain():
            if not waiter.future.done():
                copy = type(error).__new__(type(error))  # not __init__: its arguments vary
                copy.__dict__.update(error.__dict__)
                copy.args = error.args
                waiter.future.set_exception(copy)

    def close(self) -> None:
        """Fail every waiter, and every later :meth:`acquire`."""
        self.closed = True
        self.fail(ClientClosedError("the client was closed while this call waited"))

    async def aclose(self) -> None:
        """:meth:`close`, then stop asking the gate and close the limiter."""
        self.close()
        if self._admissions is not None:
            await self._admissions.aclose()
        if self._limiter is not None:
            await self._limiter.aclose()

    def __repr__(self) -> str:
        return f"<Pool {self.name} rate={self._rate:g}>"


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
    theirs, with ``gates`` for their remote admission. ``emit`` receives every
    :class:`PoolEvent` (the client's stream).

    With ``shared`` (a :class:`SharedQuota`) the metered pools' rate is decided in Redis,
    with every process on the same account: ``SharedQuota.account`` when the application
    names it, else ``account`` (the token, a stored sign-in's name, or a function returning
    the token, whose hash then names the account). Closing the scheduler closes it.
    """

    def __init__(
        self,
        rate_limits: RateLimits,
        *,
        max_concurrency: int,
        clock: Clock | None = None,
        emit: OnEvent = unheard,
        shared: SharedQuota | None = None,
        account: str | Callable[[], Awaitable[str]] | None = None,
        safety_margin: float | None = None,
        limiters: Mapping[str, Limiter] | None = None,
        gates: Mapping[str, RemoteGate] | None = None,
    ) -> None:
        whole_number("max_concurrency", max_concurrency)
        self.shared: SharedLimiter | None = None
        if shared is not None:
            whose = shared.account or account
            assert whose is not None
            self.shared = SharedLimiter(
                shared, whose, rate_limits, clock or LoopClock(), first_round=max_concurrency
            )
            limiters, gates = self.shared.limiters, self.shared.gates
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
                emit=emit,
            )
        self._lines = tuple(pool.line for pool in self._pools.values())

    def pool(self, name: PoolName | None) -> Pool:
        """The pool a request draws on; ``None``: the unmetered one (only concurrency caps)."""
        return self._pools["unmetered" if name is None else name]

    @property
    def in_flight(self) -> int:
        """Requests let through and not yet released, over every pool."""
        return self._capacity.in_flight

    async def quota(self) -> Quota:
        """What is left of each metered pool's quota now. Without a shared quota it is this
        process's starts in the window and its pause; with one it is read from Redis (every
        process's starts, the shared rate and pause), each pool falling back to this
        process's view, with ``shared=False``, when Redis does not answer."""
        now = self.clock.now()
        local = Quota(
            default=self._pools["default"].quota(now, self._period),
            expensive=self._pools["expensive"].quota(now, self._period),
        )
        if self.shared is None:
            return local
        default = await self.shared.quota(local.default)
        if not default.shared and not default.unlimited:
            return Quota(default, local.expensive)  # Redis did not answer: no second wait
        return Quota(default, await self.shared.quota(local.expensive))

    def idle(self) -> bool:
        """Whether no request waits in any pool (a cancelled waiter may still count)."""
        return not any(self._lines)

    async def aclose(self) -> None:
        """Close: every waiting request raises :class:`ClientClosedError`, as does every later
        ``acquire()``; requests already let through run on (their transport decides). Idempotent;
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
            if pool.line.head() is not None:
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
