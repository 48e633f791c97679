"""Files a user names: the one rule for every path the SDK opens on a user's word.

The token file, the credentials file, a queries file, a harvest's state and output, a
cache's file: each is looked at before it is opened (:func:`kind_of`), so that a directory,
a device or a socket is refused with a message naming the path and what it is, and nothing
is opened that could block for good. A small text file is read by :func:`aread_text`,
which treats a byte-order mark and Windows or old Mac line ends alike everywhere, and reads
a FIFO (``--token-file <(pass show x)``) in a thread of its own, so that Ctrl-C and SIGTERM
still end a program whose FIFO never gets a writer.

Messages say what a path is and what to do; they never advise deleting a path the SDK did
not create (``rm /dev/null`` pasted as root harms).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Literal, TypeVar

from magisterium_async._errors import MagisteriumError

FileKind = Literal[
    "missing", "file", "directory", "fifo", "character device", "block device", "socket"
]
"""What a path names, as :func:`kind_of` tells it (a symbolic link is followed)."""

_KINDS: tuple[tuple[object, FileKind], ...] = (
    (stat.S_ISREG, "file"),
    (stat.S_ISDIR, "directory"),
    (stat.S_ISFIFO, "fifo"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISSOCK, "socket"),
)

T = TypeVar("T")

# A text file a user names for one value (a token, a list of queries) is small: a larger
# one is a mistake (a binary, a log), refused before it fills memory.
MAX_TEXT_BYTES = 16 * 1024 * 1024

READ_AHEAD = 1024
"""How many items :func:`read_in_thread`'s thread reads ahead of those handed over."""


def kind_of(path: str | os.PathLike[str]) -> FileKind:
    """What ``path`` is, looked at without opening it: ``"missing"`` when nothing is
    there (a dangling link included)."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    for test, kind in _KINDS:
        if test(mode):  # type: ignore[operator]
            return kind
    return "file"  # no other kind exists on the systems Python runs on


def describe(kind: FileKind) -> str:
    """The kind as a message says it: ``"a directory"``, ``"a FIFO (named pipe)"``,
    ``"nothing"``."""
    return {"missing": "nothing", "fifo": "a FIFO (named pipe)"}.get(kind, f"a {kind}")


def text_of(raw: bytes, path: str | os.PathLike[str], what: str) -> str:
    """``raw`` as text: UTF-8, a byte-order mark dropped, every line end ``\\n``.

    Raises ``ValueError`` naming ``what`` and ``path`` when it is not UTF-8.
    """
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{what} {os.fspath(path)} is not UTF-8 text (byte {exc.start} is not): "
            "save it as UTF-8"
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


async def aread_text(
    path: str | os.PathLike[str], *, what: str, error: type[MagisteriumError] = MagisteriumError
) -> str:
    """The text of the file at ``path``, read inside the event loop.

    Arguments:
        path: the file a user named; a FIFO or a character device (``/dev/stdin``, a
            process substitution) is read too.
        what: how a message names it (``"the token file"``).
        error: the exception raised for a path that cannot be read, naming ``what``,
            the path, and what it is.

    A FIFO is read in a daemon thread of its own while the loop runs on, so Ctrl-C or a
    cancelled wait still ends a program whose FIFO never gets a writer.
    """
    kind = kind_of(path)
    if kind == "missing":
        raise error(f"{what} {os.fspath(path)} does not exist")
    if kind not in ("file", "fifo", "character device"):
        raise error(f"{what} {os.fspath(path)} is {describe(kind)}, not a file")
    # In a daemon thread: Ctrl-C still ends a program whose FIFO never gets a writer.
    pieces = read_in_thread(lambda: [_read_bytes(path, what, error)], f"read {what}")
    raw = b"".join([piece async for piece in pieces])
    try:
        return text_of(raw, path, what)
    except ValueError as exc:
        raise error(str(exc)) from None


async def read_in_thread(read: Callable[[], Iterable[T]], name: str) -> AsyncIterator[T]:
    """What ``read()`` yields (lines of stdin, of a queries file; a FIFO's bytes), read by a
    daemon thread: a read blocked on a pipe or a terminal is never one the event loop waits
    in, so Ctrl-C still ends the process, and one still waiting when the program ends does
    not keep it alive. Its exception is raised here, after the items read before it.

    The thread reads at most :data:`READ_AHEAD` items ahead of those handed over, and
    hands them over in chunks, waking the loop only when this iterator waits for them:
    at most one wakeup at a time. A wakeup per item would fill the loop's self-pipe while
    the loop is busy, and a signal's byte that then finds it full is lost (Ctrl-C
    ignored)."""
    loop = asyncio.get_running_loop()
    lock = threading.Condition()
    ready: list[T] = []
    end: list[Exception | None] = []  # [None]: all read; [exc]: read() raised exc
    waiter: asyncio.Future[None] | None = None  # set while this iterator waits
    closed = False

    def wake() -> None:  # under the lock: the one waiter, woken once
        nonlocal waiter
        if waiter is not None:
            with contextlib.suppress(RuntimeError):  # the event loop is already closed
                loop.call_soon_threadsafe(_set_done, waiter)
            waiter = None

    def pump() -> None:
        last: Exception | None = None
        try:
            for item in read():
                with lock:
                    while len(ready) >= READ_AHEAD and not closed:
                        lock.wait()
                    if closed:
                        return
                    ready.append(item)
                    wake()
        except Exception as exc:
            last = exc
        with lock:
            end.append(last)
            wake()

    threading.Thread(target=pump, name=name, daemon=True).start()
    try:
        while True:
            with lock:
                chunk = ready.copy()
                ready.clear()
                lock.notify()  # room to read on
                waiting = None if chunk or end else loop.create_future()
                waiter = waiting
            if waiting is not None:
                await waiting
            elif chunk:
                for item in chunk:
                    yield item
            elif end[0] is not None:
                raise end[0]
            else:
                return
    finally:
        with lock:
            closed = True
            lock.notify()


def _set_done(future: asyncio.Future[None]) -> None:
    if not future.done():  # not cancelled: the iterator was not closed meanwhile
        future.set_result(None)


def _read_bytes(path: str | os.PathLike[str], what: str, error: type[MagisteriumError]) -> bytes:
    try:
        with open(path, "rb") as file:
            raw = file.read(MAX_TEXT_BYTES + 1)
    except OSError as exc:
        raise error(f"cannot read {what} {os.fspath(path)}: {exc.strerror or exc}") from None
    if len(raw) > MAX_TEXT_BYTES:
        raise error(
            f"{what} {os.fspath(path)} holds more than {MAX_TEXT_BYTES // 2**20} MiB: "
            "is it the right file?"
        )
    return raw
