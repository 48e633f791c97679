"""The harvest's state in SQLite: its schema, every statement, and its async face.

A state file records a harvest as it goes, so that a resumed harvest never asks again for
an answer it recorded. :class:`Store` is the synchronous side (one connection, used by
one thread at a time, each method one transaction); :class:`HarvestState` runs each of
its calls in a worker thread, one at a time, each as one transaction that cancellation
does not cut short; a failure of the database is a :class:`StateError` naming the file.
The database is in WAL mode with ``synchronous=NORMAL``, so a committed transaction
survives the process being killed (not necessarily a power cut). One harvest at a time
uses a state: :mod:`._lock` holds it while the harvest runs.

**A file the harvest did not create is never written.** A state is made only where no
file is; an existing file is first read as plain bytes (its SQLite header) and must carry
the harvest's ``PRAGMA application_id`` (:data:`APPLICATION_ID`) and its
``user_version`` (:data:`SCHEMA_VERSION`). Anything else (a user's database, an empty
file, notes, a state of another version) is refused before any write, WAL switch
included, and left byte for byte.

Queries (``queries``, ``id`` in the order they were first taken):

- ``pending``: taken by a run, answer not recorded yet (searched again by a later run);
- ``searched``: answered; ``ids`` holds the JSON list of the ids it returned;
- ``failed``: failed after retries in run ``run`` (searched again by a later run).

``run`` is the last run that took the query (searched it, or skipped it as answered), so
a run tells a query its input repeats from one an earlier run answered.

Documents (``documents``, ``seq`` in discovery order):

- ``pending``: found by a search, not fetched yet;
- ``fetched``: fetched, not yet handed over (or not yet acknowledged);
- ``delivered``: fetched and handed over; ``line`` is its place in the order of
  deliveries (1, 2, ...: the order of the lines of the harvest's output);
- ``not_found``: the service answered "Document not found.";
- ``failed``: failed after retries (fetched again by a later run).

``body`` (fetched and delivered documents, in a state file) is the document as the harvest
hands it over, exactly the bytes of its JSON Lines record without the newline (the
:class:`HarvestedDocument`, with the queries known when it was fetched), compressed with
zlib: what :meth:`Store.lines` rebuilds the output from, with no request. A temporary
state keeps no bodies.

``fetched_run`` is the run that fetched a document: only documents fetched by an *earlier*
run are handed over again from the state. ``found`` holds one row per (document, query)
that found it: the provenance of every document, kept across runs.

``meta`` holds ``runs`` (the number of the last run) and ``output``: where the harvest's
output file was left (a JSON :class:`OutputMark`: device, inode, the offset of its last
whole record and a fingerprint of the bytes before it), so a resume appends only to the
file it wrote, as it left it.

A state of another schema version is refused (nothing was released before this one).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Literal, NamedTuple, TypeVar

import anyio
import anyio.to_thread
import msgspec

from magisterium_async._errors import StateError
from magisterium_async._harvest._jsonl import OutputMark
from magisterium_async._harvest._results import HarvestedDocument, harvested
from magisterium_async._models import Document

__all__ = [
    "APPLICATION_ID",
    "DAMAGED_STATE",
    "SCHEMA",
    "SCHEMA_VERSION",
    "Fetched",
    "FoundId",
    "HarvestState",
    "HeldDocument",
    "QueryClaim",
    "Searched",
    "StateSummary",
    "Store",
    "answered",
    "check_is_state",
    "is_finished",
]

T = TypeVar("T")

APPLICATION_ID = 0x6D616876  # "mahv": magisterium_async harvest, in the SQLite header
SCHEMA_VERSION = 3
_QUERIES = (
    "CREATE TABLE queries ("
    " id INTEGER PRIMARY KEY,"
    " query TEXT NOT NULL UNIQUE,"
    " status TEXT NOT NULL CHECK (status IN ('pending', 'searched', 'failed')),"
    " run INTEGER NOT NULL,"
    " ids TEXT,"
    " error TEXT)"
)
_FOUND = (
    "CREATE TABLE found ("
    " document INTEGER NOT NULL,"
    " query INTEGER NOT NULL,"
    " PRIMARY KEY (document, query)) WITHOUT ROWID"
)
SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    _QUERIES,
    "CREATE TABLE documents ("
    " seq INTEGER PRIMARY KEY,"
    " id TEXT NOT NULL UNIQUE,"
    " status TEXT NOT NULL"
    "  CHECK (status IN ('pending', 'fetched', 'delivered', 'not_found', 'failed')),"
    " body BLOB,"
    " error TEXT,"
    " fetched_run INTEGER,"
    " line INTEGER UNIQUE)",
    _FOUND,
)
_MAGIC = b"SQLite format 3\x00"

QueryClaim = Literal["search", "recorded", "duplicate"]
"""What to do with a query: search it, or skip it (answered earlier, or already taken)."""


class Searched(NamedTuple):
    """A search's answer: the ids it found (in order), or the error it raised."""

    query: str
    ids: list[str] | None
    error: Exception | None


class Fetched(NamedTuple):
    """A fetch's answer: the document (``None``: not found), or the error it raised."""

    id: str
    document: Document | None
    error: Exception | None


class HeldDocument(NamedTuple):
    """A document an earlier run fetched and did not deliver, as it is handed over."""

    seq: int
    document: HarvestedDocument


class FoundId(NamedTuple):
    """An id an earlier run found and did not fetch (or failed to), by discovery order."""

    seq: int
    id: str


_DOCUMENT = msgspec.json.Decoder(HarvestedDocument)
_LEVEL = 6  # zlib's default: within a few percent of 9's size, several times faster
_MARK = msgspec.json.Decoder(OutputMark)
_ENCODER = msgspec.json.Encoder()


@dataclass(frozen=True)
class StateSummary:
    """Counts of a state file: queries and documents by status."""

    queries: dict[str, int]
    documents: dict[str, int]
    runs: int


def _not_a_state(path: str, why: str) -> StateError:
    return StateError(
        f"{path} is not a harvest state ({why}); it was left as it is. Give the harvest a "
        "path where no file is, and it makes its state there",
        path=path,
    )


def check_is_state(path: str) -> None:
    """:class:`StateError` unless the existing file at ``path`` is a harvest's state, of
    this schema version.

    Reads only the header, as plain bytes: a refused file is left byte for byte (no
    journal switch, no change counter bumped).
    """
    try:
        with open(path, "rb") as file:
            header = file.read(100)
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise StateError(f"cannot read the harvest state {path}: {why}", path=path) from None
    if len(header) < 100 or not header.startswith(_MAGIC):
        raise _not_a_state(path, "not an SQLite database" if header else "an empty file")
    user_version = int.from_bytes(header[60:64], "big")
    application_id = int.from_bytes(header[68:72], "big")
    if application_id == 0:
        raise _not_a_state(path, "an SQLite database the harvest did not create")
    if application_id != APPLICATION_ID:
        raise _not_a_state(path, f"the database of another application, id {application_id:#x}")
    if user_version != SCHEMA_VERSION:
        raise StateError(
            f"harvest state {path!r} has schema version {user_version}; this version of "
            f"magisterium_async reads version {SCHEMA_VERSION}; it was left as it is",
            path=path,
        )


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


class Store:
    """The synchronous side: one connection, used by one thread at a time."""

    def __init__(self, path: str, keep_bodies: bool, new_run: bool) -> None:
        self.path = path
        self.keep_bodies = keep_bodies
        if path and os.path.lexists(path):
            check_is_state(path)  # before SQLite touches it: nothing of a foreign file changes
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA busy_timeout=5000")
            with _transaction(self.db):
                self._migrate(path)
                self.run = self._begin_run(new_run)
            self.snapshot = self.db.execute(
                "SELECT coalesce(max(seq), 0) FROM documents"
            ).fetchone()[0]
        except BaseException:
            self.db.close()
            raise

    def _migrate(self, path: str) -> None:
        if self.db.execute("PRAGMA user_version").fetchone()[0] == 0:
            # A database this call made: check_is_state let no other file by.
            for statement in SCHEMA:
                self.db.execute(statement)
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self.db.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    def _begin_run(self, new_run: bool) -> int:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'runs'").fetchone()
        run = int(row[0]) if row else 0
        if not new_run:
            return run
        run += 1
        self.db.execute("INSERT OR REPLACE INTO meta VALUES ('runs', ?)", (str(run),))
        return run

    def claim_query(self, query: str) -> QueryClaim:
        with _transaction(self.db):
            row = self.db.execute(
                "SELECT status, run FROM queries WHERE query = ?", (query,)
            ).fetchone()
            if row is None:
                self.db.execute(
                    "INSERT INTO queries (query, status, run) VALUES (?, 'pending', ?)",
                    (query, self.run),
                )
                return "search"
            status, run = row
            if run == self.run:  # taken by this run already: the input repeats it
                return "duplicate"
            if status == "searched":
                # Taken by this run, not searched: a repeat later in the input is then
                # told from a query an earlier run answered.
                self.db.execute("UPDATE queries SET run = ? WHERE query = ?", (self.run, query))
                return "recorded"
            self.db.execute(
                "UPDATE queries SET status = 'pending', run = ?, error = NULL WHERE query = ?",
                (self.run, query),
            )
            return "search"

    def record_searches(self, outcomes: Sequence[Searched]) -> list[str]:
        new: list[str] = []
        with _transaction(self.db):
            for query, ids, error in outcomes:
                if ids is None:
                    self.db.execute(
                        "UPDATE queries SET status = 'failed', error = ? WHERE query = ?",
                        (repr(error), query),
                    )
                    continue
                # Not UPDATE ... RETURNING: SQLite has it only from 3.35 (2021), newer than
                # the SQLite of some systems Python 3.10 runs on.
                (query_id,) = self.db.execute(
                    "SELECT id FROM queries WHERE query = ?", (query,)
                ).fetchone()
                self.db.execute(
                    "UPDATE queries SET status = 'searched', ids = ?, error = NULL WHERE id = ?",
                    (json.dumps(ids), query_id),
                )
                for document_id in ids:
                    cursor = self.db.execute(
                        "INSERT OR IGNORE INTO documents (id, status) VALUES (?, 'pending')",
                        (document_id,),
                    )
                    if cursor.rowcount == 1:
                        new.append(document_id)
                        seq = cursor.lastrowid
                    else:
                        (seq,) = self.db.execute(
                            "SELECT seq FROM documents WHERE id = ?", (document_id,)
                        ).fetchone()
                    self.db.execute(
                        "INSERT OR IGNORE INTO found (document, query) VALUES (?, ?)",
                        (seq, query_id),
                    )
        return new

    def output(self) -> OutputMark | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'output'").fetchone()
        return None if row is None else _MARK.decode(row[0])

    def _record_output(self, mark: OutputMark) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO meta VALUES ('output', ?)", (_ENCODER.encode(mark).decode(),)
        )

    def record_output(self, mark: OutputMark) -> None:
        with _transaction(self.db):
            self._record_output(mark)

    def record_fetches(
        self,
        outcomes: Sequence[Fetched],
        delivered: Sequence[str],
        output: OutputMark | None = None,
    ) -> dict[str, HarvestedDocument]:
        found: dict[str, HarvestedDocument] = {}
        with _transaction(self.db):
            if output is not None:
                self._record_output(output)
            for document_id, document, error in outcomes:
                if error is not None:
                    self.db.execute(
                        "UPDATE documents SET status = 'failed', error = ? WHERE id = ?",
                        (repr(error), document_id),
                    )
                elif document is None:
                    self.db.execute(
                        "UPDATE documents SET status = 'not_found' WHERE id = ?", (document_id,)
                    )
                else:
                    handed = harvested(document, self.found_by(document_id))
                    body = (
                        zlib.compress(_ENCODER.encode(handed), _LEVEL) if self.keep_bodies else None
                    )
                    self.db.execute(
                        "UPDATE documents SET status = 'fetched', body = ?, error = NULL,"
                        " fetched_run = ? WHERE id = ?",
                        (body, self.run, document_id),
                    )
                    found[document_id] = handed
            if delivered:
                (line,) = self.db.execute("SELECT coalesce(max(line), 0) FROM documents").fetchone()
                for document_id in delivered:  # in the order of the output's lines
                    cursor = self.db.execute(
                        "UPDATE documents SET status = 'delivered', line = ?"
                        " WHERE id = ? AND status = 'fetched'",
                        (line + 1, document_id),
                    )
                    line += cursor.rowcount
        return found

    def lines(self, after: int, limit: int) -> list[tuple[int, bytes]]:
        """``(line, record)`` of delivered documents after ``after``, in the order they were
        delivered: each record the bytes the harvest handed over, without the newline."""
        rows = self.db.execute(
            "SELECT line, body FROM documents WHERE status = 'delivered' AND line > ?"
            " ORDER BY line LIMIT ?",
            (after, limit),
        ).fetchall()
        return [(line, zlib.decompress(body)) for line, body in rows if body is not None]

    def sizes(self) -> tuple[int, int]:
        """The delivered documents and the bytes their compressed records take."""
        count, size = self.db.execute(
            "SELECT count(*), coalesce(sum(length(body)), 0) FROM documents"
            " WHERE status = 'delivered'"
        ).fetchone()
        return count, size

    def found_by(self, document_id: str) -> tuple[str, ...]:
        rows = self.db.execute(
            "SELECT q.query FROM documents AS d JOIN found AS f ON f.document = d.seq"
            " JOIN queries AS q ON q.id = f.query WHERE d.id = ? ORDER BY f.query",
            (document_id,),
        )
        return tuple(query for (query,) in rows)

    def undelivered(self, after: int, limit: int) -> list[HeldDocument]:
        # Fetched by an earlier run only: what this run fetches it hands over itself.
        rows = self.db.execute(
            "SELECT seq, id, body FROM documents WHERE status = 'fetched' AND body IS NOT NULL"
            " AND (fetched_run IS NULL OR fetched_run < ?) AND seq > ? AND seq <= ?"
            " ORDER BY seq LIMIT ?",
            (self.run, after, self.snapshot, limit),
        ).fetchall()
        return [HeldDocument(seq, _DOCUMENT.decode(zlib.decompress(body))) for seq, _, body in rows]

    def unfetched(self, after: int, limit: int) -> list[FoundId]:
        rows = self.db.execute(
            "SELECT seq, id FROM documents WHERE status IN ('pending', 'failed')"
            " AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
            (after, self.snapshot, limit),
        ).fetchall()
        return [FoundId(seq, document_id) for seq, document_id in rows]

    def undelivered_ids(self) -> set[str]:
        """Ids fetched and not delivered: all a crash can have left in the output after
        the mark (a few batches: what was in flight between the consumer and the file)."""
        rows = self.db.execute("SELECT id FROM documents WHERE status = 'fetched'")
        return {document_id for (document_id,) in rows}

    def summary(self) -> StateSummary:
        def counts(table: str) -> dict[str, int]:
            rows = self.db.execute(f"SELECT status, count(*) FROM {table} GROUP BY status")
            return {status: n for status, n in rows}

        return StateSummary(counts("queries"), counts("documents"), self.run)

    def close(self) -> None:
        self.db.close()


def is_finished(path: str) -> bool:
    """Whether the state at ``path`` records a finished harvest that wrote an output: every
    query answered, every document delivered or not found. ``False`` for anything else (a
    harvest to ``--resume``, a file that is not a state: refused later, with its reason);
    writes nothing, whatever the file."""
    try:
        check_is_state(path)
        store = Store(path, keep_bodies=False, new_run=False)
    except (StateError, sqlite3.Error):
        return False
    try:
        summary = store.summary()
        return (
            store.output() is not None
            and set(summary.queries) <= {"searched"}
            and set(summary.documents) <= {"delivered", "not_found"}
        )
    except (sqlite3.Error, msgspec.DecodeError, msgspec.ValidationError):
        return False
    finally:
        store.close()


def answered(path: str, queries: Sequence[str]) -> tuple[list[str], int]:
    """What the state at ``path`` spares a run of ``queries``, for a dry run: those of
    ``queries`` it records answered (not searched again), and the documents it found and
    has not fetched (fetched first). Only reads; a caller that must not read under a
    running harvest holds its lock. :class:`StateError` for a file that is not a state."""
    check_is_state(path)
    with _state_errors(path):
        store = Store(path, keep_bodies=False, new_run=False)
        try:
            done = [
                query
                for query in queries
                if store.db.execute(
                    "SELECT 1 FROM queries WHERE query = ? AND status = 'searched'", (query,)
                ).fetchone()
            ]
            documents = store.summary().documents
        finally:
            store.close()
    return done, documents.get("pending", 0) + documents.get("failed", 0)


DAMAGED_STATE = (
    "it was left as it is: put back a copy from a backup, or start a new harvest with "
    "another state (the documents its output holds are fetched again)"
)
"""What a state that is not a whole database any more leaves the user to do."""


@contextmanager
def _state_errors(path: str) -> Iterator[None]:
    try:
        yield
    except (sqlite3.Error, msgspec.DecodeError, msgspec.ValidationError) as exc:
        where = path if path else "(temporary)"
        damaged = isinstance(exc, sqlite3.DatabaseError) and not isinstance(
            exc,
            sqlite3.OperationalError,  # locked, read-only, ...: the file may be whole
        )
        advice = f"; {DAMAGED_STATE}" if damaged or not isinstance(exc, sqlite3.Error) else ""
        raise StateError(f"harvest state {where}: {exc}{advice}", path=path) from exc


class HarvestState:
    """The async face of a harvest's state file; every call runs off the event loop.

    Open with :meth:`open` (``None``: a private temporary database, deleted on close) and
    close with :meth:`aclose`. Each :meth:`open` starts a new *run*: items left ``pending``
    or ``failed`` by earlier runs are taken up again, while answers already recorded
    (searched queries, fetched or missing documents) are never asked for again.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._limiter = anyio.CapacityLimiter(1)

    @classmethod
    async def open(
        cls, path: str | os.PathLike[str] | None, *, new_run: bool = True
    ) -> HarvestState:
        """Open (creating if needed) the state at ``path`` and start a new run (unless not)."""
        where = "" if path is None else os.fspath(path)
        # A caller cancelled while the thread opens the database abandons the thread (a
        # task's own cancellation passes through anyio's shields): whichever of the two
        # comes second closes the connection, so it never outlives the call.
        lock = threading.Lock()
        opened: list[Store] = []
        abandoned = False

        def build() -> Store:
            store = Store(where, path is not None, new_run)
            with lock:
                if abandoned:
                    store.close()
                else:
                    opened.append(store)
            return store

        try:
            with _state_errors(where):
                store = await anyio.to_thread.run_sync(build)
        except BaseException:
            with lock:
                abandoned = True
                for store in opened:
                    store.close()
            raise
        return cls(store)

    @property
    def run(self) -> int:
        """This run's number: 1 for a fresh state, one more on every resume."""
        return self._store.run

    async def _call(self, fn: Callable[[], T]) -> T:
        # Shielded: a cancelled caller still waits for its transaction (milliseconds), so
        # what a transaction records is never lost between the caller and the database.
        with anyio.CancelScope(shield=True), _state_errors(self._store.path):
            result = await anyio.to_thread.run_sync(fn, limiter=self._limiter)
        return result

    async def claim_query(self, query: str) -> QueryClaim:
        """Take ``query`` for this run: ``"search"`` it, or skip it."""
        return await self._call(partial(self._store.claim_query, query))

    async def record_searches(self, outcomes: Sequence[Searched]) -> list[str]:
        """Record search answers (``ids`` ``None``: failed, with ``error``).

        Returns the ids no earlier search had found, now ``pending``, in order.
        """
        return await self._call(partial(self._store.record_searches, outcomes))

    async def record_fetches(
        self,
        outcomes: Sequence[Fetched],
        delivered: Sequence[str] = (),
        output: OutputMark | None = None,
    ) -> dict[str, HarvestedDocument]:
        """Record fetch answers and mark ``delivered`` documents as handed over, in that
        order (and, in the same transaction, where the output file now ends: ``output``).

        Returns, for each document fetched, the document as it is to be handed over, with
        the queries that have found it so far (see :meth:`found_by`): what the state keeps.
        """
        return await self._call(partial(self._store.record_fetches, outcomes, delivered, output))

    async def output(self) -> OutputMark | None:
        """Where the harvest's output file was left, as last recorded (``None``: never)."""
        return await self._call(self._store.output)

    async def record_output(self, mark: OutputMark) -> None:
        """Record where the harvest's output file now ends."""
        await self._call(partial(self._store.record_output, mark))

    async def undelivered(self, after: int = 0, limit: int = 32) -> list[HeldDocument]:
        """Documents fetched by an earlier run but never delivered, by ``seq`` after ``after``,
        each as it was to be handed over (the queries that had found it when fetched)."""
        return await self._call(partial(self._store.undelivered, after, limit))

    async def lines(self, after: int = 0, limit: int = 256) -> list[tuple[int, bytes]]:
        """The records of delivered documents, in the order of the output (see
        :meth:`Store.lines`): ``(line, record)`` after line ``after``."""
        return await self._call(partial(self._store.lines, after, limit))

    async def sizes(self) -> tuple[int, int]:
        """The delivered documents, and the bytes their compressed records take."""
        return await self._call(self._store.sizes)

    async def found_by(self, document_id: str) -> tuple[str, ...]:
        """The queries whose recorded answers hold ``document_id``, in the order they were
        first taken (over every run); ``()`` for an id no search returned."""
        return await self._call(partial(self._store.found_by, document_id))

    async def unfetched(self, after: int = 0, limit: int = 256) -> list[FoundId]:
        """Ids found by an earlier run and not fetched (or failed), by ``seq`` after ``after``."""
        return await self._call(partial(self._store.unfetched, after, limit))

    async def undelivered_ids(self) -> set[str]:
        """Ids fetched and not delivered (see :meth:`Store.undelivered_ids`)."""
        return await self._call(self._store.undelivered_ids)

    async def summary(self) -> StateSummary:
        """Counts of queries and documents by status."""
        return await self._call(self._store.summary)

    async def aclose(self) -> None:
        """Close the database (waiting for a call in progress to finish)."""
        await self._call(self._store.close)
