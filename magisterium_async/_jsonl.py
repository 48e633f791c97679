"""``JsonlWriter``: documents appended to a JSON Lines file, durable in small batches.

Made for harvests that may be interrupted: on opening it cuts a line torn by a crash and
skips documents the file already holds, and it tells the harvest which documents are on
disk (``on_durable``) only after ``fsync``, so the harvest's state never runs ahead of the
file. Together they put every document in the file exactly once across resumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from types import TracebackType
from typing import BinaryIO

import anyio
import anyio.to_thread
import msgspec

from ._checks import non_negative_number, whole_number
from ._clock import Clock, LoopClock
from ._models import Document

__all__ = ["JsonlWriter"]

_ENCODER = msgspec.json.Encoder()


class _Id(msgspec.Struct):
    id: str


_ID = msgspec.json.Decoder(_Id)


def _open(path: str, skip_existing: bool) -> tuple[BinaryIO, set[str]]:
    ids: set[str] = set()
    whole = 0
    try:
        with open(path, "rb") as existing:
            for line in existing:
                if not line.endswith(b"\n"):
                    break
                whole += len(line)
                if skip_existing:
                    # A line that is not a document names no document: keep it, skip it.
                    with contextlib.suppress(msgspec.DecodeError):
                        ids.add(_ID.decode(line).id)
    except FileNotFoundError:
        pass
    file = open(path, "ab")  # noqa: SIM115 - closed by JsonlWriter.aclose
    if file.tell() > whole:
        file.truncate(whole)
    return file, ids


def _write(file: BinaryIO, data: bytes) -> None:
    file.write(data)
    file.flush()
    os.fsync(file.fileno())


class JsonlWriter:
    """Append :class:`Document`\\ s to ``path``, one JSON object a line.

    Lines are buffered and written, flushed and ``fsync``\\ ed once ``batch_size`` are
    waiting or the oldest has waited ``max_delay`` seconds, and on :meth:`flush` /
    :meth:`aclose`; all file work runs in a worker thread. ``max_delay`` is kept by a
    timer, so a document written is on disk within ``max_delay`` seconds (plus the time
    the disk takes) even when no other write follows, as when a harvest waits out its
    quota. After each ``fsync``, ``on_durable`` gets the ids now safe on disk (give it
    :meth:`Harvest.acknowledge` of a harvest started with ``acknowledge="manual"``).
    A write that failed in the timer is raised by the next :meth:`write`, :meth:`flush`
    or :meth:`aclose`. ``clock`` is where the timer reads the time and waits (a
    :class:`VirtualClock` in tests).

    Opening an existing file cuts a last line left incomplete by a crash and, with
    ``skip_existing`` (the default), reads the ids the file holds: writing one of them
    again is skipped (it is still reported to ``on_durable``). That set costs memory in
    proportion to the ids in the file, some tens of bytes each.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        batch_size: int = 64,
        max_delay: float = 1.0,
        on_durable: Callable[[list[str]], object] | None = None,
        skip_existing: bool = True,
        clock: Clock | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.batch_size = whole_number("batch_size", batch_size)
        self.max_delay = non_negative_number("max_delay", max_delay)
        self.on_durable = on_durable
        self._skip_existing = skip_existing
        self._clock: Clock = clock or LoopClock()
        self._file: BinaryIO | None = None
        self._ids: set[str] = set()
        self._lines: list[bytes] = []
        self._pending: list[str] = []
        self._since = 0.0
        self._lock = anyio.Lock()
        self._due = asyncio.Event()
        self._timer: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self.written = 0
        """Documents written by this writer."""
        self.skipped = 0
        """Documents not written because the file already held them."""
        self.existing = 0
        """Documents the file held when opened (with ``skip_existing``; else 0)."""

    async def __aenter__(self) -> JsonlWriter:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def open(self) -> None:
        """Open the file for appending (repairing its tail); ``async with`` does it for you."""
        if self._file is None:
            self._file, self._ids = await anyio.to_thread.run_sync(
                _open, self.path, self._skip_existing
            )
            self.existing = len(self._ids)
            self._timer = asyncio.get_running_loop().create_task(
                self._flush_when_due(), name=f"JsonlWriter({self.path!r}) timer"
            )

    async def _flush_when_due(self) -> None:
        """The ``max_delay`` timer: flush a batch once its oldest line has waited so long."""
        try:
            while True:
                await self._due.wait()
                self._due.clear()
                while self._pending:
                    wait = self._since + self.max_delay - self._clock.now()
                    if wait > 0:
                        await self._clock.sleep(wait)
                    else:
                        await self.flush()
        except Exception as exc:  # raised to the writer's user by the next call
            self._failure = exc

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    async def write(self, document: Document) -> bool:
        """Queue ``document``; ``False`` when the file already holds its id (not written)."""
        if self._file is None:
            raise RuntimeError("JsonlWriter is not open: use `async with JsonlWriter(...)`")
        self._raise_failure()
        if not self._pending:
            self._since = self._clock.now()
            self._due.set()
        self._pending.append(document.id)
        new = document.id not in self._ids
        if new:
            if self._skip_existing:
                self._ids.add(document.id)
            self._lines.append(_ENCODER.encode(document) + b"\n")
        else:
            self.skipped += 1
        if (
            len(self._pending) >= self.batch_size
            or self._clock.now() - self._since >= self.max_delay
        ):
            await self.flush()
        return new

    async def flush(self) -> None:
        """Write, flush and ``fsync`` what is buffered, then report it to ``on_durable``."""
        # One flush at a time (the timer's, a full batch's): lines reach the file in order.
        async with self._lock:
            self._raise_failure()
            lines, self._lines = self._lines, []
            pending, self._pending = self._pending, []
            if lines and self._file is not None:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(_write, self._file, b"".join(lines))
                self.written += len(lines)
            if pending and self.on_durable is not None:
                self.on_durable(pending)

    async def aclose(self) -> None:
        """Flush and close the file. Idempotent."""
        if self._file is None:
            return
        try:
            await self._stop_timer()
            await self.flush()
        finally:
            file, self._file = self._file, None
            file.close()

    async def _stop_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            async with self._lock:  # never cut a flush of the timer's short
                timer.cancel()
            await asyncio.wait([timer])
