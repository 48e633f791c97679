"""``JsonlWriter``: documents appended to a JSON Lines file, durable in small batches.

Made for harvests that may be interrupted: on opening it cuts a line torn by a crash and
skips documents the file already holds, and it tells the harvest which documents are on
disk (``on_durable``) only after ``fsync``, so the harvest's state never runs ahead of the
file. Together they put every document in the file exactly once across resumes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections.abc import Callable
from stat import S_ISREG
from types import TracebackType
from typing import BinaryIO, NamedTuple

import anyio
import anyio.to_thread
import msgspec

from magisterium_async._clock import Clock, LoopClock
from magisterium_async._config import non_negative_number, whole_number
from magisterium_async._errors import OutputFileError
from magisterium_async._models import Document

__all__ = ["JsonlWriter", "OutputMark"]

_ENCODER = msgspec.json.Encoder()


_CHUNK = 1024 * 1024
_HEAD = 4096  # of each line: where its "id" is
_TAIL = 4096  # bytes before a mark's offset that its fingerprint covers
# A line's id, as JsonlWriter writes it (first) or as a person might (spaces).
_ID_FIELD = re.compile(rb'\s*\{\s*"id"\s*:\s*("(?:[^"\\\n]|\\.){0,1024}")')


class OutputMark(NamedTuple):
    """Where a :class:`JsonlWriter` left its file: what a harvest's state records of it.

    ``device`` and ``inode`` name the file; ``offset`` is the end of its last whole
    record; ``fingerprint`` is a digest of the (up to 4 KiB of) bytes before ``offset``, so
    a file deleted and another made in its place (which may reuse the inode) is told apart.
    """

    device: int
    inode: int
    offset: int
    fingerprint: str


def _fingerprint(tail: bytes) -> str:
    return hashlib.sha256(tail).hexdigest()


def _id_of(head: bytes) -> str | None:
    match = _ID_FIELD.match(head)
    if match is None:
        return None
    try:
        value = json.loads(match.group(1))
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _scan(file: BinaryIO, end: int, ids: set[str] | None) -> int:
    """The offset after the last newline before ``end``; the id of each line into ``ids``.

    Reads ``end`` bytes a chunk at a time and keeps only the first 4 KiB of a line (where
    its id is), so memory is bounded whatever the file holds.
    """
    whole = position = 0
    head = bytearray()
    while position < end:
        chunk = file.read(min(_CHUNK, end - position))
        if not chunk:
            break
        start = 0
        while (newline := chunk.find(b"\n", start)) >= 0:
            if ids is not None:
                head += chunk[start : min(newline, start + _HEAD)]
                found = _id_of(bytes(head))
                if found is not None:
                    ids.add(found)
            head.clear()
            whole = position + newline + 1
            start = newline + 1
        if len(head) < _HEAD:
            head += chunk[start : start + _HEAD - len(head)]
        position += len(chunk)
    return whole


def _read_at(file: BinaryIO, offset: int, size: int) -> bytes:
    # Not os.pread (POSIX only). Moving the position is harmless: the file is opened to
    # append, and every write goes to its end whatever the position.
    file.seek(offset)
    return file.read(size)


def _refuse(path: str, why: str) -> OutputFileError:
    return OutputFileError(
        f"{path} is not the output this harvest wrote: {why}. It was left as it is: give "
        "another output file to harvest into, or the one this harvest wrote to continue it",
        path=path,
    )


def _check_mark(path: str, stat: os.stat_result, file: BinaryIO, mark: OutputMark) -> None:
    """:class:`OutputFileError` unless the file is the one ``mark`` describes."""
    if (stat.st_dev, stat.st_ino) != (mark.device, mark.inode):
        raise _refuse(path, "it is another file than the one the harvest wrote there")
    if stat.st_size < mark.offset:
        raise _refuse(
            path, f"it holds {stat.st_size} bytes, less than the {mark.offset} the harvest wrote"
        )
    start = max(mark.offset - _TAIL, 0)
    if _fingerprint(_read_at(file, start, mark.offset - start)) != mark.fingerprint:
        raise _refuse(path, f"its first {mark.offset} bytes are not those the harvest wrote")


class _Opened(NamedTuple):
    file: BinaryIO
    ids: set[str]
    mark: OutputMark | None
    tail: bytes


def _open(path: str, skip_existing: bool, mark: OutputMark | None) -> _Opened:
    if not os.path.lexists(path):
        mark = None  # gone since the mark was taken: a new file, the writer's from the start
    # "a+b" alters nothing that is there (and creates a missing file); the checks below read
    # through the same descriptor, so the file checked is the file written.
    file = open(path, "a+b")  # noqa: SIM115 - closed by JsonlWriter.aclose
    try:
        stat = os.fstat(file.fileno())
        if not S_ISREG(stat.st_mode):
            # /dev/null, a pipe, a terminal: nothing to read (it may never end), nothing to
            # repair, no offset to record.
            return _Opened(file, set(), None, b"")
        if mark is not None:
            _check_mark(path, stat, file, mark)
        ids: set[str] = set()
        with open(file.fileno(), "rb", closefd=False) as reader:
            reader.seek(0)  # the shared descriptor was opened at the end, to append
            whole = _scan(reader, stat.st_size, ids if skip_existing else None)
        if whole < stat.st_size:
            # A last line without its newline: cut only when the harvest wrote it (after
            # the mark); a file nothing vouches for is never altered.
            if mark is None or whole < mark.offset:
                raise OutputFileError(
                    f"{path} ends in an incomplete line (after byte {whole}) that this writer "
                    "cannot tell it wrote; it was left as it is: end the line, or write to "
                    "another file",
                    path=path,
                )
            file.truncate(whole)
        tail = _read_at(file, max(whole - _TAIL, 0), min(whole, _TAIL))
        opened = OutputMark(stat.st_dev, stat.st_ino, whole, _fingerprint(tail))
        return _Opened(file, ids, opened, tail)
    except BaseException:
        file.close()
        raise


def _write(file: BinaryIO, data: bytes, sync: bool) -> None:
    file.write(data)
    file.flush()
    if sync:  # a regular file; /dev/null or a pipe cannot be synced (EINVAL)
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

    Opening an existing file reads, with ``skip_existing`` (the default), the ids the file
    holds: writing one of them again is skipped (it is still reported to ``on_durable``).
    That set costs memory in proportion to the ids in the file, some tens of bytes each;
    the file itself is read a chunk at a time, and a file that is not a regular one
    (``/dev/null``, a pipe) is not read at all.

    A file is altered only where this writer can tell it wrote it. ``mark`` is where a
    writer left it (its :attr:`mark`, which a harvest's state records): the file must be
    that one, unchanged up to the mark, or :class:`OutputFileError` is raised; a last line
    left incomplete by a crash after the mark is then cut. (A file no longer there is
    simply made anew.) Without ``mark`` an existing
    file is only appended to, and one that ends in an incomplete line is refused.
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
        mark: OutputMark | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.batch_size = whole_number("batch_size", batch_size)
        self.max_delay = non_negative_number("max_delay", max_delay)
        self.on_durable = on_durable
        self._skip_existing = skip_existing
        if mark is not None and not isinstance(mark, OutputMark):
            raise TypeError(f"mark must be an OutputMark or None, not {type(mark).__name__}")
        self._mark = mark
        self._tail = b""
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
            opened = await anyio.to_thread.run_sync(
                _open, self.path, self._skip_existing, self._mark
            )
            self._file, self._ids, self._mark, self._tail = opened
            self.existing = len(self._ids)
            self._timer = asyncio.get_running_loop().create_task(
                self._flush_when_due(), name=f"JsonlWriter({self.path!r}) timer"
            )

    @property
    def mark(self) -> OutputMark | None:
        """Where the file ends after the last ``fsync``: its last whole record (``None``:
        not open yet, or not a regular file). Give it back as ``mark=`` to resume."""
        return self._mark

    def _advance(self, data: bytes) -> None:
        mark = self._mark
        if mark is not None:
            self._tail = (self._tail + data)[-_TAIL:]
            self._mark = mark._replace(
                offset=mark.offset + len(data), fingerprint=_fingerprint(self._tail)
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
                data = b"".join(lines)
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(_write, self._file, data, self._mark is not None)
                self._advance(data)
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
