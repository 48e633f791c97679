"""Deadlines on a :class:`Clock`: the same code bounds real calls and virtual-time tests."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import TypeVar

from magisterium_async._clock import Clock

__all__ = ["within"]

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
