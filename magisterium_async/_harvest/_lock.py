"""One harvest at a time on a file: an exclusive OS lock beside it, and who holds it.

A harvest's state and its output are each held while it runs by an exclusive OS lock
(``filelock``: ``flock`` on Unix, ``LockFileEx`` on Windows) on ``PATH.lock`` beside them
(never the user's file itself), with who holds it (pid, host, since when) in
``PATH.lock.info``, so a second harvest is refused at once naming the first. The lock is
the operating system's: a harvest killed outright holds nothing. Both files are removed
while the lock is still held (``filelock`` leaves its file): a process that had opened the
removed file sees that the path names another file, or none, and tries again.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import stat
import time
from collections.abc import Callable

import filelock

from magisterium_async._errors import MagisteriumError

_ATTEMPTS = 5  # lock files found removed under us before giving up, in a row
# How long a refusal reads the holder's .info again while it names nobody, or a process
# this host no longer runs: the holder writes it just after taking the lock, over the one a
# killed harvest left.
_HOLDER_WAIT = 2.0


def _holder(info_path: str) -> str:
    """``pid 123 on host, since 2026-12-02T14:03:05+01:00``, or a word that it is unknown
    (or, from another PID namespace, a container's, may have ended)."""
    deadline = time.monotonic() + _HOLDER_WAIT
    while True:
        try:
            with open(info_path, encoding="utf-8") as file:
                info = json.loads(file.read(4096))
            pid, host = int(info["pid"]), str(info["host"])
            said = f"pid {pid} on {host}, since {info['since']}"
        except (OSError, ValueError, KeyError, TypeError):
            said = ""
        if said and not _ended(pid, host):
            return said
        if time.monotonic() >= deadline:
            if not said:
                return "which one, it does not say"
            return f"{said}, as far as it says: that process may have ended"
        time.sleep(0.01)


def _ended(pid: int, host: str) -> bool:
    """Whether ``pid`` is a process of this host that has ended (elsewhere: unknown)."""
    if os.name != "posix" or host != socket.gethostname():
        return False  # Windows' os.kill(pid, 0) sends a CTRL_C_EVENT: never asked there
    try:
        os.kill(pid, 0)
    except OSError as exc:  # EPERM: it runs, as another user
        return isinstance(exc, ProcessLookupError)
    return False


class HarvestLock:
    """The exclusive hold of one harvest on ``path`` (its state, or its output).

    Arguments:
        path: the file to hold; the lock files go beside where it really is (a symbolic
            link is followed, so two names of one file are one lock).
        what: the file's role, for the message (``"state"``, ``"output"``).
        error: what a refusal raises (``StateError`` or ``OutputFileError``).
    """

    def __init__(
        self, path: str | os.PathLike[str], what: str, error: Callable[..., MagisteriumError]
    ) -> None:
        self.path = os.fspath(path)
        self._what = what
        self._error = error
        real = os.path.realpath(self.path)
        self.lock_path, self.info_path = f"{real}.lock", f"{real}.lock.info"
        self._lock: filelock.BaseFileLock | None = None

    def acquire(self) -> None:
        """Take the lock now, or raise the ``error`` naming who holds it. Never waits for
        the lock; a refusal may read who holds it for up to two seconds (call it off the
        event loop). Called once per HarvestLock."""
        for _ in range(_ATTEMPTS):
            lock = filelock.FileLock(self.lock_path, thread_local=False)
            try:
                lock.acquire(timeout=0)
            except filelock.Timeout:
                # filelock says Timeout for a lock file it cannot open (beside a file in
                # /proc): never send the user looking for a harvest that is not there.
                try:
                    os.close(os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644))
                except OSError as exc:
                    raise self._cannot_make(exc) from None
                raise self._error(
                    f"{self.path} is in use by another harvest ({_holder(self.info_path)}): "
                    f"one harvest at a time uses a harvest's {self._what}. Wait for that one "
                    "to end, or stop it (a harvest that was killed holds nothing)",
                    path=self.path,
                ) from None
            except OSError as exc:  # a folder it may not write, a read-only file system
                raise self._cannot_make(exc) from None
            if self._names_the_locked_file(lock):
                self._lock = lock
                self._refuse_other_names()
                self._write_info()
                return
            lock.release()  # its holder removed it as we took it: take the one there now
        raise self._error(f"{self.path}: its lock file keeps being replaced", path=self.path)

    def _refuse_other_names(self) -> None:
        # The lock is taken by name: a hard link is a second name whose lock another
        # harvest could take, and both would use one file at once.
        try:
            found = os.stat(self.path)
        except OSError:
            return  # not made yet: it is made under this lock, with one name
        names = found.st_nlink
        if stat.S_ISREG(found.st_mode) and names > 1:  # a directory's links are its own
            self.release()
            raise self._error(
                f"{self.path} has {names} names (hard links): a harvest locks its "
                f"{self._what} by name, so a harvest's {self._what} must have one name "
                "(a copy, not a link)",
                path=self.path,
            )

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
        if isinstance(getattr(getattr(lock, "_context", None), "lock_file_fd", None), int):
            with contextlib.suppress(OSError):  # only where a taker can tell (see above)
                os.remove(self.lock_path)
        lock.release()

    def __enter__(self) -> HarvestLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
