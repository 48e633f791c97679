"""One harvest at a time on a file: an exclusive OS lock beside it, and who holds it.

A harvest's state and its output file are each held, for as long as the harvest runs, by
an exclusive OS lock (``filelock``: ``flock`` on Unix, ``LockFileEx`` on Windows) on a
file beside them, ``PATH.lock`` (never the user's file itself: a lock file may be
created and removed, a user's file never is). Who holds it, pid, host and since when, is
written beside it in ``PATH.lock.info`` once the lock is taken, so that a second harvest
is refused at once with a message naming the first. The lock is the operating system's:
a harvest killed outright holds nothing, and the next one takes the lock (and rewrites
the ``.info``) as if the files were not there. Both files are removed when the lock is
let go.

``filelock`` leaves its lock file where it is on release (removing it races with a
process that opened it and waits for the lock), so this module removes it itself, while
still holding it; a process that locked the removed file then sees that the path names
another file, or none, and tries again.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import time
from typing import Any, Protocol

import filelock

from magisterium_async._errors import MagisteriumError

__all__ = ["FileInUse", "HarvestLock"]

_ATTEMPTS = 5  # locked files found removed under us before giving up, in a row
# How long a refused harvest reads the holder's ``.info`` again while it names nobody, or
# a process this host no longer runs: the holder writes it just after taking the lock,
# and a harvest killed outright leaves its own behind, so for that moment the file is
# missing or names the dead one. Only a refusal waits, and only this long at most.
_HOLDER_WAIT = 2.0


class FileInUse(Protocol):
    """The error a refused lock raises: :class:`StateError` or :class:`OutputFileError`."""

    def __call__(self, message: str, *, path: str) -> MagisteriumError: ...


def _holder_text(info_path: str) -> str:
    """``pid 123 on host, since 2026-12-02T14:03:05+01:00``, or a word that it is unknown.

    Read again (see ``_HOLDER_WAIT``) while the file is missing or names a process gone
    from this host: the harvest that was killed before the one holding it now is named
    only if nothing else comes, and then as one that may have ended (a process of
    another PID namespace, a container's, looks gone from here while it runs).
    """
    deadline = time.monotonic() + _HOLDER_WAIT
    while True:
        holder = _read_holder(info_path)
        if holder is not None and not _gone(holder):
            return f"pid {holder['pid']} on {holder['host']}, since {holder['since']}"
        if time.monotonic() >= deadline:
            if holder is None:
                return "which one, it does not say"
            return (
                f"pid {holder['pid']} on {holder['host']}, since {holder['since']}, as far "
                "as it says: that process may have ended"
            )
        time.sleep(0.01)


def _read_holder(info_path: str) -> dict[str, Any] | None:
    try:
        with open(info_path, encoding="utf-8") as file:
            holder = json.loads(file.read(4096))
        pid = int(holder["pid"])
        found = {"pid": pid, "host": str(holder["host"]), "since": str(holder["since"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return found if pid > 0 else None


def _gone(holder: dict[str, Any]) -> bool:
    """Whether ``holder`` is a process of this host that has ended (elsewhere: unknown)."""
    if os.name != "posix" or holder["host"] != socket.gethostname():
        return False  # Windows' os.kill(pid, 0) sends a CTRL_C_EVENT: never asked there
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it runs, as another user (EPERM)
    return False


class HarvestLock:
    """The exclusive hold of one harvest on ``path`` (its state, or its output).

    Arguments:
        path: the file to hold; the lock files go beside where it really is (a symbolic
            link is followed, so two names of one file are one lock).
        what: the file's role, for the message (``"state"``, ``"output"``).
        error: what a refusal raises (``StateError`` or ``OutputFileError``).
    """

    def __init__(self, path: str | os.PathLike[str], what: str, error: FileInUse) -> None:
        self.path = os.fspath(path)
        self._what = what
        self._error = error
        real = os.path.realpath(self.path)
        self.lock_path = f"{real}.lock"
        self.info_path = f"{real}.lock.info"
        self._lock: filelock.BaseFileLock | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock now."""
        return self._lock is not None

    def acquire(self) -> None:
        """Take the lock now, or raise the ``error`` naming who holds it. Never waits for
        the lock; a refusal may read who holds it for up to ``_HOLDER_WAIT`` seconds (call
        it off the event loop)."""
        if self._lock is not None:
            return
        for _ in range(_ATTEMPTS):
            lock = filelock.FileLock(self.lock_path, thread_local=False)
            try:
                lock.acquire(timeout=0)
            except filelock.Timeout:
                self._check_lock_file_can_be_made()
                raise self._error(
                    f"{self.path} is in use by another harvest ({_holder_text(self.info_path)}): "
                    f"one harvest at a time uses a harvest's {self._what}. Wait for that one "
                    "to end, or stop it (a harvest that was killed holds nothing)",
                    path=self.path,
                ) from None
            except OSError as exc:  # a folder it may not write, a read-only file system
                raise self._cannot_make(exc) from None
            if self._names_the_locked_file(lock):
                self._lock = lock
                self._write_info()
                return
            lock.release()  # its holder removed it as we took it: take the one there now
        raise self._error(f"{self.path}: its lock file keeps being replaced", path=self.path)

    def _check_lock_file_can_be_made(self) -> None:
        """Raise the ``error`` naming why, if the lock file cannot be opened at all: filelock
        reports some such failures (beside a file in ``/proc``) as a timeout, and the user
        would be sent looking for another harvest that is not there."""
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise self._cannot_make(exc) from None
        os.close(fd)

    def _cannot_make(self, exc: OSError) -> MagisteriumError:
        return self._error(
            f"{self.path}: cannot make its lock file {self.lock_path} ({exc.strerror or exc}): "
            f"a harvest's {self._what} must be in a folder it may write",
            path=self.path,
        )

    def _names_the_locked_file(self, lock: filelock.BaseFileLock) -> bool:
        fd = getattr(getattr(lock, "_context", None), "lock_file_fd", None)
        if not isinstance(fd, int):
            return True  # a filelock that does not say: trusted (and its file never removed)
        try:
            return os.path.samestat(os.fstat(fd), os.stat(self.lock_path))
        except OSError:
            return False

    def _write_info(self) -> None:
        since = dt.datetime.now().astimezone().isoformat(timespec="seconds")
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": since}
        partial = f"{self.info_path}.{os.getpid()}"
        with contextlib.suppress(OSError):  # the lock holds without it; only the message is poorer
            with open(partial, "w", encoding="utf-8") as file:
                json.dump(info, file)
            os.replace(partial, self.info_path)

    def release(self) -> None:
        """Let the lock go and remove its files. Idempotent."""
        lock, self._lock = self._lock, None
        if lock is None:
            return
        with contextlib.suppress(OSError):
            os.remove(self.info_path)
        fd = getattr(getattr(lock, "_context", None), "lock_file_fd", None)
        if isinstance(fd, int):  # see _names_the_locked_file: only where a taker can tell
            with contextlib.suppress(OSError):
                os.remove(self.lock_path)
        lock.release()

    def __enter__(self) -> HarvestLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
