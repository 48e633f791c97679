"""A one-line status on stderr while a command waits: on a terminal only, never on a pipe.

A call may wait minutes: for its quota, for the server's answer, for a retry after a
failure or a 429. :class:`Watch` follows the call (the client's ``on_event``, the retry
loop's log) and the line says which wait, and until when, so waiting does not look like
hanging; with ``-v`` each wait is also one log line, on a pipe too. Plain ANSI, so it
needs no rich.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from magisterium_async._clock import Clock, LoopClock
from magisterium_async._ratelimit import PoolEvent

if TYPE_CHECKING:
    from magisterium_async._client import AsyncMagisterium

__all__ = ["Watch", "at_clock", "duration", "status_line", "waiting_text", "watching"]

logger = logging.getLogger("magisterium_async.cli")
HEARD = ("magisterium_async.retry", "magisterium_async.auth")  # what the line is told by

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


# "message/send timed out after 30 s" -> "timed out after 30 s": the command says what it does.
_METHOD = re.compile(r"^[a-z]+/[a-zA-Z]+:? (failed: )?")


@dataclass(frozen=True)
class _Retry:
    reason: str
    at: float  # on the loop's clock
    number: int | None  # the retry's number after a failure; None after a 429


class Watch:
    """What the one call of a command is doing, for its status line and for ``-v``.

    ``label`` says what the command does (``searching``); ``pool`` is the call's
    (``default``, ``expensive``, ``unmetered``). Give :meth:`on_event` to the client as
    its ``on_event``, then :meth:`attach` the client; :func:`watching` hears the retry
    loop's log meanwhile.
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
        self._waiting = False  # in a wait for quota, already told to the log

    def attach(self, client: AsyncMagisterium) -> None:
        """The client whose pools and settings the line reads."""
        self._client = client

    def on_event(self, event: PoolEvent) -> None:
        """The client's ``on_event``: a request sent starts an attempt."""
        if event.kind == "sent":
            self.attempts += 1
            self._sent_at = event.time
            self._waiting = False
            self._doing = None
            self.changed.set()

    def on_record(self, record: logging.LogRecord) -> None:
        """A record of the retry loop (a retry to come, in ``retry_in`` seconds) or of the
        sign-in (a ``status``, for at most ``wait_for`` seconds: a refresh, a wait for
        another process's)."""
        now = self._clock.now()
        status = getattr(record, "status", None)
        if isinstance(status, str):
            wait_for = getattr(record, "wait_for", None)
            until = now + wait_for if isinstance(wait_for, (int, float)) else None
            self._doing = (status, until)
            self.changed.set()
            return
        delay = getattr(record, "retry_in", None)
        if not isinstance(delay, (int, float)):
            return
        self.changed.set()
        if hasattr(record, "retry_after"):
            told = record.retry_after
            usable = isinstance(told, (int, float)) and math.isfinite(told)
            asks = f"; it asks to wait {duration(told)}" if usable else ""
            self._retry = _Retry(f"rate limited by the service (HTTP 429{asks})", now + delay, None)
        else:
            reason = _METHOD.sub("", " ".join(str(getattr(record, "reason", "")).split()))
            self._retry = _Retry(reason or "failed", now + delay, getattr(record, "retry", None))

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
        pool = getattr(client.stats, self.pool)
        if pool.waiting and pool.next_start_in > 0:
            # When first: a narrow terminal cuts the end of the line.
            after = f", after: {retry.reason}" if retry is not None else ""
            return f"{self.label}: {waiting_text(pool.next_start_in, self._wall)}{after}"
        if self._sent_at is None:
            return f"{self.label}…"
        timeout = client.timeouts.for_pool(self.pool)
        ends = at_clock(self._sent_at + timeout - now, self._wall)
        return (
            f"{self.label}… {duration(now - self._sent_at)}, attempt {self.attempts} of "
            f"{self._max_attempts}, times out at {ends}"
        )

    def log_waits(self) -> None:
        """Say each wait for quota once, as it begins (INFO: ``-v`` shows it)."""
        client = self._client
        if client is None or not logger.isEnabledFor(logging.INFO):
            return
        pool = getattr(client.stats, self.pool)
        waiting = bool(pool.waiting and pool.next_start_in > 1.0)
        if waiting and not self._waiting:
            logger.info("%s: %s", self.label, waiting_text(pool.next_start_in, self._wall))
        self._waiting = waiting


class _Records(logging.Handler):
    def __init__(self, watch: Watch) -> None:
        super().__init__(logging.INFO)
        self.watch = watch

    def emit(self, record: logging.LogRecord) -> None:
        self.watch.on_record(record)


@contextlib.contextmanager
def _hearing(watch: Watch) -> Iterator[None]:
    """The retry loop's and the sign-in's records go to ``watch`` too, while the block
    runs (at INFO, whatever the loggers' levels: the line needs them, ``-v`` or not)."""
    handler = _Records(watch)
    loggers = [logging.getLogger(name) for name in HEARD]
    levels = [heard.level for heard in loggers]
    for heard in loggers:
        heard.addHandler(handler)
        if not heard.isEnabledFor(logging.INFO):
            heard.setLevel(logging.INFO)
    try:
        yield
    finally:
        for heard, level in zip(loggers, levels, strict=True):
            heard.removeHandler(handler)
            heard.setLevel(level)


@contextlib.asynccontextmanager
async def watching(
    watch: Watch, *, stream: TextIO | None = None, interval: float = 0.5
) -> AsyncIterator[None]:
    """While the block runs: ``watch``'s status line on ``stream`` (stderr) if it is a
    terminal, and each wait for quota logged once (for ``-v``)."""
    out = stream if stream is not None else sys.stderr
    shown = out.isatty()
    with _hearing(watch):
        if not shown and not logger.isEnabledFor(logging.INFO):
            yield
            return

        def text() -> str:
            watch.log_waits()
            return watch.text()

        async with status_line(
            text, stream=out, interval=interval, shown=shown, changed=watch.changed
        ):
            yield


@contextlib.asynccontextmanager
async def status_line(
    text: Callable[[], str],
    *,
    stream: TextIO | None = None,
    interval: float = 0.5,
    shown: bool | None = None,
    changed: asyncio.Event | None = None,
) -> AsyncIterator[None]:
    """Show ``text()`` on ``stream`` (stderr), refreshed every ``interval`` seconds and
    whenever ``changed`` is set, while the block runs, and clear it after; nothing unless
    ``stream`` is a terminal (``shown`` says otherwise: ``False`` still calls ``text()``,
    showing nothing)."""
    out = stream if stream is not None else sys.stderr
    if shown is None:
        shown = out.isatty()
        if not shown:
            yield
            return
    width = max(shutil.get_terminal_size().columns - 1, 20)

    woken = changed if changed is not None else asyncio.Event()
    loop = asyncio.get_running_loop()

    async def refresh() -> None:
        while True:  # a display, not a synchronisation: it only repaints
            woken.clear()
            line = text()
            if shown:
                out.write(_CLEAR + line[:width])
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
        if shown:
            out.write(_CLEAR)
            out.flush()
