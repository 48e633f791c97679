"""What a careless caller does with a harvest or a batch is refused at once, saying what
to do: one id given to ``acknowledge`` as a str (or ids of another type), and a harvest
or batch iterated again after it ended."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from magisterium_async import StateError
from magisterium_async._harvest import fetch_many, harvest, search_many
from tests.helpers.harvest_fakes import FakeClient


def delivered(state: Path) -> list[str]:
    db = sqlite3.connect(state)
    try:
        rows = db.execute("SELECT id FROM documents WHERE status = 'delivered' ORDER BY line")
        return [document_id for (document_id,) in rows]
    finally:
        db.close()


@pytest.mark.parametrize(
    ("ids", "says"),
    [
        ("a/0", "not str 'a/0'"),  # one id as a str: its letters would be the ids
        (b"a/0", "not bytes"),
        (None, "not NoneType"),
        (123, "not int 123"),
        ([123], "document ids as str, not int 123"),
        (["a/0", None], "document ids as str, not NoneType"),
        ([b"a/0"], "document ids as str, not bytes"),
        ({"a/0": 1}.values(), "document ids as str, not int 1"),
    ],
)
async def test_acknowledge_takes_an_iterable_of_str_ids(
    tmp_path: Path, ids: object, says: str
) -> None:
    state = tmp_path / "state.db"
    async with harvest(FakeClient(), ["a"], state=state, acknowledge="manual") as h:
        document = await anext(h)
        with pytest.raises(TypeError, match="acknowledge\\(\\)") as refused:
            h.acknowledge(ids)  # type: ignore[arg-type]
        assert says in str(refused.value)
        if isinstance(ids, str):
            assert "one id: [id]" in str(refused.value)
        with pytest.raises(TypeError, match="output must be an OutputMark"):
            h.acknowledge([document.id], output="docs.jsonl")  # type: ignore[arg-type]
    assert delivered(state) == []  # nothing half-acknowledged


@pytest.mark.parametrize(
    "ids", [lambda got: got, lambda got: tuple(got), lambda got: (i for i in got), set]
)
async def test_acknowledge_takes_any_iterable_of_ids(tmp_path: Path, ids: Any) -> None:
    state = tmp_path / "state.db"
    async with harvest(FakeClient(), ["a"], state=state, acknowledge="manual") as h:
        got = [document.id async for document in h]
        h.acknowledge(ids(got))
    assert sorted(delivered(state)) == sorted(got)
    again = harvest(FakeClient(), ["a"], state=state, acknowledge="manual")
    async with again:
        assert [document async for document in again] == []  # none comes back


async def test_acknowledge_after_the_harvest_was_closed_raises(tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    async with harvest(FakeClient(), ["a"], state=state, acknowledge="manual") as h:
        got = [document.id async for document in h]
    with pytest.raises(RuntimeError, match=r"after the harvest was closed.*come again"):
        h.acknowledge(got)
    # Acknowledged after its last document, before it is closed: kept.
    async with harvest(FakeClient(), ["a"], state=state, acknowledge="manual") as again:
        resent = [document.id async for document in again]
        again.acknowledge(resent)
    assert sorted(resent) == sorted(got) == sorted(delivered(state))


async def drained(iterator: Any) -> list[Any]:
    return [item async for item in iterator]


def made(kind: str, state: Path) -> Any:
    client = FakeClient()
    if kind == "harvest":
        return harvest(client, ["a", "b"], state=state)
    if kind == "search_many":
        return search_many(client, ["a", "b"])
    return fetch_many(client, ["a/0", "b/0"])


@pytest.mark.parametrize("kind", ["harvest", "search_many", "fetch_many"])
@pytest.mark.parametrize("how", ["async with", "aclose", "ran to its end", "break"])
async def test_iterated_again_after_it_ended_it_raises(tmp_path: Path, kind: str, how: str) -> None:
    iterator = made(kind, tmp_path / "state.db")
    if how == "async with":
        async with iterator:
            first = await drained(iterator)
    elif how == "aclose":
        first = [await anext(iterator)]
        await iterator.aclose()
    elif how == "ran to its end":
        first = await drained(iterator)
    else:
        async with iterator:
            async for item in iterator:
                first = [item]
                break
    assert first
    name = "harvest" if kind == "harvest" else "batch"
    for again in (drained, anext):
        with pytest.raises(RuntimeError, match=f"this {name} has ended.*make a new one"):
            await again(iterator)
    await iterator.aclose()  # closing again is still fine


async def test_a_new_harvest_of_the_same_state_goes_on_where_the_last_ended(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state.db"
    queries: Iterable[str] = ["a", "b", "c"]
    async with harvest(FakeClient(), queries, state=state) as h:
        first = [(await anext(h)).id]
    with pytest.raises(RuntimeError, match="with the same state=, it resumes"):
        await anext(h)
    async with harvest(FakeClient(), queries, state=state) as h:
        rest = await drained(h)
    assert sorted(first + [d.id for d in rest]) == sorted(
        f"{q}/{k}" for q in "abc" for k in range(3)
    )


async def test_an_empty_state_is_refused_never_a_state_thrown_away(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="state must not be empty"):
        harvest(FakeClient(), ["a"], state="")
    directory = tmp_path / "states"
    (directory / "inner").mkdir(parents=True)  # a directory has links of its own
    with pytest.raises(StateError, match=r"is not a harvest state \(a directory\)"):
        async with harvest(FakeClient(), ["a"], state=directory) as documents:
            await anext(documents)
