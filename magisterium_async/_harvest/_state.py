"""The harvest's state in SQLite: its schema, every statement, each call off the event loop.

A state records a harvest as it goes, so that a resumed harvest never asks again for an
answer it recorded. Each :class:`HarvestState` method is one transaction, in a worker
thread, one at a time, that cancellation does not cut short; a failure of the database is
a :class:`StateError` naming the file (a full disk says so: what was committed is whole).
WAL mode with ``synchronous=NORMAL``: a commit survives the process being killed.

**A file the harvest did not create is never written.** A state is made only where no
file is, and only whole (built beside its path, linked there once its schema is in). An
existing file is first read as plain bytes (its header) and must carry the harvest's
``application_id`` (:data:`APPLICATION_ID`) and ``user_version`` (:data:`SCHEMA_VERSION`);
anything else is refused before any write, WAL switch included, and left byte for byte.

The tables (:data:`SCHEMA`): ``queries`` by when first taken (``pending``: taken, not
answered; ``run``: the last run that took it, so a repeat in one run's input is told from
an earlier run's answer); ``documents`` by discovery (``fetched``: not delivered yet;
``delivered`` at ``line`` of the output; ``body``: the JSON Lines record handed over, zlib,
none in a temporary state); ``found``: which query found which document; ``meta``:
``runs``, and ``output``, where the output was left (a JSON :class:`OutputMark`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import zlib
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Concatenate, Literal, NamedTuple, ParamSpec, TypeVar

import anyio
import anyio.to_thread
import msgspec

from magisterium_async._errors import StateError
from magisterium_async._files import describe, kind_of
from magisterium_async._harvest._jsonl import OutputMark, why_not_written
from magisterium_async._harvest._shield import to_the_end
from magisterium_async._models import Document

P = ParamSpec("P")
T = TypeVar("T")

APPLICATION_ID = 0x6D616876  # "mahv": magisterium_async harvest, in the SQLite header
SCHEMA_VERSION = 3
SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE queries ("
    " id INTEGER PRIMARY KEY,"
    " query TEXT NOT NULL UNIQUE,"
    " status TEXT NOT NULL CHECK (status IN ('pending', 'searched', 'failed')),"
    " run INTEGER NOT NULL,"
    " ids TEXT,"
    " error TEXT)",
    "CREATE TABLE documents ("
    " seq INTEGER PRIMARY KEY,"
    " id TEXT NOT NULL UNIQUE,"
    " status TEXT NOT NULL"
    "  CHECK (status IN ('pending', 'fetched', 'delivered', 'not_found', 'failed')),"
    " body BLOB,"
    " error TEXT,"
    " fetched_run INTEGER,"
    " line INTEGER UNIQUE)",
    "CREATE TABLE found ("
    " document INTEGER NOT NULL,"
    " query INTEGER NOT NULL,"
    " PRIMARY KEY (document, query)) WITHOUT ROWID",
)


class HarvestedDocument(Document, frozen=True, kw_only=True):
    """A :class:`Document` as a harvest yields it, with the queries that found it.

    ``queries`` holds every query whose answer, recorded before the document was handed
    over, contained it (in the order the queries were first read, over every run of a
    resumed harvest). A query answered *after* the document was handed over is not in it;
    :meth:`Harvest.found_by` reads them all from the state. Encoded (``msgspec``,
    :class:`JsonlWriter`, the command line) it is the document's fields plus ``"queries"``.
    """

    queries: tuple[str, ...] = ()


_MAGIC = b"SQLite format 3\x00"
_DOCUMENT = msgspec.json.Decoder(HarvestedDocument)
_MARK = msgspec.json.Decoder(OutputMark)
_ENCODER = msgspec.json.Encoder()
_LEVEL = 6  # zlib's default: within a few percent of 9's size, several times faster


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


@dataclass(frozen=True)
class StateSummary:
    """Counts of a state: queries and documents by status, and the output's mark."""

    queries: dict[str, int]
    documents: dict[str, int]
    output: OutputMark | None

    @property
    def finished(self) -> bool:
        """Whether it records a finished harvest that wrote an output: every query
        answered, every document delivered or not found."""
        return (
            self.output is not None
            and set(self.queries) <= {"searched"}
            and set(self.documents) <= {"delivered", "not_found"}
        )


def _not_a_state(path: str, why: str) -> StateError:
    return StateError(
        f"{path} is not a harvest state ({why}); it was left as it is. Give the harvest a "
        "path where no file is, and it makes its state there",
        path=path,
    )


def check_is_state(path: str) -> None:
    """:class:`StateError` unless the file at ``path`` is a harvest's state of this
    schema version. Reads only its header, as plain bytes: a refused file is left byte
    for byte (no journal switch, no change counter bumped)."""
    try:
        with open(path, "rb") as file:
            header = file.read(100)
    except OSError as exc:
        why = why_not_written(exc)
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
            f"harvest state {path} has schema version {user_version}; this version of "
            f"magisterium_async reads version {SCHEMA_VERSION}; it was left as it is",
            path=path,
        )


def _why(error: Exception) -> str:
    """What a failure of the database or its file says, in words."""
    if isinstance(error, OSError):
        return why_not_written(error)
    return "the disk is full" if "full" in str(error) else str(error)  # SQLITE_FULL


@contextlib.contextmanager
def _errors(path: str) -> Iterator[None]:
    """Every failure of the database as a :class:`StateError` naming the file and what
    to do."""
    where = path or "(temporary)"
    try:
        yield
    except (OSError, sqlite3.OperationalError) as exc:  # full, locked, read-only: whole
        why = _why(exc)
        if why == "the disk is full":
            why += " (what it recorded before is whole: with room made, the harvest goes on)"
        raise StateError(f"cannot write the harvest state {where}: {why}", path=path) from exc
    except (sqlite3.Error, msgspec.DecodeError, msgspec.ValidationError, zlib.error) as exc:
        raise StateError(
            f"harvest state {where}: {exc}; it was left as it is: put back a copy from a "
            "backup, or start a new harvest with another state (the documents its output "
            "holds are fetched again)",
            path=path,
        ) from exc


def _off_loop(
    method: Callable[Concatenate[HarvestState, P], T],
) -> Callable[Concatenate[HarvestState, P], Coroutine[Any, Any, T]]:
    """``method`` as one transaction in the state's worker thread, shielded: a cancelled
    caller still waits for it (milliseconds), so what it records is never lost between
    the caller and the database."""

    async def call(self: HarvestState, /, *args: P.args, **kwargs: P.kwargs) -> T:
        with _errors(self.path):
            transaction = partial(self._transaction, method, *args, **kwargs)
            result = await to_the_end(anyio.to_thread.run_sync(transaction, limiter=self._limiter))
        return result

    call.__name__, call.__doc__ = method.__name__, method.__doc__
    return call


def _connect(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=5000")
    except BaseException:
        db.close()
        raise
    return db


def _make(path: str) -> None:
    """Make a state at ``path``, whole or not at all: built beside it (its schema, WAL
    mode, checkpointed into the one file), then linked to its name, which fails rather
    than replace a file made there meanwhile. What a failure leaves beside it is removed."""
    building = os.path.join(
        os.path.dirname(os.path.abspath(path)),
        f".{os.path.basename(path)}.{secrets.token_hex(4)}.making",
    )
    try:
        db = _connect(building)
        try:
            for statement in SCHEMA:
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            # All of it into the main file, or raise (a full disk): the checkpoint of
            # close() fails silently, and the main file linked without its -wal would be
            # incomplete. The only connection to the file: never busy.
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            db.close()  # the last connection: its -wal and -shm go with it
        try:
            os.link(building, path)  # never over a file made there meanwhile
        except OSError:  # a file system without hard links (FAT): renamed there instead
            if os.path.lexists(path):
                raise
            os.rename(building, path)
    except (OSError, sqlite3.Error) as exc:
        raise StateError(
            f"cannot make the harvest state {path}: {_why(exc)}; nothing was made there",
            path=path,
        ) from exc
    finally:
        for leftover in (building, f"{building}-wal", f"{building}-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(leftover)


class HarvestState:
    """A harvest's state: :meth:`open` it, call its methods (each one transaction, off the
    event loop), :meth:`aclose` it. ``path`` ``""``: a private temporary database."""

    def __init__(self, db: sqlite3.Connection, path: str) -> None:
        self.db = db
        self.path = path
        self.run = 0
        """This run's number (:meth:`begin_run`): 1 for a fresh state, one more a resume."""
        self._snapshot = 0  # the last document found before this run
        self._limiter = anyio.CapacityLimiter(1)

    @classmethod
    async def open(cls, path: str | os.PathLike[str] | None) -> HarvestState:
        """The state at ``path``, made there (whole) when no file is; ``None``: a private
        temporary database, deleted when closed. Opening writes nothing to an existing
        state; :meth:`begin_run` starts a run."""
        where = "" if path is None else os.fspath(path)

        def connect() -> sqlite3.Connection:
            kind = kind_of(where) if where else "missing"
            if kind == "file":
                check_is_state(where)  # before SQLite touches it: nothing of it changes
            elif kind != "missing":  # never opened: a FIFO would block for good
                raise _not_a_state(where, describe(kind))
            elif where:
                _make(where)
            db = _connect(where)
            if not where:
                for statement in SCHEMA:
                    db.execute(statement)
            return db

        # Shielded: a connection opened is a connection closed, whoever was cancelled.
        with _errors(where):
            db = await to_the_end(anyio.to_thread.run_sync(connect))
        return cls(db, where)

    def _transaction(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            result = method(self, *args, **kwargs)
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        return result

    def _one(self, sql: str, *args: object) -> Any:
        row = self.db.execute(sql, args).fetchone()
        return None if row is None else row[0]

    @_off_loop
    def begin_run(self) -> None:
        """Start a run (:attr:`run`): items left ``pending`` or ``failed`` by earlier runs
        are taken up again, while answers recorded are never asked for again."""
        self.run = int(self._one("SELECT value FROM meta WHERE key = 'runs'") or 0) + 1
        self.db.execute("INSERT OR REPLACE INTO meta VALUES ('runs', ?)", (str(self.run),))
        self._snapshot = self._one("SELECT coalesce(max(seq), 0) FROM documents")

    @_off_loop
    def claim(self, query: str) -> Literal["search", "recorded", "duplicate"]:
        """Take ``query`` for this run: ``"search"`` it, or skip it (answered by an
        earlier run, or taken by this one already)."""
        row = self.db.execute("SELECT status, run FROM queries WHERE query = ?", (query,))
        found = row.fetchone()
        if found is None:
            self.db.execute(
                "INSERT INTO queries (query, status, run) VALUES (?, 'pending', ?)",
                (query, self.run),
            )
            return "search"
        status, run = found
        if run == self.run:  # taken by this run already: the input repeats it
            return "duplicate"
        # Taken by this run: a repeat later in the input is then told from a query an
        # earlier run answered.
        if status == "searched":
            self.db.execute("UPDATE queries SET run = ? WHERE query = ?", (self.run, query))
            return "recorded"
        self.db.execute(
            "UPDATE queries SET status = 'pending', run = ?, error = NULL WHERE query = ?",
            (self.run, query),
        )
        return "search"

    @_off_loop
    def record(
        self,
        searched: Sequence[Searched],
        fetched: Sequence[Fetched],
        delivered: Sequence[str] = (),
        output: OutputMark | None = None,
    ) -> tuple[list[str], dict[str, HarvestedDocument]]:
        """Record answers, then deliveries (in the order of the output's lines), then
        where the output now ends, in one transaction. Returns the ids no earlier search
        had found (now ``pending``, in order) and each document fetched as it is to be
        handed over, with the queries that have found it so far."""
        new: list[str] = []
        for query, ids, error in searched:
            if ids is None:
                self.db.execute(
                    "UPDATE queries SET status = 'failed', error = ? WHERE query = ?",
                    (repr(error), query),
                )
                continue
            query_id = self._one("SELECT id FROM queries WHERE query = ?", query)
            self.db.execute(
                "UPDATE queries SET status = 'searched', ids = ?, error = NULL WHERE id = ?",
                (_ENCODER.encode(ids).decode(), query_id),
            )
            for document_id in ids:
                cursor = self.db.execute(
                    "INSERT OR IGNORE INTO documents (id, status) VALUES (?, 'pending')",
                    (document_id,),
                )
                if cursor.rowcount == 1:
                    new.append(document_id)
                self.db.execute(
                    "INSERT OR IGNORE INTO found (document, query)"
                    " SELECT seq, ? FROM documents WHERE id = ?",
                    (query_id, document_id),
                )
        documents: dict[str, HarvestedDocument] = {}
        for document_id, document, error in fetched:
            if document is None:
                status, body = ("not_found", None) if error is None else ("failed", None)
            else:
                handed = HarvestedDocument(
                    **msgspec.structs.asdict(document), queries=self._found_by(document_id)
                )
                documents[document_id] = handed
                status = "fetched"
                body = zlib.compress(_ENCODER.encode(handed), _LEVEL) if self.path else None
            self.db.execute(
                "UPDATE documents SET status = ?, body = ?, error = ?, fetched_run = ?"
                " WHERE id = ?",
                (status, body, None if error is None else repr(error), self.run, document_id),
            )
        line = self._one("SELECT coalesce(max(line), 0) FROM documents")
        for document_id in delivered:
            cursor = self.db.execute(
                "UPDATE documents SET status = 'delivered', line = ?"
                " WHERE id = ? AND status = 'fetched'",
                (line + 1, document_id),
            )
            line += cursor.rowcount
        if output is not None:
            self.db.execute(
                "INSERT OR REPLACE INTO meta VALUES ('output', ?)",
                (_ENCODER.encode(output).decode(),),
            )
        return new, documents

    def _found_by(self, document_id: str) -> tuple[str, ...]:
        rows = self.db.execute(
            "SELECT q.query FROM documents AS d JOIN found AS f ON f.document = d.seq"
            " JOIN queries AS q ON q.id = f.query WHERE d.id = ? ORDER BY f.query",
            (document_id,),
        )
        return tuple(query for (query,) in rows)

    found_by = _off_loop(_found_by)
    """The queries whose recorded answers hold a document id, in the order they were
    first taken (over every run); ``()`` for an id no search returned."""

    @_off_loop
    def undelivered(self, after: int, limit: int = 32) -> list[tuple[int, HarvestedDocument]]:
        """``(seq, document)`` of documents an earlier run fetched and did not deliver,
        after ``seq`` ``after``, each as it was to be handed over."""
        rows = self.db.execute(
            "SELECT seq, body FROM documents WHERE status = 'fetched' AND body IS NOT NULL"
            " AND coalesce(fetched_run, 0) < ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
            (self.run, after, self._snapshot, limit),
        )
        return [(seq, _DOCUMENT.decode(zlib.decompress(body))) for seq, body in rows]

    @_off_loop
    def unfetched(self, after: int, limit: int = 256) -> list[tuple[int, str]]:
        """``(seq, id)`` of documents an earlier run found and did not fetch (or failed
        to), after ``seq`` ``after``."""
        rows = self.db.execute(
            "SELECT seq, id FROM documents WHERE status IN ('pending', 'failed')"
            " AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
            (after, self._snapshot, limit),
        )
        return list(rows)

    @_off_loop
    def lines(self, after: int, limit: int = 256) -> list[tuple[int, bytes]]:
        """``(line, record)`` of delivered documents after ``after``, in the order of the
        output: each record the bytes the harvest wrote, without the newline."""
        rows = self.db.execute(
            "SELECT line, body FROM documents WHERE status = 'delivered' AND line > ?"
            " AND body IS NOT NULL ORDER BY line LIMIT ?",
            (after, limit),
        )
        return [(line, zlib.decompress(body)) for line, body in rows]

    @_off_loop
    def undelivered_ids(self) -> set[str]:
        """Ids fetched and not delivered: all a crash can have left in the output after
        its mark (what was between the consumer and the file)."""
        rows = self.db.execute("SELECT id FROM documents WHERE status = 'fetched'")
        return {document_id for (document_id,) in rows}

    @_off_loop
    def answered(self, queries: Iterable[str]) -> list[str]:
        """Those of ``queries`` whose answer it records."""
        sql = "SELECT 1 FROM queries WHERE query = ? AND status = 'searched'"
        return [query for query in queries if self._one(sql, query)]

    @_off_loop
    def summary(self) -> StateSummary:
        """Counts of queries and documents by status, and where the output was left."""

        def counts(table: str) -> dict[str, int]:
            return dict(self.db.execute(f"SELECT status, count(*) FROM {table} GROUP BY status"))

        mark = self._one("SELECT value FROM meta WHERE key = 'output'")
        output = None if mark is None else _MARK.decode(mark)
        return StateSummary(counts("queries"), counts("documents"), output)

    async def aclose(self) -> None:
        """Close the database (after a call in progress)."""
        with _errors(self.path):
            await to_the_end(anyio.to_thread.run_sync(self.db.close, limiter=self._limiter))
