"""The harvest's state in SQLite: schema version and migration, claims across runs,
records, resume pages and provenance, and files it did not create refused untouched."""

from __future__ import annotations

import functools
import json
import os
import sqlite3
from pathlib import Path
from typing import Any, ClassVar

import msgspec
import pytest

from magisterium_async import Document, MagisteriumError, StateError
from magisterium_async._harvest import Fetched, HarvestState, Searched, harvest
from tests.helpers.harvest_fakes import FakeClient

APPLICATION_ID = 0x6D616876  # as the docs say: a state's, in its SQLite header
SCHEMA_VERSION = 3


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def doc(document_id: str) -> Document:
    return Document(id=document_id, title="T", author="A", ref="R", text="body")


def searched(query: str, ids: list[str] | None) -> Searched:
    return Searched(query, ids, None if ids is not None else RuntimeError("boom"))


def fetched(document_id: str, document: Document | None, failed: bool = False) -> Fetched:
    return Fetched(document_id, document, RuntimeError("boom") if failed else None)


async def opened(path: Path | None) -> HarvestState:
    """The state at ``path``, a run begun, as a harvest opens it."""
    state = await HarvestState.open(path)
    await state.begin_run()
    return state


async def test_without_a_path_a_temporary_database_keeps_no_bodies() -> None:
    state = await opened(None)
    await state.claim("q")
    await state.record([searched("q", ["1"])], [])
    await state.record([], [fetched("1", doc("1"))], ["1"])
    assert (await state.summary()).documents == {"delivered": 1}
    assert await state.lines(0) == []  # no body kept
    await state.aclose()


@pytest.mark.parametrize("content", [b"these are my notes, not a database\n" * 10, b"\x00" * 8])
async def test_a_file_that_is_not_a_state_is_a_state_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(StateError, match=r"notes\.txt") as info:
        state = await HarvestState.open(path)
        await state.aclose()
    assert info.value.path == str(path)


async def test_fresh_state_has_the_schema_version_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = await opened(path)
    assert state.run == 1
    await state.aclose()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


class CheckpointsOnAFullDisk(sqlite3.Connection):
    """A connection on a disk with room for the WAL, none for the main file: a checkpoint
    asked for raises; the one ``close()`` makes fails as SQLite's does, silently, the WAL
    left (here: the connection left open, closed once the test is done)."""

    left_open: ClassVar[list[sqlite3.Connection]] = []

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if "wal_checkpoint" in sql:
            raise sqlite3.OperationalError("database or disk is full")
        return super().execute(sql, *args)

    def close(self) -> None:
        self.left_open.append(self)


async def test_a_state_whose_checkpoint_finds_the_disk_full_is_never_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.db"
    connect = functools.partial(sqlite3.connect, factory=CheckpointsOnAFullDisk)
    monkeypatch.setattr(sqlite3, "connect", connect)
    try:
        with pytest.raises(StateError) as info:
            await HarvestState.open(path)
    finally:
        for db in CheckpointsOnAFullDisk.left_open:
            sqlite3.Connection.close(db)
        CheckpointsOnAFullDisk.left_open.clear()
    assert str(info.value) == (
        f"cannot make the harvest state {path}: the disk is full; nothing was made there"
    )
    assert names(tmp_path) == []  # nothing half-made that a later run refuses


async def test_another_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")  # a state, of a later version
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    before = path.read_bytes()
    with pytest.raises(MagisteriumError, match=rf"schema version {SCHEMA_VERSION + 1};.*left as"):
        await HarvestState.open(path)
    assert path.read_bytes() == before  # no WAL switch, no change counter bumped
    assert names(tmp_path) == ["state.db"]


async def test_claims_across_runs(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = await opened(path)
    assert await state.claim("a") == "search"
    assert await state.claim("a") == "duplicate"
    assert await state.claim("b") == "search"
    assert await state.claim("c") == "search"
    new, _ = await state.record([searched("a", ["1", "2"]), searched("b", None)], [])
    assert new == ["1", "2"]
    assert await state.claim("b") == "duplicate"  # failed in this run: not again
    await state.aclose()

    state = await opened(path)
    assert state.run == 2
    assert await state.claim("a") == "recorded"
    assert await state.claim("b") == "search"  # failed before: tried again
    assert await state.claim("c") == "search"  # never answered: tried again
    assert (await state.record([searched("b", ["2", "3"])], []))[0] == ["3"]  # 2 is known
    summary = await state.summary()
    assert summary.queries == {"searched": 2, "pending": 1}
    assert summary.documents == {"pending": 3}
    await state.aclose()


async def test_fetch_records_and_resume_pages(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = await opened(path)
    await state.claim("q")
    ids = [str(i) for i in range(6)]
    assert (await state.record([searched("q", ids)], []))[0] == ids
    await state.record(
        [],
        [
            fetched("0", doc("0")),
            fetched("1", doc("1")),
            fetched("2", None),
            fetched("3", None, failed=True),
        ],
        ["0"],
    )
    # Nothing of this run is offered for resuming within the run.
    assert await state.undelivered(0) == [] and await state.unfetched(0) == []
    await state.aclose()

    state = await opened(path)
    assert [(d.id, d.text, d.queries) for _, d in await state.undelivered(0)] == [
        ("1", "body", ("q",))
    ]
    assert [i for _, i in await state.unfetched(0)] == ["3", "4", "5"]
    first = await state.unfetched(0, 2)
    assert [i for _, i in await state.unfetched(first[-1][0])] == ["5"]
    await state.claim("r")
    assert (await state.record([searched("r", ["9"])], []))[0] == ["9"]
    assert [i for _, i in await state.unfetched(0)] == ["3", "4", "5"]  # 9 is this run's
    await state.record([], [], ["1"])
    summary = await state.summary()
    assert summary.documents == {"delivered": 2, "not_found": 1, "failed": 1, "pending": 3}
    # Delivered in the order given, each record kept as it was handed over.
    assert [json.loads(record) for _, record in await state.lines(0)] == [
        {**msgspec.to_builtins(doc(i)), "queries": ["q"]} for i in ("0", "1")
    ]
    assert [line for line, _ in await state.lines(1)] == [2]
    await state.aclose()


async def test_what_this_run_fetches_is_never_offered_again(tmp_path: Path) -> None:
    # The resumed run fetches an id the first run left pending; paging through the
    # undelivered documents afterwards must not hand it over a second time.
    path = tmp_path / "state.db"
    state = await opened(path)
    await state.claim("q")
    await state.record([searched("q", ["1", "2"])], [])
    await state.record([], [fetched("1", doc("1"))])
    await state.aclose()

    state = await opened(path)
    assert [i for _, i in await state.unfetched(0)] == ["2"]
    await state.record([], [fetched("2", doc("2"))])
    assert [d.id for _, d in await state.undelivered(0)] == ["1"]
    await state.aclose()


async def test_provenance_over_runs(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = await opened(path)
    for query in ("b", "a"):
        await state.claim(query)
    await state.record([searched("a", ["1", "2"]), searched("b", ["2"])], [])
    _, found = await state.record([], [fetched("2", doc("2")), fetched("1", None)])
    # By when each query was first taken, not answered.
    assert {i: d.queries for i, d in found.items()} == {"2": ("b", "a")}
    await state.aclose()

    state = await opened(path)
    await state.claim("c")
    await state.record([searched("c", ["2", "3"])], [])
    assert await state.found_by("2") == ("b", "a", "c")
    assert await state.found_by("3") == ("c",) and await state.found_by("4") == ()
    # Handed over as it was fetched (and as a killed run may have written it): the queries
    # that had found it then; found_by() names the later ones.
    [(_, held)] = await state.undelivered(0)
    assert (held.id, held.queries) == ("2", ("b", "a"))
    await state.aclose()


V1_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE queries (query TEXT PRIMARY KEY, status TEXT NOT NULL, run INTEGER NOT NULL,"
    " ids TEXT, error TEXT)",
    "CREATE TABLE documents (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,"
    " status TEXT NOT NULL, body BLOB, error TEXT)",
)


async def test_a_state_of_an_unreleased_earlier_schema_is_refused_left_byte_for_byte(
    tmp_path: Path,
) -> None:
    """No migration: nothing was released before this schema, so a version 1 state (no
    application id, the old tables) is not a state, and is neither migrated nor touched."""
    path = tmp_path / "state.db"
    db = sqlite3.connect(path)
    for statement in V1_SCHEMA:
        db.execute(statement)
    db.executescript("INSERT INTO meta VALUES ('runs', '1'); PRAGMA user_version = 1;")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(StateError, match="not a harvest state"):
        await HarvestState.open(path)
    assert path.read_bytes() == before
    assert names(tmp_path) == ["state.db"]


def _user_database(path: Path) -> bytes:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE recipes (name TEXT, steps TEXT)")
    db.execute("INSERT INTO recipes VALUES ('bread', 'knead')")
    db.commit()
    db.close()
    return path.read_bytes()


@pytest.mark.parametrize(
    "make",
    [
        _user_database,
        lambda path: (path.write_bytes(b""), b"")[1],
        lambda path: (path.write_bytes(b"notes\n" * 40), b"notes\n" * 40)[1],
    ],
    ids=["a user's SQLite", "an empty file", "notes"],
)
async def test_a_file_the_harvest_did_not_create_is_refused_and_left_byte_for_byte(
    tmp_path: Path, make: object
) -> None:
    path = tmp_path / "my.db"
    before = make(path)  # type: ignore[operator]
    with pytest.raises(StateError, match=r"my\.db is not a harvest state .*left as it is"):
        await HarvestState.open(path)
    assert path.read_bytes() == before
    assert names(tmp_path) == ["my.db"]  # no -wal, no -shm


async def test_another_applications_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    db = sqlite3.connect(path)
    db.execute("PRAGMA application_id = 1234")
    db.execute("PRAGMA user_version = 2")
    for table in ("meta", "queries", "documents", "found"):  # even with the same tables
        db.execute(f"CREATE TABLE {table} (x)")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(StateError, match="another application, id 0x4d2"):
        await HarvestState.open(path)
    assert path.read_bytes() == before


async def test_a_state_carries_the_application_id_and_one_without_it_is_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    await (await HarvestState.open(path)).aclose()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        db.execute("PRAGMA application_id = 0")
    db.close()
    before = path.read_bytes()
    with pytest.raises(StateError, match="not a harvest state"):
        await HarvestState.open(path)
    assert path.read_bytes() == before


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
async def test_a_fifo_at_the_state_path_is_refused_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "state.fifo"
    os.mkfifo(fifo)  # opened for reading, it would wait for a writer for good
    async with harvest(FakeClient(), ["a"], state=fifo) as h:
        with pytest.raises(StateError, match=r"state\.fifo is not a harvest state \(a FIFO"):
            await anext(h)
    assert names(tmp_path) == ["state.fifo"]
