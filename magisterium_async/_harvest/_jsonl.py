"""``JsonlWriter``: documents appended to a JSON Lines file, durable in small batches.

It tells a harvest which documents are on disk only after ``fsync``, so the harvest's
state never runs ahead of the file, and checks on opening that the file is the one the
harvest left: together they put every document in the file exactly once across resumes.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import os
import re
from collections.abc import Callable, Collection
from io import FileIO
from stat import S_ISREG
from typing import BinaryIO, NamedTuple

import anyio
import anyio.to_thread
import msgspec

from magisterium_async._clock import Clock, LoopClock
from magisterium_async._config import non_negative_number, whole_number
from magisterium_async._errors import OutputFileError
from magisterium_async._events import log_event, notice
from magisterium_async._files import describe, kind_of
from magisterium_async._harvest._lock import HarvestLock
from magisterium_async._harvest._shield import to_the_end
from magisterium_async._models import Document

_ENCODER = msgspec.json.Encoder()
_CHUNK = 1024 * 1024
_HEAD = 4096  # of each line: where its "id" is
_DIGEST = "sha256:"  # a fingerprint: the digest of every byte before the offset
# A line's id, as JsonlWriter writes it (first) or as a person might (spaces).
_ID_FIELD = re.compile(rb'\s*\{\s*"id"\s*:\s*("(?:[^"\\\n]|\\.){0,1024}")')
_OPENING = b'{"id":"'  # how every line JsonlWriter writes begins

# Where the system's words are not a user's ("No space left on device").
_WHY = {
    errno.ENOSPC: "the disk is full",
    errno.EROFS: "the file system is read-only",
    errno.EPIPE: "broken pipe (its reader has gone)",
}


def why_not_written(error: OSError) -> str:
    """What an ``OSError`` of a write (or an open) says, in words: ``the disk is full``."""
    return _WHY.get(error.errno or 0) or (error.strerror or str(error)).lower()


def quoted(value: str | bytes, limit: int = 200) -> str:
    """``value`` (a user's input: a query, a line of a file) as a message quotes it: at
    most ``limit`` characters, and its length when cut (``'abc…' (6,000,553 characters)``)."""
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text):,} characters)"


class OutputMark(NamedTuple):
    """Where a :class:`JsonlWriter` left its file: what a harvest's state records of it.

    ``device`` and ``inode`` name the file it was, ``path`` where (absolute); ``offset``
    is the end of its last whole record; ``fingerprint`` a digest of every byte before
    ``offset`` (``sha256:...``). The bytes are what a resume checks: a file edited
    anywhere, cut, or replaced by other bytes is told apart, while a copy restored from a
    backup, or moved (a new inode, the same bytes), is the harvest's output still.
    """

    device: int
    inode: int
    offset: int
    fingerprint: str
    path: str = ""


def _id_of(head: bytes) -> str | None:
    match = _ID_FIELD.match(head)
    if match is None:
        return None
    try:
        value = json.loads(match.group(1))
    except ValueError:
        return None
    return value if isinstance(value, str) else None


class _Scan:
    """One pass over a file's bytes, a piece at a time: the end of its last whole line,
    the digest of every byte before it, and the first 4 KiB of each line (where its id
    is), so memory is bounded whatever the file holds."""

    def __init__(self) -> None:
        self._digest = hashlib.sha256()
        self.digest = self._digest.copy()
        """Of the bytes before :attr:`whole`."""
        self.whole = self.lines = 0

    def read(self, file: BinaryIO, end: int, on_line: Callable[[int, bytes], None]) -> None:
        """Read on from :attr:`whole` to ``end``: ``on_line(its start, its first bytes)``
        for each whole line."""
        file.seek(self.whole)
        position, head = self.whole, b""
        while position < end and (piece := file.readline(min(_CHUNK, end - position))):
            position += len(piece)
            self._digest.update(piece)
            head += piece[: max(_HEAD - len(head), 0)]
            if piece.endswith(b"\n"):
                on_line(self.whole, head.removesuffix(b"\n"))
                self.lines += 1
                self.whole, head = position, b""
                self.digest = self._digest.copy()


_WAYS_ON = (
    "To continue without spending the quota again, put back the file as the harvest left it "
    "(a copy of it from a backup or version control, byte for byte) and run again; to start "
    "over, give another --out and its own --state (every document is then fetched again)"
)


def _refuse(path: str, why: str, after: str = "") -> OutputFileError:
    return OutputFileError(
        f"{path} is not the output this harvest wrote: {why}. It was left as it is. "
        f"{after}{_WAYS_ON}",
        path=path,
    )


class JsonlWriter:
    """Append :class:`Document`\\ s to ``path``, one JSON object a line, durable in batches.

    Lines are written, flushed and ``fsync``\\ ed once ``batch_size`` wait, once the oldest
    has waited ``max_delay`` seconds (on ``clock``, even when no write follows), and on
    :meth:`flush` and :meth:`aclose`; then ``on_durable`` gets their ids (a harvest's
    :meth:`Harvest.acknowledge`). A write that fails raises :class:`OutputFileError`, leaves
    the file as it was before its batch and tells ``on_durable`` nothing.

    :meth:`open` holds the file as a harvest holds its state (:mod:`._lock`) and checks it
    before a byte is written: with ``mark``, it must hold exactly the bytes the mark names,
    then only records of ``pending`` ids (:attr:`recovered`) and at most a line torn as one
    of them (:attr:`cut`); no id the file holds is written again. See "The
    output file" in ``docs/batch-and-harvest.md``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        batch_size: int = 64,
        max_delay: float = 1.0,
        on_durable: Callable[[list[str]], object] | None = None,
        clock: Clock | None = None,
        mark: OutputMark | None = None,
        pending: Collection[str] = (),
    ) -> None:
        self.path = os.fspath(path)
        self.batch_size = whole_number("batch_size", batch_size)
        self.max_delay = non_negative_number("max_delay", max_delay)
        self.on_durable = on_durable
        if mark is not None and not isinstance(mark, OutputMark):
            raise TypeError(f"mark must be an OutputMark or None, not {type(mark).__name__}")
        self.mark = mark
        """Where the file ends after the last ``fsync``: its last whole record (before
        :meth:`open`, the ``mark`` given). Give it back as ``mark=`` to resume."""
        self._pending_ids = pending
        self._digest = hashlib.sha256()  # of every byte of the file before the mark
        self._hold: HarvestLock | None = None
        self._clock: Clock = clock or LoopClock()
        self._file: FileIO | None = None
        self._ids: set[str] = set()
        self._lines: list[bytes] = []
        self._pending: list[str] = []
        self._lock = anyio.Lock()
        self._timer: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._torn = False  # a failed write left part of its batch there
        self.written = 0
        """Documents written by this writer."""
        self.skipped = 0
        """Documents not written because the file already held them."""
        self.existing = 0
        """Documents the file held when opened."""
        self.cut: tuple[int, int] | None = None
        """The bytes ``(start, end)`` of an incomplete last line :meth:`open` cut, if any."""
        self.recovered: list[str] = []
        """The ids of the records :meth:`open` found after ``mark``, in the file's order."""
        self.changed: str | None = None
        """What :meth:`aclose` found changed under the writer (cut, added to, replaced)."""

    async def __aenter__(self) -> JsonlWriter:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def open(self) -> None:
        """Take the file's lock, check it, open it for appending (cutting a torn last
        line); ``async with`` does it for you."""
        if self._file is None:
            await anyio.to_thread.run_sync(self._open)

    def _open(self) -> None:
        """Take the lock, open the file to append and check it (in a worker thread)."""
        kind = kind_of(self.path)
        if kind in ("directory", "socket", "block device"):
            raise OutputFileError(
                f"{self.path} is {describe(kind)}, not a file: give the path of a file",
                path=self.path,
            )
        if (mark := self.mark) is not None and mark.offset and kind == "missing":
            raise OutputFileError(
                f"{self.path} does not exist, but the harvest wrote {mark.offset:,} bytes of "
                f"records to {mark.path or self.path} and would not write them again: put that "
                "file here (a copy will do) to continue, or start the harvest anew into another "
                "file",
                path=self.path,
            )
        if kind in ("missing", "file"):
            self._hold = HarvestLock(self.path, "output", OutputFileError)
            self._hold.acquire()
        try:
            # "a+b" alters nothing there (and makes a missing file); the checks read through
            # the same descriptor, so the file checked is the file written. Unbuffered: a
            # failed write leaves nothing behind to be written again on close.
            self._file = open(self.path, "a+b", buffering=0)  # noqa: SIM115 - aclose
            stat = os.fstat(self._file.fileno())
            if S_ISREG(stat.st_mode):  # a device or a pipe: never read (it may never end)
                self._check(self._file, stat)
        except BaseException as exc:
            if self._file is not None:
                self._file.close()
                self._file = None
            if self._hold is not None:
                self._hold.release()
            if isinstance(exc, OSError):
                raise OutputFileError(
                    f"cannot write {self.path}: {why_not_written(exc)}", path=self.path
                ) from exc
            raise

    def _check(self, file: FileIO, stat: os.stat_result) -> None:
        """Check a regular file against the mark (see the class), cut a line the harvest
        tore, note the ids it holds; then :attr:`mark` is where it ends."""
        path, mark, pending = self.path, self.mark, self._pending_ids
        scan = _Scan()
        reader = open(file.fileno(), "rb", closefd=False)  # noqa: SIM115 - buffered reads

        def note(start: int, head: bytes) -> None:
            if (found := _id_of(head)) is not None:
                self._ids.add(found)

        def after_mark(start: int, head: bytes) -> None:
            # Only a record the harvest wrote and had not acknowledged (a crash between
            # the write and the state's commit) may follow the mark, once.
            found = _id_of(head)
            if found is None or found not in pending or found in self.recovered:
                raise _refuse(
                    path,
                    f"line {scan.lines + 1} (at byte {start}) is not a record the harvest "
                    f"wrote: {quoted(head)}",
                    f"The harvest's own records end at byte {start}: `truncate -s {start} "
                    f"{path}` keeps exactly them, and the harvest continues. ",
                )
            self.recovered.append(found)
            note(start, head)

        with reader:
            if mark is not None:
                # The bytes, not the inode: a backup put back is a new inode, the same
                # bytes, and the harvest's output still.
                if stat.st_size < mark.offset:
                    raise _refuse(
                        path,
                        f"it holds {stat.st_size} bytes, less than the {mark.offset} the "
                        "harvest wrote (it was cut short, or lines were removed from it)",
                    )
                scan.read(reader, mark.offset, note)
                fingerprint = _DIGEST + scan.digest.hexdigest()
                if scan.whole != mark.offset or fingerprint != mark.fingerprint:
                    same = (stat.st_dev, stat.st_ino) == (mark.device, mark.inode)
                    raise _refuse(
                        path,
                        "it was edited since the harvest wrote it"
                        if same
                        else "another file is in its place, and its bytes differ from those "
                        "the harvest wrote",
                    )
            scan.read(reader, stat.st_size, note if mark is None else after_mark)
            if scan.whole < stat.st_size:
                # A last line without its newline: cut only when the harvest may have been
                # writing it when it stopped (the start of a record it had not acknowledged,
                # or cut within its id); a file nothing vouches for is never altered.
                reader.seek(scan.whole)
                partial = reader.read(_HEAD)
                ours = partial.startswith(_OPENING) or _OPENING.startswith(partial)
                found = _id_of(partial)
                if mark is None or not ours or (found is not None and found not in pending):
                    how = (
                        ": end the line, or write to another file"
                        if mark is None
                        else f". Remove it (`truncate -s {scan.whole} {path}` keeps every whole "
                        f"line before it), and the harvest continues. {_WAYS_ON}"
                    )
                    raise OutputFileError(
                        f"{path} ends in an incomplete line (after byte {scan.whole}) that "
                        f"this writer cannot tell it wrote: {quoted(partial)}. It was left as "
                        f"it is{how}",
                        path=path,
                    )
                file.truncate(scan.whole)
                self.cut = (scan.whole, stat.st_size)
                log_event(
                    notice(
                        "warning",
                        "harvest",
                        f"{path}: cut its incomplete last line (bytes {scan.whole} to "
                        f"{stat.st_size}), left by a harvest that stopped while writing it",
                    )
                )
        self._digest, self.existing = scan.digest, len(self._ids)
        fingerprint = _DIGEST + scan.digest.hexdigest()
        self.mark = OutputMark(
            stat.st_dev, stat.st_ino, scan.whole, fingerprint, os.path.abspath(path)
        )

    async def _flush_later(self) -> None:
        """The ``max_delay`` timer of a batch, started by its first line (a flush before
        it only makes the next batch's come sooner)."""
        try:
            await self._clock.sleep(self.max_delay)
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
        if self._timer is None or self._timer.done():
            self._timer = asyncio.get_running_loop().create_task(self._flush_later())
        self._pending.append(document.id)
        new = document.id not in self._ids
        if new:
            self._ids.add(document.id)
            self._lines.append(_ENCODER.encode(document) + b"\n")
        else:
            self.skipped += 1
        if len(self._pending) >= self.batch_size:
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
                # Whatever cancels the flush: what reaches the file is counted as made.
                await to_the_end(anyio.to_thread.run_sync(self._append, self._file, data))
                self.written += len(lines)
            if pending and self.on_durable is not None:
                self.on_durable(pending)

    def _append(self, file: FileIO, data: bytes) -> None:
        mark = self.mark
        try:
            view = memoryview(data)
            while view:
                view = view[file.write(view) :]
            if mark is not None:  # a regular file; /dev/null or a pipe cannot be synced
                os.fsync(file.fileno())
        except OSError as exc:
            if mark is not None:  # nothing half-made: the batch's part written is cut off
                try:
                    file.truncate(mark.offset)
                except OSError:
                    self._torn = True  # the next resume cuts it: a torn record of ours
            raise OutputFileError(
                f"cannot write {self.path}: {why_not_written(exc)}", path=self.path
            ) from exc
        if mark is not None:
            self._digest.update(data)
            self.mark = mark._replace(
                offset=mark.offset + len(data), fingerprint=_DIGEST + self._digest.hexdigest()
            )

    async def aclose(self) -> None:
        """Flush and close the file. Idempotent."""
        if self._file is None:
            return
        try:
            timer, self._timer = self._timer, None
            if timer is not None:
                async with self._lock:  # never cut a flush of the timer's short
                    timer.cancel()
                await asyncio.wait([timer])
            await self.flush()
            self.changed = await anyio.to_thread.run_sync(self._changed_under_us)
        finally:
            file, self._file = self._file, None
            file.close()
            if self._hold is not None:
                self._hold.release()

    def _changed_under_us(self) -> str | None:
        # Cheap and sound: every byte was written here (the lock keeps other harvests
        # out), so the file ends at the mark unless someone else changed it.
        mark, file = self.mark, self._file
        if mark is None or file is None or self._torn:
            return None  # a write of ours failed: its error says so, not this
        stat = os.fstat(file.fileno())
        if stat.st_size != mark.offset:
            return f"it holds {stat.st_size} bytes, not the {mark.offset} the harvest wrote"
        try:
            there = os.stat(self.path)
        except FileNotFoundError:
            return "it was removed"
        except OSError:
            return None  # cannot be told: the next resume checks every byte
        return None if os.path.samestat(stat, there) else "another file was put in its place"
