"""Answers on disk: one SQLite file that outlives the process and serves several at once.

The file is in WAL mode (readers never wait for the writer; ``synchronous=NORMAL``: a
committed answer survives the process being killed), every statement waits up to
:data:`BUSY_TIMEOUT` for another process's write, and each read or write is one
transaction, so processes sharing the file never see half an entry. ``last_used`` orders
the eviction: past :class:`~._policy.CachePolicy`'s bounds, the expired go first, then the
least recently used.

The file is marked as this cache's (``PRAGMA application_id``): a file without the mark
that holds anything is refused at construction and never written (a user who names the
harvest's state, or any other database, by mistake loses nothing). The connection runs
in a worker thread, one call at a time, off the event loop.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

from magisterium_async._cache._memory import StoreUnavailable
from magisterium_async._errors import CacheError
from magisterium_async._files import describe, kind_of

__all__ = ["APPLICATION_ID", "BUSY_TIMEOUT", "DiskAnswers", "check_cache_file"]

T = TypeVar("T")

APPLICATION_ID = int.from_bytes(b"MgAc", "big")
"""``PRAGMA application_id`` of a cache file: what says the file is ours."""
_SCHEMA_VERSION = 1
BUSY_TIMEOUT = 5.0
"""Seconds a statement waits for another process's write before giving up (then the
call goes to the service, and the cache is bypassed for a while)."""
_SQLITE_MAGIC = b"SQLite format 3\x00"
_SCHEMA = (
    "CREATE TABLE answers ("
    " key TEXT PRIMARY KEY,"
    " value BLOB NOT NULL,"
    " size INTEGER NOT NULL,"
    " expires REAL NOT NULL,"
    " last_used REAL NOT NULL) WITHOUT ROWID",
    "CREATE INDEX answers_by_use ON answers (last_used)",
)


def check_cache_file(path: str) -> None:
    """Refuse ``path`` unless it is missing, empty, or a cache file this library made.

    Read-only: the file is never opened for writing here. Raises :class:`CacheError`
    naming the path.
    """
    kind = kind_of(path)  # looked at first: a FIFO or a device would block an open()
    if kind not in ("missing", "file"):
        raise CacheError(f"cache {path!r} is {describe(kind)}; name a file (e.g. cache.sqlite)")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise CacheError(f"cache {path!r}: the directory {parent!r} does not exist")
    header: bytes | None = None
    try:
        if kind == "file":
            with open(path, "rb") as file:
                header = file.read(100)
    except OSError as exc:
        raise CacheError(f"cache {path!r} cannot be read: {exc.strerror or exc}") from None
    # An empty file is what SQLite leaves before its first write: a cache's, as is none.
    if header and (len(header) < 72 or not header.startswith(_SQLITE_MAGIC)):
        raise CacheError(f"cache {path!r} is not a cache file (not SQLite); it is left as it is")
    if header and int.from_bytes(header[68:72], "big") != APPLICATION_ID:
        raise CacheError(
            f"cache {path!r} is an SQLite database this library did not make; "
            "it is left as it is: name another file"
        )
    # Refused now rather than found at the first call (then only a warning, and every
    # call would go to the service): a cache that can never be written is a wrong name.
    # SQLite writes its journal beside the file: the directory must take writes too.
    must_write = [(parent, f"its directory {parent!r}")]
    if header is not None:
        must_write.append((path, "the file"))
    for writable, what in must_write:
        if not os.access(writable, os.W_OK):
            raise CacheError(
                f"cache {path!r} cannot be written ({what} is read-only): name another file"
            )


class DiskAnswers:
    """Answers in an SQLite file, bounded in entries and bytes.

    Arguments:
        path: the file (created on first use, with its ``-wal`` and ``-shm`` beside it).
        max_entries: answers held at most.
        max_bytes: bytes of answers held at most.

    Processes sharing the file share its answers, not their calls in flight (that is
    the Redis store's: a disk is one host's, where one process usually serves).
    """

    def __init__(self, path: str | os.PathLike[str], max_entries: int, max_bytes: int) -> None:
        self.path = os.fspath(path)
        check_cache_file(self.path)
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._db: sqlite3.Connection | None = None
        self._entries: int | None = None
        self._closed = False
        self._lock = threading.Lock()  # the connection, between the thread and aclose
        self._limiter: anyio.CapacityLimiter | None = None

    def __repr__(self) -> str:
        return f"DiskAnswers({self.path!r})"

    @property
    def where(self) -> str:
        return self.path

    @property
    def entries(self) -> int | None:
        return self._entries

    async def get(self, key: str, now: float) -> bytes | None:
        return await self._run(lambda db: self._get(db, key, now))

    async def put(self, key: str, value: bytes, expires: float, now: float) -> None:
        await self._run(lambda db: self._put(db, key, value, expires, now))

    async def aclose(self) -> None:
        with self._lock:
            self._closed = True
            db, self._db = self._db, None
        if db is not None:
            db.close()

    # In the worker thread ---------------------------------------------------------

    async def _run(self, step: Callable[[sqlite3.Connection], T]) -> T:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(1)
        try:
            # Not abandoned on cancellation: a transaction, once begun, finishes.
            return await anyio.to_thread.run_sync(self._in_thread, step, limiter=self._limiter)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from None
        except CacheError as exc:  # another program made the file since construction
            raise StoreUnavailable(str(exc)) from None
        except OSError as exc:
            raise StoreUnavailable(exc.strerror or str(exc)) from None

    def _in_thread(self, step: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            if self._closed:
                raise StoreUnavailable("the cache is closed")
            if self._db is None:
                self._db = self._open()
            return step(self._db)

    def _open(self) -> sqlite3.Connection:
        check_cache_file(self.path)  # again: another process may have made it since
        db = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
        )
        try:
            self._prepare(db)
        except BaseException:
            db.close()
            raise
        return db

    def _prepare(self, db: sqlite3.Connection) -> None:
        # The mark and the schema first, in one transaction of the rollback journal: the
        # mark lands in the file's header before any other process can look at it.
        db.execute("BEGIN IMMEDIATE")
        try:
            (app_id,) = db.execute("PRAGMA application_id").fetchone()
            if app_id == 0:
                (tables,) = db.execute("SELECT count(*) FROM sqlite_master").fetchone()
                if tables:
                    raise CacheError(
                        f"cache {self.path!r} is an SQLite database this library did not "
                        "make; it is left as it is: name another file"
                    )
                db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
                for statement in _SCHEMA:
                    db.execute(statement)
            elif app_id != APPLICATION_ID:
                raise CacheError(f"cache {self.path!r} is not a cache file; left as it is")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        (self._entries,) = db.execute("SELECT count(*) FROM answers").fetchone()

    def _get(self, db: sqlite3.Connection, key: str, now: float) -> bytes | None:
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
            if row is not None:
                db.execute("UPDATE answers SET last_used = ? WHERE key = ?", (now, key))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return None if row is None else bytes(row[0])

    def _put(
        self, db: sqlite3.Connection, key: str, value: bytes, expires: float, now: float
    ) -> None:
        size = len(key) + len(value)
        if size > self._max_bytes:
            return  # larger than the whole cache: not kept
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(
                "INSERT OR REPLACE INTO answers (key, value, size, expires, last_used)"
                " VALUES (?, ?, ?, ?, ?)",
                (key, value, size, expires, now),
            )
            entries, total = db.execute("SELECT count(*), total(size) FROM answers").fetchone()
            if entries > self._max_entries or total > self._max_bytes:
                entries = self._evict(db, entries, total, now)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._entries = entries

    def _evict(self, db: sqlite3.Connection, entries: int, total: float, now: float) -> int:
        """Delete the expired, then the least recently used, until within the bounds."""
        gone = db.execute("DELETE FROM answers WHERE expires <= ?", (now,)).rowcount
        if gone:
            entries, total = db.execute("SELECT count(*), total(size) FROM answers").fetchone()
        doomed: list[tuple[str]] = []
        rows = db.execute("SELECT key, size FROM answers ORDER BY last_used")
        for key, size in rows:
            if entries <= self._max_entries and total <= self._max_bytes:
                break
            doomed.append((key,))
            entries -= 1
            total -= size
        rows.close()
        db.executemany("DELETE FROM answers WHERE key = ?", doomed)
        return int(entries)
