"""A one-line status on stderr while a command waits: on a terminal only, never on a pipe.

``ask`` may wait minutes, for its quota or for the answer: the line says which (and until
when), so waiting does not look like hanging. Plain ANSI, so it needs no rich.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import TextIO

__all__ = ["duration", "status_line", "waiting_text"]

_CLEAR = "\r\x1b[2K"


def duration(value: float) -> str:
    """``42s``, ``3m07s``, ``2h05m``."""
    whole = round(value)
    if whole < 60:
        return f"{whole}s"
    minutes, rest = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{rest:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def waiting_text(seconds: float, wall: Callable[[], float] = time.time) -> str:
    """``waiting for quota: next request in 12s (at 14:03:05)``, the clock time local."""
    at = time.strftime("%H:%M:%S", time.localtime(wall() + seconds))
    return f"waiting for quota: next request in {duration(max(seconds, 1.0))} (at {at})"


@contextlib.asynccontextmanager
async def status_line(
    text: Callable[[], str], *, stream: TextIO | None = None, interval: float = 0.5
) -> AsyncIterator[None]:
    """Show ``text()`` on ``stream`` (stderr), refreshed every ``interval`` seconds, while
    the block runs, and clear it after; nothing unless ``stream`` is a terminal."""
    out = stream if stream is not None else sys.stderr
    if not out.isatty():
        yield
        return
    width = max(shutil.get_terminal_size().columns - 1, 20)

    async def refresh() -> None:
        while True:  # a display, not a synchronisation: it only repaints
            out.write(_CLEAR + text()[:width])
            out.flush()
            await asyncio.sleep(interval)

    task = asyncio.get_running_loop().create_task(refresh())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        out.write(_CLEAR)
        out.flush()
