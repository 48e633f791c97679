"""The harvest's sqlite store: schema version and migration, claims across runs, records,
resume pages and provenance (through :class:`HarvestState`, as a harvest uses them)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from magisterium_async import Document, MagisteriumError
from magisterium_async._harvest._state import HarvestState
from magisterium_async._harvest._state_store import SCHEMA_VERSION


def doc(document_id: str) -> Document:
    return Document(id=document_id, title="T", author="A", ref="R", text="body")


async def test_fresh_state_has_the_schema_version_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = await HarvestState.open(path)
    assert state.run == 1
    await state.aclose()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


async def test_another_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(MagisteriumError, match="schema version"):
        await HarvestState.open(path)


async def test_claims_across_runs(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = await HarvestState.open(path)
    assert await state.claim_query("a") == "search"
    assert await state.claim_query("a") == "duplicate"
    assert await state.claim_query("b") == "search"
    assert await state.claim_query("c") == "search"
    new = await state.record_searches([("a", ["1", "2"], None), ("b", None, "boom")])
    assert new == ["1", "2"]
    assert await state.claim_query("b") == "duplicate"  # failed in this run: not again
    await state.aclose()

    state = await HarvestState.open(path)
    assert state.run == 2
    assert await state.claim_query("a") == "recorded"
    assert await state.claim_query("b") == "search"  # failed before: tried again
    assert await state.claim_query("c") == "search"  # never answered: tried again
    assert await state.record_searches([("b", ["2", "3"], None)]) == ["3"]  # 2 is known
    summary = await state.summary()
    assert summary.queries == {"searched": 2, "pending": 1}
    assert summary.documents == {"pending": 3}
    await state.aclose()


async def test_fetch_records_and_resume_pages(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = await HarvestState.open(path)
    await state.claim_query("q")
    ids = [str(i) for i in range(6)]
    assert await state.record_searches([("q", ids, None)]) == ids
    await state.record_fetches(
        [("0", doc("0"), None), ("1", doc("1"), None), ("2", None, None), ("3", None, "boom")],
        delivered=["0"],
    )
    # Nothing of this run is offered for resuming within the run.
    assert await state.undelivered() == [] and await state.unfetched() == []
    await state.aclose()

    state = await HarvestState.open(path)
    assert [(d.id, d.text, q) for _, d, q in await state.undelivered()] == [("1", "body", ("q",))]
    assert [i for _, i in await state.unfetched()] == ["3", "4", "5"]
    first = await state.unfetched(limit=2)
    assert [i for _, i in await state.unfetched(after=first[-1][0])] == ["5"]
    await state.record_searches([])
    await state.claim_query("r")
    assert await state.record_searches([("r", ["9"], None)]) == ["9"]
    assert [i for _, i in await state.unfetched()] == ["3", "4", "5"]  # 9 is this run's
    await state.record_fetches([], delivered=["1"])
    summary = await state.summary()
    assert summary.documents == {"delivered": 2, "not_found": 1, "failed": 1, "pending": 3}
    await state.aclose()
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM documents WHERE body IS NOT NULL").fetchone()[0] == 0
    db.close()


async def test_what_this_run_fetches_is_never_offered_again(tmp_path: Path) -> None:
    # The resumed run fetches an id the first run left pending; paging through the
    # undelivered documents afterwards must not hand it over a second time.
    path = tmp_path / "state.db"
    state = await HarvestState.open(path)
    await state.claim_query("q")
    await state.record_searches([("q", ["1", "2"], None)])
    await state.record_fetches([("1", doc("1"), None)])
    await state.aclose()

    state = await HarvestState.open(path)
    assert [i for _, i in await state.unfetched()] == ["2"]
    await state.record_fetches([("2", doc("2"), None)])
    assert [d.id for _, d, _ in await state.undelivered()] == ["1"]
    await state.aclose()


async def test_provenance_over_runs(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = await HarvestState.open(path)
    for query in ("b", "a"):
        await state.claim_query(query)
    await state.record_searches([("a", ["1", "2"], None), ("b", ["2"], None)])
    found = await state.record_fetches([("2", doc("2"), None), ("1", None, None)])
    assert found == {"2": ("b", "a")}  # by when each query was first taken, not answered
    await state.aclose()

    state = await HarvestState.open(path)
    await state.claim_query("c")
    await state.record_searches([("c", ["2", "3"], None)])
    assert await state.found_by("2") == ("b", "a", "c")
    assert await state.found_by("3") == ("c",) and await state.found_by("4") == ()
    [(_, held, queries)] = await state.undelivered()
    assert (held.id, queries) == ("2", ("b", "a", "c"))
    await state.aclose()


V1_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE queries (query TEXT PRIMARY KEY, status TEXT NOT NULL, run INTEGER NOT NULL,"
    " ids TEXT, error TEXT)",
    "CREATE TABLE documents (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,"
    " status TEXT NOT NULL, body BLOB, error TEXT)",
)


async def test_a_version_1_state_is_migrated_with_its_provenance(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = sqlite3.connect(path)
    for statement in V1_SCHEMA:
        db.execute(statement)
    body = b'{"id":"1","title":"T","author":"A","ref":"R","text":"body"}'
    db.executescript(
        "INSERT INTO meta VALUES ('runs', '1');"
        "INSERT INTO queries VALUES ('b', 'searched', 1, '[\"1\", \"2\"]', NULL);"
        "INSERT INTO queries VALUES ('a', 'searched', 1, '[\"2\"]', NULL);"
        "INSERT INTO queries VALUES ('c', 'pending', 1, NULL, NULL);"
        "INSERT INTO documents (id, status) VALUES ('2', 'pending');"
        "PRAGMA user_version = 1;"
    )
    db.execute("INSERT INTO documents (id, status, body) VALUES ('1', 'fetched', ?)", (body,))
    db.commit()
    db.close()

    state = await HarvestState.open(path)
    assert state.run == 2
    assert await state.found_by("2") == ("b", "a") and await state.found_by("1") == ("b",)
    assert [(d.id, q) for _, d, q in await state.undelivered()] == [("1", ("b",))]
    assert [i for _, i in await state.unfetched()] == ["2"]
    assert await state.claim_query("b") == "recorded" and await state.claim_query("c") == "search"
    await state.aclose()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    db.close()
