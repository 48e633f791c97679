"""A one-line status on stderr while a command waits: on a terminal only, never on a pipe.

A call may wait minutes: for its quota, for the server's answer, for a retry after a
failure or a 429. :class:`Watch` follows the call through the client's events (its
``on_event``) and the line says which wait, and until when, so waiting does not look like
hanging; with ``-v`` each wait is also one log line, on a pipe too, said by the library's
log from the same events (a retry) or here (a wait for quota). Plain ANSI, so it needs no
rich.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from magisterium_async._clock import Clock, LoopClock
from magisterium_async._events import PoolEvent, RetryEvent

if TYPE_CHECKING:
    from magisterium_async._client import AsyncMagisterium

__all__ = ["Watch", "at_clock", "duration", "status_line", "waiting_text", "watching"]

logger = logging.getLogger("magisterium_async.cli")

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


def at_clock(seconds: float, wall: Callable[[], float] = time.time) -> str:
    """The local clock time ``seconds`` from now: ``14:03:05``."""
    return time.strftime("%H:%M:%S", time.localtime(wall() + seconds))


def waiting_text(seconds: float, wall: Callable[[], float] = time.time) -> str:
    """``waiting for quota: next request in 12s (at 14:03:05)``, the clock time local."""
    at = at_clock(seconds, wall)
    return f"waiting for quota: next request in {duration(max(seconds, 1.0))} (at {at})"


def _failure(event: RetryEvent) -> str:
    """What failed, without the method: the command says what it does ("message/send
    timed out after 30 s" -> "timed out after 30 s")."""
    text = " ".join(event.message.split())
    for prefix in (f"{event.method}: ", f"{event.method} failed: ", f"{event.method} "):
        if text.startswith(prefix):
            return text[len(prefix) :]
    return text


@dataclass(frozen=True)
class _Retry:
    reason: str
    at: float  # on the loop's clock
    number: int | None  # the retry's number after a failure; None after a 429


class Watch:
    """What the one call of a command is doing, for its status line and for ``-v``.

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
        self._retry: _Retry | None = None
        self._doing: tuple[str, float | None] | None = None  # before a request: a refresh
        self._quota_until: float | None = None  # the end of the wait for quota under way

    def attach(self, client: AsyncMagisterium) -> None:
        """The client whose settings the line reads."""
        self._client = client

    def on_event(self, event: PoolEvent) -> None:
        """The client's ``on_event``: a request sent starts an attempt; a retry, a wait
        for quota or a refresh of the sign-in is what the line says until it is over."""
        kind = event.kind
        if kind == "sent":
            self.attempts += 1
            self._sent_at = event.time
            self._quota_until = None
            self._doing = None
        elif isinstance(event, RetryEvent):
            if event.retry == 0:
                told = event.retry_after
                asks = ""
                if told is not None and math.isfinite(told):
                    asks = f"; it asks to wait {duration(told)}"
                reason, number = f"rate limited by the service (HTTP 429{asks})", None
            else:
                reason, number = _failure(event) or "failed", event.retry
            self._retry = _Retry(reason, event.time + event.value, number)
        elif kind == "waiting" and event.pool == self.pool:
            self._quota_until = event.time + event.value
            if event.value > 1.0:
                logger.info("%s: %s", self.label, waiting_text(event.value, self._wall))
        elif kind == "refreshing":
            self._doing = ("refreshing the sign-in", event.time + event.value)
        else:
            return
        self.changed.set()

    @property
    def _max_attempts(self) -> int:
        assert self._client is not None
        return self._client.retry_policy.max_retries + 1

    def text(self) -> str:
        """The status now: the wait for a retry, for quota, or for the server's answer."""
        now = self._clock.now()
        retry = self._retry
        if retry is not None and now < retry.at:
            left = retry.at - now
            if retry.number is None:
                which = "next try"
            else:
                which = f"retry {retry.number} of {self._max_attempts - 1}"
            when = f"{which} at {at_clock(left, self._wall)} (in {duration(max(left, 1.0))})"
            return f"{self.label}: {when}, after: {retry.reason}"
        if self._doing is not None:
            status, until = self._doing
            if until is None:
                return f"{self.label}: {status}…"
            return (
                f"{self.label}: {status}, until {at_clock(until - now, self._wall)} at the latest"
            )
        client = self._client
        if client is None:
            return f"{self.label}…"
        quota = self._quota_until
        if quota is not None and now < quota:
            # When first: a narrow terminal cuts the end of the line.
            after = f", after: {retry.reason}" if retry is not None else ""
            return f"{self.label}: {waiting_text(quota - now, self._wall)}{after}"
        if self._sent_at is None:
            return f"{self.label}…"
        timeout = client.timeouts.for_pool(self.pool)
        ends = at_clock(self._sent_at + timeout - now, self._wall)
        return (
            f"{self.label}… {duration(now - self._sent_at)}, attempt {self.attempts} of "
            f"{self._max_attempts}, times out at {ends}"
        )


@contextlib.asynccontextmanager
async def watching(
    watch: Watch, *, stream: TextIO | None = None, interval: float = 0.5
) -> AsyncIterator[None]:
    """While the block runs: ``watch``'s status line on ``stream`` (stderr) if it is a
    terminal."""
    out = stream if stream is not None else sys.stderr
    if not out.isatty():
        yield
        return
    async with status_line(watch.text, stream=out, interval=interval, changed=watch.changed):
        yield


def _columns(stream: TextIO) -> int:
    """The width of the terminal ``stream`` writes to (stdout may be a pipe while stderr
    is a wide terminal): ``$COLUMNS`` first, as :func:`shutil.get_terminal_size`, else 80."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 80


@contextlib.asynccontextmanager
async def status_line(
    text: Callable[[], str],
    *,
    stream: TextIO | None = None,
    interval: float = 0.5,
    changed: asyncio.Event | None = None,
) -> AsyncIterator[None]:
    """Show ``text()`` on ``stream`` (stderr), refreshed every ``interval`` seconds and
    whenever ``changed`` is set, while the block runs, and clear it after; nothing unless
    ``stream`` is a terminal."""
    out = stream if stream is not None else sys.stderr
    if not out.isatty():
        yield
        return
    width = max(_columns(out) - 1, 20)

    woken = changed if changed is not None else asyncio.Event()
    loop = asyncio.get_running_loop()

    async def refresh() -> None:
        while True:  # a display, not a synchronisation: it only repaints
            woken.clear()
            out.write(_CLEAR + text()[:width])
            out.flush()
            # At the next change, or after ``interval`` at the latest.
            timer = loop.call_later(interval, woken.set)
            try:
                await woken.wait()
            finally:
                timer.cancel()

    task = loop.create_task(refresh())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        out.write(_CLEAR)
        out.flush()
