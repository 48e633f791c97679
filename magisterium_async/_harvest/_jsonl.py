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
import logging
import os
import re
from collections.abc import Callable, Collection, Container
from stat import S_ISREG
from types import TracebackType
from typing import Any, BinaryIO, NamedTuple

import anyio
import anyio.to_thread
import msgspec

from magisterium_async._clock import Clock, LoopClock
from magisterium_async._config import non_negative_number, whole_number
from magisterium_async._errors import OutputFileError
from magisterium_async._harvest._lock import HarvestLock
from magisterium_async._harvest._results import quoted
from magisterium_async._models import Document

__all__ = ["JsonlWriter", "OutputMark"]

_ENCODER = msgspec.json.Encoder()


_CHUNK = 1024 * 1024
_HEAD = 4096  # of each line: where its "id" is
_DIGEST = "sha256:"  # a fingerprint: the digest of every byte before the offset
# A line's id, as JsonlWriter writes it (first) or as a person might (spaces).
_ID_FIELD = re.compile(rb'\s*\{\s*"id"\s*:\s*("(?:[^"\\\n]|\\.){0,1024}")')
_OPENING = b'{"id":"'  # how every line JsonlWriter writes begins

logger = logging.getLogger("magisterium_async.harvest")


class OutputMark(NamedTuple):
    """Where a :class:`JsonlWriter` left its file: what a harvest's state records of it.

    ``device`` and ``inode`` name the file it was; ``offset`` is the end of its last
    whole record; ``fingerprint`` is a digest of every byte before ``offset``
    (``sha256:...``). The bytes are what a resume checks: a file edited anywhere, cut,
    or replaced by other bytes is told apart, while a copy restored from a backup (a new
    inode, the same bytes) is the harvest's output still.
    """

    device: int
    inode: int
    offset: int
    fingerprint: str


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
    """One pass over a file's bytes, a chunk at a time: the end of its last whole line, the
    digest of every byte before it, and the first 4 KiB of each line (where its id is), so
    memory is bounded whatever the file holds."""

    def __init__(self) -> None:
        self._digest = hashlib.sha256()
        self.digest = self._digest.copy()
        """Of the bytes before :attr:`whole`."""
        self.whole = 0
        self.lines = 0
        self.head = bytearray()  # of the line under way

    def read(
        self, file: BinaryIO, start: int, end: int, on_line: Callable[[int, bytes], None]
    ) -> None:
        """Read ``[start, end)`` (``start``: where the last read ended); ``on_line(start of
        the line, its head)`` for each whole line."""
        file.seek(start)
        position = line_start = start
        while position < end:
            chunk = file.read(min(_CHUNK, end - position))
            if not chunk:
                break
            at = 0
            while (newline := chunk.find(b"\n", at)) >= 0:
                self.head += chunk[at : min(newline, at + max(_HEAD - len(self.head), 0))]
                on_line(line_start, bytes(self.head))
                self.head.clear()
                self.lines += 1
                at = newline + 1
                line_start = self.whole = position + at
            if at:
                self._digest.update(chunk[:at])
                self.digest = self._digest.copy()
            self._digest.update(chunk[at:])
            if len(self.head) < _HEAD:
                self.head += chunk[at : at + _HEAD - len(self.head)]
            position += len(chunk)


def _read_at(file: BinaryIO, offset: int, size: int) -> bytes:
    # Not os.pread (POSIX only). Moving the position is harmless: the file is opened to
    # append, and every write goes to its end whatever the position.
    file.seek(offset)
    return file.read(size)


def _refuse(path: str, why: str, after: str = "") -> OutputFileError:
    return OutputFileError(
        f"{path} is not the output this harvest wrote: {why}. It was left as it is. "
        f"{after}To continue without spending the quota again, put back the file as the "
        "harvest left it (a copy of it from a backup or version control, byte for byte) and "
        "run again; to start over, give another --out and its own --state (every document "
        "is then fetched again)",
        path=path,
    )


def _check_size(path: str, stat: os.stat_result, mark: OutputMark) -> None:
    if stat.st_size < mark.offset:
        raise _refuse(
            path,
            f"it holds {stat.st_size} bytes, less than the {mark.offset} the harvest wrote "
            "(it was cut short, or lines were removed from it)",
        )


def _check_after_mark(
    path: str, mark: OutputMark, pending: Container[str], scan: _Scan, seen: list[str]
) -> Callable[[int, bytes], None]:
    """The check of each whole line after the mark: a record the harvest wrote and had
    not acknowledged (a crash between the write and the state's commit), once; each id
    is added to ``seen``, in the order of the file."""

    def check(start: int, head: bytes) -> None:
        found = _id_of(head)
        if found is None or found not in pending or found in seen:
            raise _refuse(
                path,
                f"line {scan.lines + 1} (at byte {start}) is not a record the harvest wrote: "
                f"{quoted(head.decode('utf-8', 'replace'))}",
                f"The harvest's own records end at byte {mark.offset}: `truncate -s "
                f"{mark.offset} {path}` keeps exactly them, and the harvest continues. ",
            )
        seen.append(found)

    return check


def _torn_by_the_harvest(partial: bytes, pending: Container[str]) -> bool:
    """Whether an incomplete last line may be one the harvest was writing when it was
    killed: the start of a record it had not acknowledged."""
    if len(partial) <= len(_OPENING):
        return _OPENING.startswith(partial)
    if not partial.startswith(_OPENING):
        return False
    found = _id_of(partial)
    return found is None or found in pending  # None: cut within the id


class _Opened(NamedTuple):
    file: BinaryIO
    ids: set[str]
    mark: OutputMark | None
    digest: Any
    cut: tuple[int, int] | None
    recovered: list[str]


def _open(
    path: str, skip_existing: bool, mark: OutputMark | None, pending: Container[str]
) -> _Opened:
    if mark is not None and not os.path.lexists(path):
        if mark.offset:
            raise OutputFileError(
                f"{path} is gone: the harvest had written {mark.offset} bytes of records "
                "there, and would not write them again. Put the file back to continue, or "
                "start the harvest anew into another file",
                path=path,
            )
        mark = None  # it held nothing: made anew, the writer's from the start
    # "a+b" alters nothing that is there (and creates a missing file); the checks below read
    # through the same descriptor, so the file checked is the file written.
    file = open(path, "a+b")  # noqa: SIM115 - closed by JsonlWriter.aclose
    try:
        stat = os.fstat(file.fileno())
        if not S_ISREG(stat.st_mode):
            # /dev/null, a pipe, a terminal: nothing to read (it may never end), nothing to
            # repair, no offset to record.
            return _Opened(file, set(), None, _Scan().digest, None, [])
        ids: set[str] = set()

        def note(start: int, head: bytes) -> None:
            if skip_existing and (found := _id_of(head)) is not None:
                ids.add(found)

        scan = _Scan()
        recovered: list[str] = []
        with open(file.fileno(), "rb", closefd=False) as reader:
            if mark is not None:
                # The bytes, not the inode: a backup put back is a new inode, the same
                # bytes, and the harvest's output still.
                _check_size(path, stat, mark)
                scan.read(reader, 0, mark.offset, note)
                if _DIGEST + scan.digest.hexdigest() != mark.fingerprint:
                    same = (stat.st_dev, stat.st_ino) == (mark.device, mark.inode)
                    raise _refuse(
                        path,
                        "it was edited since the harvest wrote it"
                        if same
                        else "another file is in its place, and its bytes differ from those "
                        "the harvest wrote",
                    )
                check = _check_after_mark(path, mark, pending, scan, recovered)

                def note_after(line_start: int, head: bytes) -> None:
                    check(line_start, head)
                    note(line_start, head)

                scan.read(reader, mark.offset, stat.st_size, note_after)
            else:
                scan.read(reader, 0, stat.st_size, note)
        whole = scan.whole
        cut = None
        if whole < stat.st_size:
            # A last line without its newline: cut only when the harvest may have been
            # writing it when it was killed; a file nothing vouches for is never altered.
            partial = _read_at(file, whole, min(stat.st_size - whole, _HEAD))
            if mark is None or not _torn_by_the_harvest(partial, pending):
                how = (
                    "end the line, or write to another file"
                    if mark is None
                    else f"To continue without spending the quota again, remove it (`truncate "
                    f"-s {whole} {path}` keeps every whole line before it) or put back the file "
                    "as the harvest left it, and run again; to start over, give another --out "
                    "and its own --state (every document is then fetched again)"
                )
                raise OutputFileError(
                    f"{path} ends in an incomplete line (after byte {whole}) that this writer "
                    f"cannot tell it wrote: {quoted(partial.decode('utf-8', 'replace'))}. It "
                    f"was left as it is{': ' if mark is None else '. '}{how}",
                    path=path,
                )
            file.truncate(whole)
            cut = (whole, stat.st_size)
            logger.warning(
                "%s: cut its incomplete last line (bytes %d to %d), left by a harvest that "
                "was killed while writing it",
                path,
                whole,
                stat.st_size,
            )
        opened = OutputMark(stat.st_dev, stat.st_ino, whole, _DIGEST + scan.digest.hexdigest())
        return _Opened(file, ids, opened, scan.digest, cut, recovered)
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
    writer left it (its :attr:`mark`, which a harvest's state records): the file must
    still be there, no shorter, and hold the same bytes up to the mark (a copy put back
    from a backup does), or :class:`OutputFileError` is raised saying which. After the mark,
    only what a crash between a write and its acknowledgement leaves is accepted: whole
    records of the ids in ``pending`` (those handed to the writer and not acknowledged
    when the mark was recorded; a harvest's state knows them), each once, and then at
    most an incomplete last line that begins as such a record does, which is cut, with a
    warning on the ``magisterium_async.harvest`` logger and in :attr:`cut`. Any other
    line after the mark (one added by hand) is refused, naming it. Without ``mark`` an
    existing file is only appended to, and one that ends in an incomplete line is refused.

    **One writer at a time per file.** :meth:`open` takes an exclusive OS lock beside a
    regular file (``PATH.lock``, who holds it in ``PATH.lock.info``; both removed by
    :meth:`aclose`) before it reads a byte; a second writer of the same file, in this
    process or another, gets :class:`OutputFileError` naming the holder (pid, host, since
    when). A process killed outright holds nothing.
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
        pending: Collection[str] = (),
    ) -> None:
        self.path = os.fspath(path)
        self.batch_size = whole_number("batch_size", batch_size)
        self.max_delay = non_negative_number("max_delay", max_delay)
        self.on_durable = on_durable
        self._skip_existing = skip_existing
        if mark is not None and not isinstance(mark, OutputMark):
            raise TypeError(f"mark must be an OutputMark or None, not {type(mark).__name__}")
        self._mark = mark
        self._pending_ids = pending
        self._digest: Any = None  # of every byte of the file before the mark
        self._hold: HarvestLock | None = None
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
        self.cut: tuple[int, int] | None = None
        """The bytes ``(start, end)`` of an incomplete last line :meth:`open` cut, if any."""
        self.recovered: list[str] = []
        """The ids of the whole records :meth:`open` found after ``mark`` (written, not
        acknowledged: a crash in between), in the order of the file."""
        self._torn = False  # a write that failed, perhaps part-way
        self.changed: str | None = None
        """Set by :meth:`aclose` when the file was changed under the writer (cut, added
        to, removed or replaced while it was open): what differs. ``None``: as written."""

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
        """Take the file's lock, check it, open it for appending (cutting a torn last
        line); ``async with`` does it for you."""
        if self._file is None:
            opened = await anyio.to_thread.run_sync(self._open)
            self._file, self._ids, self._mark, self._digest, self.cut, self.recovered = opened
            self.existing = len(self._ids)
            self._timer = asyncio.get_running_loop().create_task(
                self._flush_when_due(), name=f"JsonlWriter({self.path!r}) timer"
            )

    def _open(self) -> _Opened:
        try:
            regular = S_ISREG(os.stat(self.path).st_mode)
        except FileNotFoundError:
            regular = True  # made here: a regular file
        if regular:
            self._hold = HarvestLock(self.path, "output", OutputFileError)
            self._hold.acquire()
        try:
            return _open(self.path, self._skip_existing, self._mark, self._pending_ids)
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        hold, self._hold = self._hold, None
        if hold is not None:
            hold.release()

    @property
    def mark(self) -> OutputMark | None:
        """Where the file ends after the last ``fsync``: its last whole record (``None``:
        not open yet, or not a regular file). Give it back as ``mark=`` to resume."""
        return self._mark

    def _advance(self, data: bytes) -> None:
        mark = self._mark
        if mark is not None:
            self._digest.update(data)
            self._mark = mark._replace(
                offset=mark.offset + len(data), fingerprint=_DIGEST + self._digest.hexdigest()
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
                    try:
                        await anyio.to_thread.run_sync(
                            _write, self._file, data, self._mark is not None
                        )
                    except BaseException:
                        self._torn = True  # part of it may be there: the end is not ours to judge
                        raise
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
            self.changed = await anyio.to_thread.run_sync(self._changed_under_us)
        finally:
            file, self._file = self._file, None
            file.close()
            self._release()

    def _changed_under_us(self) -> str | None:
        # Cheap and sound: every byte was written here (the lock keeps other harvests
        # out), so the file ends at the mark unless someone else changed it.
        mark, file = self._mark, self._file
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

    async def _stop_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            async with self._lock:  # never cut a flush of the timer's short
                timer.cancel()
            await asyncio.wait([timer])
