"""The pools of one client and the scheduler that lets their waiters through.

A :class:`Pool` is one quota's waiting line, concurrency cap and :class:`~._rule.Rule` (or,
with a shared quota, its admission in Redis: :class:`~._shared.SharedPool`); ``unmetered``
has no rule (``tasks/get``, ``tasks/cancel``, the agent card: only the caps apply). A
request holds a :class:`Permit` from the moment it is let through until it is released.

The :class:`Scheduler` makes the pools and runs :meth:`Scheduler.pump` whenever something
changes (a call arrives, a request ends, a timer fires, Redis answers): it lets through
every waiter that may start now, interactive before bulk and then oldest first over all
pools, within the client-wide cap on requests in flight (``max_concurrency``), and sets one
timer for the earliest moment time alone lets the next one through. A timer that fires late
(a busy machine) only starts a request late: every decision reads the clock when it is
made.

What a pool does is told on the client's one event stream (``emit``): each request let
through (``sent``), each 429 (``rate_limited``), a pause and its end (``paused``,
``resumed``), a new rate (``rate_changed``) and each wait for quota as it begins
(``waiting``). The counts behind ``client.stats`` are made from those events.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Awaitable, Callable

from magisterium_async._clock import Clock
from magisterium_async._config import PoolName, Priority, RateLimits, whole_number
from magisterium_async._errors import ClientClosedError
from magisterium_async._events import EventKind, OnEvent, PoolEvent, unheard
from magisterium_async._ratelimit._line import Line, Waiter
from magisterium_async._ratelimit._quota import PoolQuota, Quota, SharedQuota
from magisterium_async._ratelimit._rule import Rule, Start, Verdict
from magisterium_async._ratelimit._shared import SharedLimits, SharedPool

__all__ = ["Permit", "Pool", "Scheduler"]


class Permit:
    """A request's place in its pool, from the moment it is let through (``started``, on
    the client's clock) until :meth:`release`."""

    __slots__ = ("_done", "_pool", "_start", "started")

    def __init__(self, pool: Pool, start: Start) -> None:
        self._pool, self._start, self._done = pool, start, False
        self.started = start.time

    def rate_limited(self, retry_after: float) -> float:
        """The request got HTTP 429 saying ``retry_after`` seconds (the caller's policy
        has already bounded it); the seconds this call waits before its next try: that,
        or until its pool resumes if it pauses for longer."""
        if not 0 <= retry_after < math.inf:
            raise ValueError(f"retry_after must be a finite number >= 0, got {retry_after!r}")
        return self._pool.refused(self, retry_after)

    def release(self, *, sent: bool = True) -> None:
        """The request is over (idempotent). ``sent=False``: nothing reached the server
        (the connection was refused, or the call was cancelled before it sent): its start
        is given back and spends none of the quota."""
        if not self._done:
            self._done = True
            self._pool.released(self._start, sent)


class Pool:
    """One quota: its line, its caps and its rule (see the module's docstring).

    Attributes:
        name: ``"default"``, ``"expensive"`` or ``"unmetered"``.
        configured: the configured requests per period (``inf``: unlimited).
        in_flight: requests let through and not yet released.
    """

    def __init__(self, scheduler: Scheduler, name: str, limits: RateLimits) -> None:
        self.name, self.configured, self._cap = name, math.inf, math.inf
        self._scheduler, self._clock = scheduler, scheduler.clock
        rule: Rule | None = None
        if name != "unmetered":
            starts, window = limits.window_for(name)
            self.configured = limits.limit_for(name)
            self._cap = limits.concurrency_for(name) or math.inf
            if starts:
                rule = Rule(starts, window, limits.margin, adaptive=limits.adaptive)
        self._rule, shared = rule, scheduler.shared
        self._shared = (
            SharedPool(shared, name, rule, self.fail)
            if shared is not None and rule is not None
            else None
        )
        self._per_period = scheduler.period / rule.window if rule is not None else math.inf
        self.line: Line[Permit] = Line()
        self.in_flight = 0
        self._told_rate = self.rate
        self._told_pause = -math.inf  # the end of the last pause told
        self._told_wait = -math.inf  # the end of the last wait for quota told
        self._untold = False  # a call arrived whose wait is not told yet
        self._paused_at: float | None = None

    @property
    def rate(self) -> float:
        """Requests per period allowed now (lower than ``configured`` after the server
        showed a smaller quota; ``inf``: unlimited)."""
        return self._rule.rate * self._per_period if self._rule is not None else math.inf

    @property
    def waiting(self) -> int:
        """Calls waiting for their turn."""
        return self.line.waiting()

    def next_start_in(self) -> float:
        """Seconds until time alone lets the first waiter start (``0.0``: nobody waits,
        or the wait is for a free slot rather than for quota)."""
        now = self._clock.now()
        head = self.line.head()
        at = self._at(now, head.kind) if head is not None else now
        return max(0.0, at - now) if at < math.inf else 0.0

    # Entering --------------------------------------------------------------------------

    async def acquire(self, priority: Priority = "interactive", key: str | None = None) -> Permit:
        """Wait for this request's turn (see ``_line.py`` for the order); its permit.

        Raises :class:`ClientClosedError` if the client is (or gets) closed meanwhile. A
        waiter that is cancelled gives its place back.
        """
        scheduler = self._scheduler
        if scheduler.closed:
            raise ClientClosedError("the client is closed")
        now = self._clock.now()
        rule = self._rule
        if rule is not None and (priority == "interactive" or key is not None):
            rule.contended_at = now  # a burst would hold it back: bulk is paced a while
            if self._shared is not None:
                self._shared.contend()
        # What the call is to pacing: bulk ("b"), keyed ("k": an orchestrator's user,
        # paced so that another user's first call finds a start) or interactive ("i").
        kind = "b" if priority == "bulk" else "k" if key is not None else "i"
        if scheduler.idle() and self._may_start(now, kind):
            return self._grant(now, now)  # nobody waits and it may start: no place to keep
        waiter: Waiter[Permit] = Waiter(next(scheduler.arrivals), now, kind, key)
        self.line.push(waiter)
        self._untold = True
        scheduler.pump()
        try:
            return await waiter.future
        except asyncio.CancelledError:
            future = waiter.future
            if not future.done() or future.cancelled():
                self.line.remove(waiter)
            elif future.exception() is None:
                future.result().release(sent=False)  # let through, cancelled before it sent
            scheduler.pump()
            raise

    def _may_start(self, now: float, kind: str) -> bool:
        """Whether one more request may start now (the line aside)."""
        if self.in_flight >= self._cap or self._scheduler.full():
            return False
        return self._at(now, kind) <= now

    def _at(self, now: float, kind: str) -> float:
        """When the rule (or Redis) lets the next start of a call of ``kind`` go (see
        :class:`~._line.Waiter`)."""
        rule = self._rule
        if rule is None:
            return now
        if self._shared is None:
            at = rule.next_start(now, paced=kind != "i")
        else:
            at = math.inf if rule.held else self._shared.next_start(now, kind)
        self._tell(now)
        return at

    def _grant(self, now: float, since: float) -> Permit:
        ticket = self._shared.take() if self._shared is not None else None
        start = self._rule.start(now, ticket) if self._rule is not None else Start(now)
        self.in_flight += 1
        self._scheduler.in_flight += 1
        if self._paused_at is not None:
            self._emit("resumed", now - self._paused_at, now)
            self._paused_at = None
        self._emit("sent", now - since, now)
        return Permit(self, start)

    def ready(self, now: float) -> Waiter[Permit] | None:
        """The pool's head, if it may start now (the scheduler decides among pools)."""
        head = self.line.head()
        if head is None or not self._may_start(now, head.kind):
            return None
        return head

    def grant(self, now: float) -> None:
        """Let the head through now (:meth:`ready` said it may)."""
        waiter = self.line.pop()
        waiter.future.set_result(self._grant(now, waiter.since))

    def wake(self, now: float) -> float:
        """When time alone next lets the head through (``inf``: only an event will)."""
        head = self.line.head()
        if head is None or self.in_flight >= self._cap:
            return math.inf
        return self._at(now, head.kind)

    # Leaving ---------------------------------------------------------------------------

    def refused(self, permit: Permit, retry_after: float) -> float:
        """A 429 to ``permit``'s request: the rule judges it; the call's wait."""
        now = self._clock.now()
        self._emit("rate_limited", retry_after, now)
        rule = self._rule
        if rule is not None:
            self._apply(rule.refused(permit._start, now, retry_after), now)
            if self._shared is not None:
                self._shared.forget(permit._start)
            return max(retry_after, rule.paused_until - now)
        return retry_after

    def released(self, start: Start, sent: bool) -> None:
        """A request let through is over (``sent=False``: nothing reached the server)."""
        self.in_flight -= 1
        self._scheduler.in_flight -= 1
        rule = self._rule
        if rule is not None and start.outcome == "out":
            now = self._clock.now()
            if sent:
                if self._shared is not None:
                    self._shared.answered(start)
                self._apply(rule.answered(start, now), now)
            else:
                self._apply(rule.unsent(start, now), now)
                if self._shared is not None:
                    self._shared.forget(start)
        self._scheduler.pump()

    def _apply(self, verdict: Verdict | None, now: float) -> None:
        rule, shared = self._rule, self._shared
        assert rule is not None
        if verdict is not None:
            if shared is not None:
                shared.learn(verdict)
            else:
                rule.apply(verdict)
            self._tell(now)
        if shared is not None and rule.settled:
            shared.settle()  # (once) after what it taught: others' first starts may go

    # What it tells ---------------------------------------------------------------------

    def _emit(self, kind: EventKind, value: float, now: float) -> None:
        self._scheduler.emit(PoolEvent(kind, self.name, now, value))

    def _tell(self, now: float) -> None:
        """Tell a new rate, and a pause as it begins or grows."""
        rule = self._rule
        assert rule is not None
        shared = self._shared
        if shared is not None:
            rule.rate, rule.proven = shared.rate, shared.proven
            rule.paused_until = max(rule.paused_until, shared.paused_until)
        if self.rate != self._told_rate:
            self._told_rate = self.rate
            self._emit("rate_changed", self.rate, now)
        until = rule.paused_until
        if until > now and until > self._told_pause:
            self._told_pause = until
            self._paused_at = self._paused_at if self._paused_at is not None else now
            self._emit("paused", until - now, now)

    def tell_wait(self, now: float, at: float) -> None:
        """Its first waiter waits for quota until ``at``: told once as a wait begins for
        calls that arrived (a queue that moves on is no news)."""
        if self._untold:  # (an unmetered pool never waits for quota)
            self._untold = False
            if at > self._told_wait:  # not the wait already told
                self._told_wait = at
                self._emit("waiting", at - now, now)

    def quota(self, now: float, rule: Rule | None = None, *, shared: bool = False) -> PoolQuota:
        """What is left of this pool's quota at ``now``, as this process sees it, or as
        ``rule`` does (``shared``: the shared one, read from Redis at its ``now``)."""
        rule, period = rule or self._rule, self._scheduler.period
        if rule is None:
            return PoolQuota(self.name, math.inf, self.configured, period, 0, None, 0.0)
        used, left, at = rule.usage(now)  # at: the pause's end at the earliest
        return PoolQuota(
            pool=self.name,
            limit=rule.rate * self._per_period,
            configured=self.configured,
            period=period,
            used=used,
            left=left,
            next_start_in=at - now,
            paused_for=max(0.0, rule.paused_until - now),
            shared=shared,
        )

    def fail(self, error: Exception) -> None:
        """Fail every waiter, each with its own copy of ``error`` (later calls may still
        succeed)."""
        for waiter in self.line.drain():
            if not waiter.future.done():
                copy = type(error).__new__(type(error))  # not __init__: arguments vary
                copy.__dict__.update(error.__dict__)
                copy.args = error.args
                waiter.future.set_exception(copy)


class Scheduler:
    """The pools of one client: ``default``, ``expensive`` and ``unmetered``.

    Args:
        rate_limits: the quota each metered pool keeps to.
        max_concurrency: requests in flight at most, over every pool.
        clock: the client's clock.
        emit: the client's event stream.
        shared: share the metered pools with every process on the same account, through
            Redis (``None``: this process alone).
        account: whose quota a shared one is (``SharedQuota.account`` wins): a name, or a
            function returning the token whose hash names it.
    """

    def __init__(
        self,
        rate_limits: RateLimits,
        *,
        max_concurrency: int,
        clock: Clock,
        emit: OnEvent = unheard,
        shared: SharedQuota | None = None,
        account: str | Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        whole_number("max_concurrency", max_concurrency)
        self.clock, self.emit, self.period = clock, emit, rate_limits.period
        self.max_concurrency = max_concurrency
        self.in_flight = 0
        self.closed = False
        self.arrivals = itertools.count()  # numbers waiters over every pool
        self._timer: asyncio.Task[None] | None = None
        self._timer_at = math.inf
        whose = (shared.account or account or "") if shared is not None else ""
        self.shared = (
            SharedLimits(shared, whose, clock, self.pump, emit, max_concurrency) if shared else None
        )
        names = ("default", "expensive", "unmetered")
        self._pools = {name: Pool(self, name, rate_limits) for name in names}

    def pool(self, name: PoolName | None) -> Pool:
        """The pool a request draws on; ``None``: the unmetered one."""
        return self._pools["unmetered" if name is None else name]

    def full(self) -> bool:
        """Whether every client-wide slot is taken."""
        return self.in_flight >= self.max_concurrency

    def idle(self) -> bool:
        """Whether nobody waits in any pool."""
        return not any(pool.line for pool in self._pools.values())

    def pump(self) -> None:
        """Let through every waiter that may start now; set the timer for the rest."""
        if self.closed:
            return
        now = self.clock.now()
        pools = self._pools.values()
        while not self.full():
            best: tuple[tuple[bool, int], Pool] | None = None
            for pool in pools:
                head = pool.ready(now)
                if head is not None and (best is None or (head.bulk, head.seq) < best[0]):
                    best = (head.bulk, head.seq), pool
            if best is None:
                break
            best[1].grant(now)
        wake = math.inf
        if not self.full():
            for pool in pools:
                at = pool.wake(now)
                if now < at < math.inf:
                    pool.tell_wait(now, at)
                wake = min(wake, at)
        if wake == math.inf and self._timer is not None and self.idle():
            self._timer.cancel()  # nobody waits: nothing to wake for
            self._timer, self._timer_at = None, math.inf
        elif wake < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = wake
            self._timer = asyncio.ensure_future(self._sleep_until(wake))

    async def _sleep_until(self, when: float) -> None:
        await self.clock.sleep(when - self.clock.now())
        self._timer, self._timer_at = None, math.inf
        self.pump()

    async def quota(self) -> Quota:
        """What is left of each metered pool's quota now: this process's view, or (with
        a shared quota) every process's, read from Redis."""
        now = self.clock.now()
        pools = self._pools["default"], self._pools["expensive"]
        views = [pool.quota(now) for pool in pools]  # each read from Redis if it answers
        for i, pool in enumerate(pools):
            if self.shared is not None and (read := await self.shared.read(pool.name)):
                views[i] = pool.quota(read[1], read[0], shared=True)
        return Quota(default=views[0], expensive=views[1])

    async def aclose(self) -> None:
        """Close: every waiting call raises :class:`ClientClosedError`, as does every
        later ``acquire``; requests already let through run on. Idempotent."""
        self.closed = True
        for pool in self._pools.values():
            pool.fail(ClientClosedError("the client was closed while this call waited"))
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            await asyncio.wait((timer,))
        if self.shared is not None:
            await self.shared.aclose()
