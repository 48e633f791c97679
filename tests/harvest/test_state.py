"""The harvest's state off the event loop: a temporary database, a file that is no state
is a StateError naming it, and every recorded item read without beginning a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from magisterium_async import Document, StateError
from magisterium_async._harvest._state import HarvestState, recorded_items


def doc(document_id: str) -> Document:
    return Document(id=document_id, title="T", author="A", ref="R", text="body")


async def test_without_a_path_a_temporary_database_keeps_no_bodies() -> None:
    state = await HarvestState.open(None)
    await state.claim_query("q")
    await state.record_searches([("q", ["1"], None)])
    await state.record_fetches([("1", doc("1"), None)])
    assert (await state.summary()).documents == {"fetched": 1}
    await state.aclose()


@pytest.mark.parametrize("content", [b"these are my notes, not a database\n" * 10, b"\x00" * 8])
async def test_a_file_that_is_not_a_state_is_a_state_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(StateError, match=r"notes\.txt") as info:
        state = await HarvestState.open(path)
        await state.aclose()
    assert info.value.path == str(path)


async def test_recorded_items_are_every_query_and_id_whatever_their_status(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    assert await recorded_items(path) == ([], [])  # no file: nothing, and none made
    assert not path.exists()
    state = await HarvestState.open(path)
    try:
        for query in ("a", "b"):
            await state.claim_query(query)
        await state.record_searches([("a", ["1", "2"], None), ("b", None, "boom")])
    finally:
        await state.aclose()
    queries, ids = await recorded_items(path)
    assert (sorted(queries), sorted(ids)) == (["a", "b"], ["1", "2"])
