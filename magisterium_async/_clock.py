"""Clocks: where the scheduler and the retry loop read the time and wait, and deadlines on them.

:class:`LoopClock` is the real one. :class:`VirtualClock` runs minute-long quotas in
milliseconds: time stands still until a test moves it, and sleepers wake in time order.
:func:`within` bounds work by a deadline on any clock, so the same code bounds real calls
and virtual-time tests.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

__all__ = ["Clock", "LoopClock", "VirtualClock", "within"]

# A bound on the loop iterations of one settle, so a task that busy-yields cannot hang a test.
_SETTLE_LIMIT = 10_000
# Iterations of one settle on loops that do not expose their run queue (uvloop).
_SETTLE_FALLBACK = 100


class Clock(Protocol):
    """What the client needs of time: a monotonic ``now()`` in seconds and ``sleep()``."""

    def now(self) -> float:
        """Monotonic seconds; only differences between two readings mean anything."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return after ``seconds`` have passed on this clock (at once for ``<= 0``)."""
        ...


class LoopClock:
    """The default clock: the running event loop's time, and :func:`asyncio.sleep`."""

    __slots__ = ()

    def now(self) -> float:
        """The running loop's time (``time.monotonic()`` when no loop runs)."""
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:
            return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep(seconds)``; just yield for ``<= 0``."""
        await asyncio.sleep(seconds if seconds > 0 else 0)

    def __repr__(self) -> str:
        return "LoopClock()"


class VirtualClock:
    """Deterministic virtual time on a real asyncio loop, for tests; nothing really waits.

    Time stands still until :meth:`advance` or :meth:`run_until_idle` moves it. Sleepers wake
    one at a time in deadline order (ties: in the order they went to sleep), and the loop
    runs every task that can run before the next one wakes, so a test reads the same on
    every run::

        clock = VirtualClock()
        client = AsyncMagisterium(..., clock=clock)   # its transport faked in memory
        tasks = [asyncio.create_task(client.search(q)) for q in queries]
        await clock.run_until_idle()      # a whole hour of quota, in milliseconds
        results = await asyncio.gather(*tasks)

    "Can run" means: has a callback ready in the loop. Real I/O and real timers (a socket,
    ``asyncio.sleep(1)``) are not waited for, so pair it with an in-memory transport
    (``testing.MockTransport``), not a server on a socket. ``sleep(math.inf)`` sleeps until
    cancelled. One clock serves one event loop.
    """

    __slots__ = ("_now", "_seq", "_sleepers")

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._seq = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []

    def now(self) -> float:
        """The virtual time, in seconds."""
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Wait until the clock has been moved ``seconds`` forward; just yield for ``<= 0``."""
        if not seconds > 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), future))
        await future  # a cancelled sleeper's future is cancelled too, and skipped when due

    @property
    def sleepers(self) -> int:
        """How many tasks are asleep on this clock."""
        return sum(1 for _, _, future in self._sleepers if not future.done())

    @property
    def next_wakeup(self) -> float | None:
        """The deadline of the next sleeper to wake, or ``None`` when nobody sleeps."""
        self._drop_cancelled()
        return self._sleepers[0][0] if self._sleepers else None

    async def advance(self, seconds: float) -> None:
        """Move time ``seconds`` forward, waking every sleeper due by then, in order.

        A sleeper woken on the way that goes back to sleep within the interval wakes again
        before this returns; time ends exactly ``seconds`` later.
        """
        if not seconds >= 0:
            raise ValueError(f"cannot move time backwards or by {seconds!r}")
        target = self._now + seconds
        await self._settle()
        while (deadline := self.next_wakeup) is not None and deadline <= target:
            await self._wake_next()
        self._now = target
        await self._settle()

    async def run_until_idle(self, *, max_wakeups: int = 1_000_000) -> None:
        """Move time forward, sleeper by sleeper, until nobody sleeps (or sleeps forever).

        Raises ``RuntimeError`` after ``max_wakeups`` wake-ups: something keeps sleeping.
        """
        await self._settle()
        for _ in range(max_wakeups):
            deadline = self.next_wakeup
            if deadline is None or math.isinf(deadline):
                return
            await self._wake_next()
        raise RuntimeError(f"VirtualClock: still busy after {max_wakeups} wake-ups")

    async def _wake_next(self) -> None:
        deadline, _, future = heapq.heappop(self._sleepers)
        self._now = max(self._now, deadline)
        future.set_result(None)
        await self._settle()

    def _drop_cancelled(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)

    async def _settle(self) -> None:
        # asyncio has no public "is the loop idle?"; its run queue tells, where it exists.
        ready = getattr(asyncio.get_running_loop(), "_ready", None)
        rounds = _SETTLE_LIMIT if ready is not None else _SETTLE_FALLBACK
        for _ in range(rounds):
            await asyncio.sleep(0)
            if ready is not None and not ready:
                return

    def __repr__(self) -> str:
        return f"VirtualClock(now={self._now!r}, sleepers={self.sleepers})"


T = TypeVar("T")


async def within(
    clock: Clock, seconds: float, work: Awaitable[T], on_timeout: Callable[[], BaseException]
) -> T:
    """``await work`` in this task, cancelled once ``seconds`` pass on ``clock``; then
    ``on_timeout()`` is raised in its place.

    Like ``asyncio.timeout`` (which reads only the loop's clock): a sleep on ``clock`` runs
    beside the work and cancels this task when it ends first. A cancellation from outside
    is passed on as it is.
    """
    if math.isinf(seconds):
        return await work
    current = asyncio.current_task()
    assert current is not None, "within() runs inside a task"
    fired = False

    def expire(timer: asyncio.Future[None]) -> None:
        nonlocal fired
        if not timer.cancelled() and timer.exception() is None and not current.done():
            fired = True
            current.cancel()

    timer = asyncio.ensure_future(clock.sleep(seconds))
    timer.add_done_callback(expire)
    try:
        return await work
    except asyncio.CancelledError:
        if not fired:
            raise
        # uncancel() (3.11+) tells whether a cancellation from outside came as well.
        if hasattr(current, "uncancel") and current.uncancel() > 0:
            raise
    finally:
        timer.remove_done_callback(expire)
        timer.cancel()
    # Raised here, outside the except block: the CancelledError is no part of the story.
    raise on_timeout()
