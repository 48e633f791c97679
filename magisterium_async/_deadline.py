"""Deadlines on a :class:`Clock`: the same code bounds real calls and virtual-time tests."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ._clock import Clock

__all__ = ["within"]

T = TypeVar("T")


async def within(
    clock: Clock, seconds: float, work: Awaitable[T], on_timeout: Callable[[], BaseException]
) -> T:
    """``await work``, or cancel it once ``seconds`` pass on ``clock`` and raise
    ``on_timeout()``.

    ``work`` runs as a task of its own, raced against a sleep on ``clock``; a result that
    is ready when the time is up still wins. Cancelling the caller cancels both.
    """
    if math.isinf(seconds):
        return await work
    task = asyncio.ensure_future(work)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait((task, timer), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        timer.cancel()
        await asyncio.gather(task, timer, return_exceptions=True)
        raise
    if not task.done():
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        if task.cancelled():
            raise on_timeout()
    timer.cancel()
    await asyncio.gather(timer, return_exceptions=True)
    return task.result()
