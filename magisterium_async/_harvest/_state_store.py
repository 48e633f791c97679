"""The harvest's state in sqlite: the schema and every statement that reads or writes it.

The schema lives here and only here (:data:`SCHEMA`, version :data:`SCHEMA_VERSION` in
``PRAGMA user_version``), with the rules of what a run may take and record: a
synchronous :class:`Store`, one connection used by one thread at a time, each method one
transaction. The database is in WAL mode with ``synchronous=NORMAL``, so a committed
transaction survives the process being killed (not necessarily a power cut). Running
it off the event loop is :mod:`._state`'s job.

Queries (``queries``, ``id`` in the order they were first taken):

- ``pending``: taken by a run, answer not recorded yet (searched again by a later run);
- ``searched``: answered; ``ids`` holds the JSON list of the ids it returned;
- ``failed``: failed after retries in run ``run`` (searched again by a later run).

Documents (``documents``, ``seq`` in discovery order):

- ``pending``: found by a search, not fetched yet;
- ``fetched``: fetched, ``body`` holds the document until the consumer has had it;
- ``delivered``: fetched and handed over (``body`` dropped);
- ``not_found``: the service answered "Document not found.";
- ``failed``: failed after retries (fetched again by a later run).

``fetched_run`` is the run that fetched a document: only documents fetched by an *earlier*
run are handed over again from the state. ``found`` holds one row per (document, query)
that found it: the provenance of every document, kept across runs.

``meta`` holds ``runs`` (the number of the last run) and ``output``: where the harvest's
output file was left (a JSON :class:`OutputMark`: device, inode, the offset of its last
whole record and a fingerprint of the bytes before it), so a resume appends only to the
file it wrote, as it left it.

Version 1 (no ``found``, no ``fetched_run``, no query ids) is migrated in place on opening:
its provenance is rebuilt from the ids each searched query recorded.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import msgspec

from magisterium_async._errors import StateError
from magisterium_async._harvest._jsonl import OutputMark
from magisterium_async._models import Document

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "FetchOutcome",
    "Held",
    "QueryClaim",
    "StateSummary",
    "Store",
    "read_items",
]

SCHEMA_VERSION = 2
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
    " fetched_run INTEGER)",
    _FOUND,
)
# Version 1 to 2. Query ids must be an INTEGER PRIMARY KEY (VACUUM may renumber a plain
# rowid), so the queries table is rebuilt, in its rowid order.
_MIGRATE_1 = (
    "ALTER TABLE queries RENAME TO queries_v1",
    _QUERIES,
    "INSERT INTO queries (query, status, run, ids, error)"
    " SELECT query, status, run, ids, error FROM queries_v1 ORDER BY rowid",
    "DROP TABLE queries_v1",
    "ALTER TABLE documents ADD COLUMN fetched_run INTEGER",
    _FOUND,
    "INSERT OR IGNORE INTO found (document, query)"
    " SELECT d.seq, q.id FROM queries AS q, json_each(q.ids) AS j"
    " JOIN documents AS d ON d.id = j.value WHERE q.ids IS NOT NULL",
)

QueryClaim = Literal["search", "recorded", "duplicate"]
"""What to do with a query: search it, or skip it (answered earlier, or already taken)."""

FetchOutcome = tuple[str, Document | None, str | None]
"""``(id, document, error)``: a document, ``None`` for not found, or the error's text."""

Held = tuple[int, Document, tuple[str, ...]]
"""``(seq, document, queries)``: a document an earlier run fetched and did not deliver."""

_DOCUMENT = msgspec.json.Decoder(Document)
_MARK = msgspec.json.Decoder(OutputMark)
_ENCODER = msgspec.json.Encoder()


@dataclass(frozen=True)
class StateSummary:
    """Counts of a state file: queries and documents by status."""

    queries: dict[str, int]
    documents: dict[str, int]
    runs: int


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
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version in (0, 1):
            for statement in SCHEMA if version == 0 else _MIGRATE_1:
                self.db.execute(statement)
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        elif version != SCHEMA_VERSION:
            raise StateError(
                f"harvest state {path!r} has schema version {version}; "
                f"this version of magisterium_async reads version {SCHEMA_VERSION}",
                path=path,
            )

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
            if status == "searched":
                return "recorded"
            if run == self.run:
                return "duplicate"
            self.db.execute(
                "UPDATE queries SET status = 'pending', run = ?, error = NULL WHERE query = ?",
                (self.run, query),
            )
            return "search"

    def record_searches(
        self, outcomes: Sequence[tuple[str, list[str] | None, str | None]]
    ) -> list[str]:
        new: list[str] = []
        with _transaction(self.db):
            for query, ids, error in outcomes:
                if ids is None:
                    self.db.execute(
                        "UPDATE queries SET status = 'failed', error = ? WHERE query = ?",
                        (error, query),
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
        outcomes: Sequence[FetchOutcome],
        delivered: Sequence[str],
        output: OutputMark | None = None,
    ) -> dict[str, tuple[str, ...]]:
        found: dict[str, tuple[str, ...]] = {}
        with _transaction(self.db):
            if output is not None:
                self._record_output(output)
            for document_id, document, error in outcomes:
                if error is not None:
                    self.db.execute(
                        "UPDATE documents SET status = 'failed', error = ? WHERE id = ?",
                        (error, document_id),
                    )
                elif document is None:
                    self.db.execute(
                        "UPDATE documents SET status = 'not_found' WHERE id = ?", (document_id,)
                    )
                else:
                    body = _ENCODER.encode(document) if self.keep_bodies else None
                    self.db.execute(
                        "UPDATE documents SET status = 'fetched', body = ?, error = NULL,"
                        " fetched_run = ? WHERE id = ?",
                        (body, self.run, document_id),
                    )
                    found[document_id] = self.found_by(document_id)
            self.db.executemany(
                "UPDATE documents SET status = 'delivered', body = NULL"
                " WHERE id = ? AND status = 'fetched'",
                [(document_id,) for document_id in delivered],
            )
        return found

    def found_by(self, document_id: str) -> tuple[str, ...]:
        rows = self.db.execute(
            "SELECT q.query FROM documents AS d JOIN found AS f ON f.document = d.seq"
            " JOIN queries AS q ON q.id = f.query WHERE d.id = ? ORDER BY f.query",
            (document_id,),
        )
        return tuple(query for (query,) in rows)

    def undelivered(self, after: int, limit: int) -> list[Held]:
        # Fetched by an earlier run only: what this run fetches it hands over itself.
        rows = self.db.execute(
            "SELECT seq, id, body FROM documents WHERE status = 'fetched' AND body IS NOT NULL"
            " AND (fetched_run IS NULL OR fetched_run < ?) AND seq > ? AND seq <= ?"
            " ORDER BY seq LIMIT ?",
            (self.run, after, self.snapshot, limit),
        ).fetchall()
        return [
            (seq, _DOCUMENT.decode(body), self.found_by(document_id))
            for seq, document_id, body in rows
        ]

    def unfetched(self, after: int, limit: int) -> list[tuple[int, str]]:
        rows = self.db.execute(
            "SELECT seq, id FROM documents WHERE status IN ('pending', 'failed')"
            " AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
            (after, self.snapshot, limit),
        ).fetchall()
        return [(seq, document_id) for seq, document_id in rows]

    def summary(self) -> StateSummary:
        def counts(table: str) -> dict[str, int]:
            rows = self.db.execute(f"SELECT status, count(*) FROM {table} GROUP BY status")
            return {status: n for status, n in rows}

        return StateSummary(counts("queries"), counts("documents"), self.run)

    def close(self) -> None:
        self.db.close()


def read_items(path: str) -> tuple[list[str], list[str]]:
    """Every query and document id of the state at ``path`` (none without a file), read-only."""
    if not os.path.exists(path):
        return [], []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        queries = [row[0] for row in db.execute("SELECT query FROM queries")]
        ids = [row[0] for row in db.execute("SELECT id FROM documents")]
    finally:
        db.close()
    return queries, ids
