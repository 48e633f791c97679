"""Work a cancellation waits for: the harvest's writes, to its output and to its state.

An anyio ``CancelScope(shield=True)`` holds off only anyio's own cancellation: asyncio's
``Task.cancel()`` (the command line's Ctrl-C, ``asyncio.timeout``, a ``TaskGroup``) goes
through it, and the caller of a write still running in a worker thread would go on as if
it had not been made: its bytes not counted, its documents not recorded as delivered, the
next write begun beside it. :func:`to_the_end` holds off both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

import anyio

T = TypeVar("T")


async def to_the_end(work: Awaitable[T]) -> T:
    """Await ``work`` to its end (in a task of its own) whatever cancels the caller, and
    return what it returns: as in an anyio shielded scope, a cancellation is delivered at
    the caller's next ``await``, however many times ``Task.cancel()`` was called."""
    task = asyncio.ensure_future(work)
    cancelled = False
    with anyio.CancelScope(shield=True):  # anyio's cancellation waits until it is left
        while not task.done():
            try:
                await asyncio.wait([task])  # cancelled, it leaves the task running
            except asyncio.CancelledError:
                cancelled = True
    if cancelled:  # Task.cancel() again, counted once (asyncio.timeout counts them)
        caller = asyncio.current_task()
        assert caller is not None
        if hasattr(caller, "uncancel"):  # Python 3.11+
            caller.uncancel()
        caller.cancel()
    return task.result()
