"""A pool: one quota's waiting line, concurrency cap, pause and first-round hold.

The pool owns the machinery; the decisions are made elsewhere: the judge (``_judge.py``)
says what a 429 means, the limiter (``_limiter.py``) when the next start may happen, the
line (``_lines.py``) whose turn it is. A request holds a :class:`Permit` from its start
until it leaves ``slot()``; while it waits it holds nothing (no slot under any cap, and
with a remote gate no admission either: the pool asks the gate for the line, and the
admission goes to whoever is first when it comes).
"""

from __future__ import annotations

import asyncio
import logging
import math
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING

from magisterium_async._errors import ClientClosedError
from magisterium_async._ratelimit._admissions import Admissions
from magisterium_async._ratelimit._judge import Judge, Verdict
from magisterium_async._ratelimit._limiter import Limiter, RemoteGate
from magisterium_async._ratelimit._lines import Priority, Waiter, WaitingLine
from magisterium_async._ratelimit._log import Start
from magisterium_async._ratelimit._round import FirstRound
from magisterium_async._ratelimit._stats import EventKind, PoolEvent, PoolStats

if TYPE_CHECKING:
    from magisterium_async._ratelimit._scheduler import Scheduler

__all__ = ["Permit", "Pool"]

logger = logging.getLogger("magisterium_async.ratelimit")


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
        now (the request itself may wait longer before it retries). The pool's judge
        decides what that means for everyone else."""
        if math.isnan(retry_after) or retry_after < 0 or math.isinf(retry_after):
            raise ValueError(f"retry_after must be a finite number >= 0, got {retry_after!r}")
        self._pool.rate_limited(self._start, retry_after)

    def retried(self) -> None:
        """Count a retry of this request in the pool's stats."""
        self._pool.retried()

    def release(self) -> None:
        """The request is over (idempotent); ``slot()`` calls it on the way out."""
        if not self._released:
            self._released = True
            self._pool.release(self._start)


class _Slot(AbstractAsyncContextManager["Permit"]):
    __slots__ = ("_key", "_permit", "_pool", "_priority")

    def __init__(self, pool: Pool, priority: Priority, key: str | None) -> None:
        self._pool = pool
        self._priority: Priority = priority
        self._key = key
        self._permit: Permit | None = None

    async def __aenter__(self) -> Permit:
        self._permit = await self._pool.acquire(self._priority, self._key)
        return self._permit

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._permit is not None:
            self._permit.release()


class Pool:
    """One quota: a limiter (or none: unmetered), an optional remote gate, a cap on requests
    in flight, a pause, a judge and a waiting line."""

    def __init__(
        self,
        scheduler: Scheduler,
        name: str,
        limiter: Limiter | None,
        configured: float,
        concurrency: int | None,
        gate: RemoteGate | None = None,
    ) -> None:
        self.name = name
        self._scheduler = scheduler
        self._limiter = limiter
        self._admissions = Admissions(gate) if gate is not None else None
        self._configured = configured
        self._cap = concurrency if concurrency is not None else math.inf
        self.line = WaitingLine()
        self.judge = Judge()
        self._in_flight = 0
        self._sent = self._rate_limited = self._retries = 0
        self._pause_start = self._pause_until = -math.inf
        self._paused = False
        self._paused_total = 0.0
        self._rate = limiter.rate if limiter is not None else math.inf
        # The first round: what a metered pool starts before its first answer. Once that
        # answer is in, the next starts wait for the rest of the round (see _round.py).
        self._round: FirstRound | None = FirstRound() if limiter is not None else None
        self._pump_due = False  # a pump is scheduled for the end of this turn of the loop

    def slot(
        self, priority: Priority = "interactive", key: str | None = None
    ) -> AbstractAsyncContextManager[Permit]:
        """``async with pool.slot() as permit:``, the request's turn; leaving frees the slot.

        ``priority`` and ``key`` (a fairness key) place it in the line (see ``_lines.py``).
        Raises :class:`ClientClosedError` if the scheduler is (or gets) closed meanwhile. A
        waiter that is cancelled gives its place back.
        """
        return _Slot(self, priority, key)

    # Entering and leaving -------------------------------------------------------------

    async def acquire(self, priority: Priority, key: str | None) -> Permit:
        """Wait for this request's turn; see :meth:`slot`."""
        scheduler = self._scheduler
        if scheduler.closed:
            raise ClientClosedError("the client is closed")
        now = scheduler.clock.now()
        paced = key is not None and self._limiter is not None
        if (
            not paced
            and scheduler.in_flight < scheduler.max_concurrency
            and self._admissions is None
            and scheduler.idle()
            and self._may_start(now)
        ):
            # Nobody waits and the pool may start now: no place in line to keep.
            return self._sent_now(self._start_now(now), now)
        waiter = Waiter(scheduler.next_seq(), now, priority, key)
        self.line.push(waiter)
        if paced:
            self._pump_soon()  # calls that arrive together are in line when pacing counts
        else:
            scheduler.pump()
        while True:
            try:
                permit = await waiter.future
            except asyncio.CancelledError:
                self._abandon(waiter)
                raise
            judge = self.judge
            if scheduler.closed or (
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
            scheduler.pump()
        return self._sent_now(permit, waiter.since)

    def _sent_now(self, permit: Permit, since: float) -> Permit:
        self._sent += 1
        self._emit("sent", permit.started - since)
        return permit

    def release(self, start: Start) -> None:
        """A request let through is over: free its slot, tell the judge and the gate."""
        start.done = True
        self._in_flight -= 1
        if self.judge.suspect is not None:
            verdict = self.judge.on_answer(start)
            if verdict is not None:
                self._apply(verdict)
        if self._round is not None and self._round.answered(
            start.time, self._scheduler.clock.now()
        ):
            self._round = None
        if self._admissions is not None:
            self._admissions.answered(start)
        self._scheduler.release_slot()

    def _give_back(self, permit: Permit) -> None:
        """A permit let through but never used: its start is forgotten, its slot freed."""
        start = permit._start
        if self._limiter is not None:
            self._limiter.forget(start)
        if self.judge.check is start:
            self.judge.check = None  # not answered: the next start checks instead
        permit._released = True
        start.done = True
        self._in_flight -= 1
        self._scheduler.in_flight -= 1

    def _abandon(self, waiter: Waiter) -> None:
        future = waiter.future
        if not future.done() or future.cancelled():
            self.line.remove(waiter)
        elif future.exception() is None:
            # Let through, then cancelled before it could send: give the permit back.
            self._give_back(future.result())
        self._scheduler.pump()

    # Whose turn, and when --------------------------------------------------------------

    def head(self) -> Waiter | None:
        """The waiter whose turn is next here, or ``None``."""
        return self.line.head()

    def ready(self, now: float) -> Waiter | None:
        """The pool's head, if it may start now."""
        head = self.line.head()
        if head is None or not self._may_start(now):
            return None
        admissions = self._admissions
        if admissions is None or admissions.ready(
            lambda: self._gate_line(head), self._scheduler.pump
        ):
            return head
        return None

    def _gate_line(self, head: Waiter) -> tuple[Priority, int]:
        """What the gate is told of the line: its first priority, and how many calls
        could start now (the caps bound what this process would take)."""
        first, scheduler = self.line.head(), self._scheduler
        room = min(self._cap - self._in_flight, scheduler.max_concurrency - scheduler.in_flight)
        waiting = self.line.waiting()
        return (first or head).priority, max(1, int(room) if room < waiting else waiting)

    def _may_start(self, now: float) -> bool:
        """Whether a request may start now (waiters aside): cap, pause, check, round,
        limiter."""
        if self._in_flight >= self._cap:
            return False
        if self._paused and now >= self._pause_until:
            self._paused = False
            logger.debug("pool %s resumed", self.name)
            self._emit("resumed", self._pause_until - self._pause_start, self._pause_until)
        if now < self._pause_until:
            return False
        held, expired = self.judge.holds(now)
        if expired is not None:
            self._apply(expired)
        if held:
            return False  # the check goes alone
        if self._round is not None and self._round_holds(now):
            return False
        limiter = self._limiter
        if limiter is None:
            return True
        at = limiter.next_start(now)
        self._check_rate()
        return at <= now and (not self.line.keyed() or self._paced_start(now) <= now)

    def wake_time(self, now: float) -> float:
        """When time alone next lets this pool's first waiter through (``now``: it does)."""
        at = self._limiter.next_start(now) if self._limiter is not None else now
        if self._limiter is not None and self.line.keyed():
            at = max(at, self._paced_start(now))
        if self.judge.check is not None:
            at = max(at, self.judge.suspect_until)
        if self._round is not None:
            at = max(at, self._round.held_until())  # until the round is in, at the latest
        return max(at, self._pause_until, now)

    def _paced_start(self, now: float) -> float:
        """When pacing (``_pacing.py``) lets the next start happen, fairness keys waiting."""
        assert self._limiter is not None
        return self._limiter.paced_start(now, self.line.held())

    def _pump_soon(self) -> None:
        """Pump once at the end of this turn of the event loop."""
        if not self._pump_due:
            self._pump_due = True
            asyncio.get_running_loop().call_soon(self._pump_now)

    def _pump_now(self) -> None:
        self._pump_due = False
        self._scheduler.pump()

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
        self._scheduler.in_flight += 1
        return Permit(self, start)

    # The first round -------------------------------------------------------------------

    def _round_holds(self, now: float) -> bool:
        """Whether starts wait for the first round's answers (see ``_round.py``)."""
        assert self._round is not None
        holds = self._round.holds(now)
        if holds is None:
            self._round = None
            return False
        return holds

    # 429s ------------------------------------------------------------------------------

    def rate_limited(self, start: Start, wait: float) -> None:
        """A 429 to ``start``, its window ending ``wait`` seconds from now: ask the judge,
        apply its verdicts."""
        now = self._scheduler.clock.now()
        start.limited, start.wait = True, wait
        self._rate_limited += 1
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

    def _apply(self, verdict: Verdict) -> None:
        """The pool's part of a verdict (a pause), then the limiter's (what it learns)."""
        if verdict.pause:
            self._pause(verdict.at, verdict.window_end, verdict.wait)
        if verdict.kind in ("late", "agreeing") or self._limiter is None:
            return
        self._limiter.learn(verdict)
        self._check_rate()

    def retried(self) -> None:
        """Count a retry."""
        self._retries += 1
        self._emit("retried", 1.0)

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
        logger.info("pool %s paused for %.3f s after a 429", self.name, wait)
        self._emit("paused", wait, now)

    # What it tells ---------------------------------------------------------------------

    def _check_rate(self) -> None:
        rate = self._limiter.rate if self._limiter is not None else math.inf
        if rate != self._rate:
            self._rate = rate
            self._emit("rate_changed", rate)

    def _emit(self, kind: EventKind, value: float, time: float | None = None) -> None:
        callback = self._scheduler.on_event
        if callback is None:
            return
        when = self._scheduler.clock.now() if time is None else time
        try:
            callback(PoolEvent(kind, self.name, when, value))
        except Exception:
            logger.warning("on_event callback failed on %s event; ignored", kind, exc_info=True)

    def stats(self, now: float) -> PoolStats:
        """A snapshot of this pool's counters."""
        waiting = self.line.waiting()
        return PoolStats(
            name=self.name,
            sent=self._sent,
            rate_limited=self._rate_limited,
            retries=self._retries,
            paused_seconds=self._paused_total - max(0.0, self._pause_until - now),
            current_rate=self._limiter.rate if self._limiter is not None else math.inf,
            configured_rate=self._configured,
            in_flight=self._in_flight,
            waiting=waiting,
            next_start_in=self.wake_time(now) - now if waiting else 0.0,
        )

    async def aclose(self) -> None:
        """Fail every waiter, stop asking the gate, close the limiter."""
        for waiter in self.line.drain():
            if not waiter.future.done():
                waiter.future.set_exception(
                    ClientClosedError("the client was closed while this call waited")
                )
        if self._admissions is not None:
            await self._admissions.aclose()
        if self._limiter is not None:
            await self._limiter.aclose()

    def __repr__(self) -> str:
        return f"<Pool {self.name} rate={self._rate:g}>"
