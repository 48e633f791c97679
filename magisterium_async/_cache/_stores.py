"""Where answers are kept: in memory, in an SQLite file, in Redis; and what each raises
when it cannot do its job.

A store keeps bytes by key and knows nothing of answers: the front
(:class:`~magisterium_async._cache._answers.AnswerCache`) says how long each is fresh and
reads only fresh ones. Each store offers ``where`` and ``entries`` (for messages and
stats), ``get`` (Redis: ``claim``, which reads the answer as it claims), ``put`` and
``aclose``; ``get`` and ``put`` take ``now`` (wall-clock seconds) from the front, so
freshness and use are reckoned on one clock, injected in tests. A store
that cannot do its job now raises one of :data:`UNAVAILABLE`; the front then goes without
it.
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from magisterium_async._errors import CacheError
from magisterium_async._files import describe, kind_of
from magisterium_async._redis import RedisUnavailable, connect

T = TypeVar("T")


class StoreUnavailable(Exception):
    """The file cannot be read or written now (locked, corrupt, closed): why, with nothing
    secret in it."""


UNAVAILABLE = (StoreUnavailable, RedisUnavailable)
"""What a store raises when it cannot do its job now: the file's, Redis's (which did not
answer; a Redis that refused is a :class:`CacheError`, said, not bypassed)."""


class MemoryAnswers:
    """Answers in this process's memory: an LRU bounded in entries and bytes."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0  # of keys and values
        self.where = "memory"

    @property
    def entries(self) -> int:
        return len(self._items)

    async def get(self, key: str, now: float) -> bytes | None:
        """The bytes kept under ``key`` (now counted as used), or ``None``."""
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    async def put(self, key: str, value: bytes, expires: float, now: float) -> None:
        """Keep ``value`` under ``key``; it may be dropped once ``expires`` has passed."""
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= len(key) + len(old)
        if len(key) + len(value) > self._max_bytes:
            return  # larger than the whole cache: not kept
        self._items[key] = value
        self._bytes += len(key) + len(value)
        while len(self._items) > self._max_entries or self._bytes > self._max_bytes:
            evicted, dropped = self._items.popitem(last=False)
            self._bytes -= len(evicted) + len(dropped)

    async def aclose(self) -> None:
        self._items.clear()
        self._bytes = 0


# In an SQLite file --------------------------------------------------------------------

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
# Past the bounds: the least recently used go, until the rest is within them.
_EVICT = (
    "DELETE FROM answers WHERE key IN (SELECT key FROM (SELECT key,"
    " row_number() OVER newest AS n, sum(size) OVER newest AS total FROM answers"
    " WINDOW newest AS (ORDER BY last_used DESC, key ROWS UNBOUNDED PRECEDING))"
    " WHERE n > ? OR total > ?)"
)


def _not_ours(path: str) -> CacheError:
    return CacheError(
        f"cache {path!r} is an SQLite database this library did not make; "
        "it is left as it is: name another file"
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
        raise _not_ours(path)
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
    """Answers in an SQLite file that outlives the process and serves several at once,
    bounded in entries and bytes (``docs/caching.md``, "The stores").

    Arguments:
        path: the file (created on first use, with its ``-wal`` and ``-shm`` beside it).
        max_entries: answers held at most.
        max_bytes: bytes of answers held at most.

    Every statement waits up to :data:`BUSY_TIMEOUT` for another process's write
    (``synchronous=NORMAL``: a committed answer survives the process being killed). The
    file is marked as this cache's (``PRAGMA application_id``). The connection runs in a
    worker thread, one call at a time.
    """

    def __init__(self, path: str | os.PathLike[str], max_entries: int, max_bytes: int) -> None:
        self.path = self.where = os.fspath(path)
        check_cache_file(self.path)
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._db: sqlite3.Connection | None = None
        self.entries: int | None = None
        self._closed = False
        self._lock = threading.Lock()  # the connection, between the thread and aclose
        self._limiter: anyio.CapacityLimiter | None = None

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

    async def _run(self, step: Callable[[sqlite3.Connection], T]) -> T:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(1)
        try:
            # Not abandoned on cancellation: a transaction, once begun, finishes.
            return await anyio.to_thread.run_sync(self._in_thread, step, limiter=self._limiter)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from None
        except (CacheError, OSError) as exc:  # another program made the file since
            raise StoreUnavailable(getattr(exc, "strerror", None) or str(exc)) from None

    # In the worker thread: each step one transaction (``with db``: committed, or rolled
    # back on an error).

    def _in_thread(self, step: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            if self._closed:
                raise StoreUnavailable("the cache is closed")
            if self._db is None:
                check_cache_file(self.path)  # again: another process may have made it since
                db = sqlite3.connect(
                    self.path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
                )
                try:
                    self._prepare(db)
                except BaseException:
                    db.close()
                    raise
                self._db = db
            return step(self._db)

    def _prepare(self, db: sqlite3.Connection) -> None:
        # The mark and the schema first, in one transaction of the rollback journal: the
        # mark lands in the file's header before any other process can look at it.
        with db:
            db.execute("BEGIN IMMEDIATE")
            (app_id,) = db.execute("PRAGMA application_id").fetchone()
            (tables,) = db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            if app_id != APPLICATION_ID and (app_id or tables):
                raise _not_ours(self.path)
            if not app_id:
                db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
                for statement in _SCHEMA:
                    db.execute(statement)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        (self.entries,) = db.execute("SELECT count(*) FROM answers").fetchone()

    def _get(self, db: sqlite3.Connection, key: str, now: float) -> bytes | None:
        with db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
            if row is not None:
                db.execute("UPDATE answers SET last_used = ? WHERE key = ?", (now, key))
        return None if row is None else bytes(row[0])

    def _put(
        self, db: sqlite3.Connection, key: str, value: bytes, expires: float, now: float
    ) -> None:
        size = len(key) + len(value)
        if size > self._max_bytes:
            return  # larger than the whole cache: not kept
        with db:
            db.execute("BEGIN IMMEDIATE")
            db.execute(
                "INSERT OR REPLACE INTO answers (key, value, size, expires, last_used)"
                " VALUES (?, ?, ?, ?, ?)",
                (key, value, size, expires, now),
            )
            count, total = db.execute("SELECT count(*), total(size) FROM answers").fetchone()
            if count > self._max_entries or total > self._max_bytes:
                db.execute("DELETE FROM answers WHERE expires <= ?", (now,))
                db.execute(_EVICT, (self._max_entries, self._max_bytes))
                (count,) = db.execute("SELECT count(*) FROM answers").fetchone()
        self.entries = count


# In Redis -------------------------------------------------------------------------------

PREFIX = "magisterium:cache:"
CLAIMS = "magisterium:cache-claim:"
TIMEOUT = 1.0
"""Seconds one Redis command may take: a cache slower than that is worth less than the
request it would save, so the call goes to the service instead."""

# KEYS: the answer, its claim. ARGV: the answer, its time to live (ms).
_PUT = """
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('DEL', KEYS[2])
return 1
"""

# KEYS: the answer, its claim. ARGV: the claim's time to live (ms), its owner. Returns
# {0, answer} when there is one, else {1} when the claim is the owner's (new, or its own
# renewed: the rest of a call whose first step did not hear the reply), else {0}.
_CLAIM = """
local answer = redis.call('GET', KEYS[1])
if answer then return {0, answer} end
if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[1]) then return {1} end
if redis.call('GET', KEYS[2]) == ARGV[2] then
  redis.call('PEXPIRE', KEYS[2], ARGV[1])
  return {1}
end
return {0}
"""

# KEYS: a claim. ARGV: its owner. Deleted only if it is still the owner's.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RedisAnswers:
    """Answers in Redis: one cache for every process and host that names the same server
    (``docs/caching.md``, "The stores").

    Arguments:
        url: the server, in any form :mod:`magisterium_async._redis` takes.

    Each answer is one string key under :data:`PREFIX`, its freshness its TTL. It shares
    calls in flight between hosts too: a call about to ask the service *claims* the key
    (:meth:`claim`: a key under :data:`CLAIMS`, ``SET NX`` with a TTL, holding a token of
    the client's own), and calls elsewhere wait for its answer (claiming again), going ahead
    themselves if the claim is given up or runs out. An answer's key and its claim's share
    a hash tag: on a Cluster both are in one slot, and the scripts that touch both stay
    atomic.
    """

    def __init__(self, url: str | Any) -> None:
        self._connection = connect(url, TIMEOUT, CacheError, "the cache")
        self.where = self._connection.where
        self.entries = None  # counting keys under a prefix takes a SCAN of the whole server
        redis: Any = self._connection.client
        self._redis = redis
        # Scripts, not MULTI: atomic on one Redis and on a Cluster alike, where redis-py's
        # transactional pipeline is not safe to mix with the application's own commands.
        self._put, self._claim = redis.register_script(_PUT), redis.register_script(_CLAIM)
        self._release = redis.register_script(_RELEASE)

    async def put(self, key: str, value: bytes, expires: float, now: float) -> None:
        """Keep ``value`` under ``key`` until ``expires`` (its TTL), giving up the key's
        claim with it."""
        keys = [f"{PREFIX}{{{key}}}", f"{CLAIMS}{{{key}}}"]
        args = [value, math.ceil((expires - now) * 1000)]  # the front keeps only fresh ones
        await self._connection.run(self._put(keys=keys, args=args))

    async def claim(self, key: str, seconds: float, owner: str) -> tuple[bytes | None, bool]:
        """The bytes under ``key`` if there are some now; else claim ``key`` for
        ``seconds`` under ``owner`` (a token of the claimant's own): ``True`` if no one
        else held it (a claim of ``owner``'s own is renewed: then send, and :meth:`put` or
        :meth:`release`), ``False`` if someone does (wait for it). In one step, so an
        answer that lands just before the claim is never asked for again."""
        keys = [f"{PREFIX}{{{key}}}", f"{CLAIMS}{{{key}}}"]
        args = [max(1, math.ceil(seconds * 1000)), owner]
        reply = await self._connection.run(self._claim(keys=keys, args=args))
        if len(reply) > 1:
            return bytes(reply[1]), False
        return None, bool(reply[0])

    async def release(self, key: str, owner: str) -> None:
        """Give up ``owner``'s claim on ``key`` without an answer to keep; a claim someone
        else holds now is left alone."""
        await self._connection.run(self._release(keys=[f"{CLAIMS}{{{key}}}"], args=[owner]))

    async def aclose(self) -> None:
        await self._connection.aclose()
