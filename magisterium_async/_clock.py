"""Clocks: where the scheduler and the retry loop read the time and wait, and deadlines on them.

:class:`LoopClock` is the real one; ``testing.VirtualClock`` runs minute-long quotas in
milliseconds. :func:`within` bounds work by a deadline on any clock, so the same code
bounds real calls and virtual-time tests.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar


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


T = TypeVar("T")


async def within(
    clock: Clock, seconds: float, work: Awaitable[T], on_timeout: Callable[[], BaseException]
) -> T:
    """``await work`` in this task, cancelled once ``seconds`` pass on ``clock``; then
    ``on_timeout()`` is raised in its place.

    Like ``asyncio.timeout`` (which reads only the loop's clock): a sleep on ``clock`` runs
    beside the work and cancels this task when it ends first. A cancellation from outside
    is passed on as it is, even one that comes as the work ends (where ``asyncio.wait_for``
    before Python 3.12 lost it, and a cancelled call went on to send its request).
    """
    if math.isinf(seconds):
        return await work
    current = asyncio.current_task()
    assert current is not None, "within() runs inside a task"
    fired = over = False

    def expire(timer: asyncio.Future[None]) -> None:
        nonlocal fired
        # ``over``: the timer ended in the same turn of the loop as the work, after it; its
        # callback was scheduled before it could be removed, and must not cancel the
        # caller once it has gone on past this function.
        if not over and not timer.cancelled() and timer.exception() is None:
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
        over = True
        timer.remove_done_callback(expire)
        timer.cancel()
    # Raised here, outside the except block: the CancelledError is no part of the story.
    raise on_timeout()
