"""A one-line status on stderr while a command waits: on a terminal only, never on a pipe.

A call may wait minutes: for its quota, for the server's answer, for a retry after a
failure or a 429. :class:`Watch` follows the call through the client's events and the
line says which wait, and until when, so waiting does not look like hanging; with ``-v``
each wait is also one log line, on a pipe too, said by the library's log from the same
events. Plain ANSI, so it needs no rich.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, TextIO

from magisterium_async._cli._output import at_clock, duration, waiting_text
from magisterium_async._clock import Clock, LoopClock
from magisterium_async._events import PoolEvent, RetryEvent

if TYPE_CHECKING:
    from magisterium_async._client import AsyncMagisterium

__all__ = ["Watch", "status_line"]

_CLEAR = "\r\x1b[2K"


class Watch:
    """What the one call of a command is doing, for its status line.

    ``label`` says what the command does (``searching``); ``pool`` is the call's
    (``default``, ``expensive``, ``unmetered``). Give :meth:`on_event` to the client as
    its ``on_event``, then :meth:`attach` the client.
    """

    def __init__(
        self,
        label: str,
        pool: str,
        *,
        clock: Clock | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.label = label
        self.pool = pool
        self.attempts = 0
        """Requests sent so far (a retry is one more)."""
        self.changed = asyncio.Event()
        """Set when what the line says changes, so it is repainted at once."""
        self._clock = clock or LoopClock()  # the client's: its events are timed on it
        self._wall = wall
        self._client: AsyncMagisterium | None = None
        self._sent_at: float | None = None
        self._until: dict[str, float] = {}  # the end of each wait under way, by kind
        self._retry: tuple[str, int | None] = ("", None)  # why, and the retry's number

    def attach(self, client: AsyncMagisterium) -> None:
        """The client whose settings the line reads."""
        self._client = client

    def on_event(self, event: PoolEvent) -> None:
        """The client's ``on_event``: a request sent starts an attempt; a retry, a wait
        for quota or a refresh of the sign-in is what the line says until it is over."""
        if event.kind == "sent":
            self.attempts += 1
            self._sent_at = event.time
            self._until.pop("waiting", None)
            self._until.pop("refreshing", None)
        elif isinstance(event, RetryEvent):
            if event.retry:  # after a failure; 0: after a 429
                message = " ".join(event.message.split())
                for prefix in (f"{event.method}: ", f"{event.method} failed: ", f"{event.method} "):
                    message = message.removeprefix(prefix)  # the label says what it does
                self._retry = (message or "failed", event.retry)
            else:
                told = event.retry_after
                asks = f"; it asks to wait {duration(told)}" if told and math.isfinite(told) else ""
                self._retry = (f"rate limited by the service (HTTP 429{asks})", None)
            self._until["retried"] = event.time + event.value
        elif event.kind == "refreshing" or (event.kind == "waiting" and event.pool == self.pool):
            self._until[event.kind] = event.time + event.value
        else:
            return
        self.changed.set()

    def text(self) -> str:
        """The status now: the wait for a retry, for a sign-in, for quota, or for the
        server's answer."""
        now, label, client = self._clock.now(), self.label, self._client
        tries = 1 if client is None else client.retry_policy.max_retries + 1
        left = {kind: until - now for kind, until in self._until.items() if until > now}
        why, number = self._retry
        if "retried" in left:
            which = "next try" if number is None else f"retry {number} of {tries - 1}"
            wait = left["retried"]
            when = f"{at_clock(wait, self._wall)} (in {duration(max(round(wait), 1))})"
            return f"{label}: {which} at {when}, after: {why}"
        if "refreshing" in left:
            until = at_clock(left["refreshing"], self._wall)
            return f"{label}: refreshing the sign-in, until {until} at the latest"
        if "waiting" in left:  # what it waits for first: a narrow terminal cuts the end
            after = f", after: {why}" if why else ""
            return f"{label}: {waiting_text(left['waiting'], self._wall)}{after}"
        if self._sent_at is None or client is None:
            return f"{label}…"
        ends = at_clock(self._sent_at + client.timeouts.for_pool(self.pool) - now, self._wall)
        took = duration(math.floor(now - self._sent_at))
        return f"{label}… {took}, attempt {self.attempts} of {tries}, times out at {ends}"


@contextlib.asynccontextmanager
async def status_line(
    text: Callable[[], str],
    *,
    changed: asyncio.Event | None = None,
    stream: TextIO | None = None,
    interval: float = 0.5,
) -> AsyncIterator[None]:
    """While the block runs: ``text()`` as one line on ``stream`` (stderr), repainted
    every ``interval`` seconds and whenever ``changed`` is set, then cleared; nothing
    unless ``stream`` is a terminal. The line is cut to ``$COLUMNS``, else to the width
    of the terminal it is written to (stdout may be a pipe), else to 80 columns."""
    out = stream if stream is not None else sys.stderr
    if not out.isatty():
        yield
        return
    try:
        columns = int(os.environ.get("COLUMNS", 0)) or os.get_terminal_size(out.fileno()).columns
    except (ValueError, OSError):
        columns = 0
    width = max((columns or 80) - 1, 20)
    woken = changed or asyncio.Event()
    loop = asyncio.get_running_loop()

    async def repaint() -> None:
        while True:  # a display, not a synchronisation: it only repaints
            woken.clear()
            out.write(_CLEAR + text()[:width])
            out.flush()
            timer = loop.call_later(interval, woken.set)
            try:
                await woken.wait()
            finally:
                timer.cancel()

    task = loop.create_task(repaint())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        out.write(_CLEAR)
        out.flush()
