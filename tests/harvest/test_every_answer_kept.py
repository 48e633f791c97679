"""Every answer that arrives is kept, whenever and however the consumer leaves: a resumed
harvest repeats at most the requests that were in flight.

Deterministic: the fetches' answers arrive when the test says (:class:`HeldClient`), and
the state's commits wait at a gate the test holds, so an answer can be made to arrive
while the state is committing the one before it (what a busy machine does by chance).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import anyio
import pytest

from magisterium_async._harvest import harvest
from tests.helpers.harvest_fakes import HeldClient

QUERIES = [f"q{i}" for i in range(30)]  # 10 documents each: 300 in all
IN_FLIGHT = 8


class Gate:
    """While closed, the state's commits wait (in the state's worker thread)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._open = threading.Event()
        self._open.set()
        self._waiting = threading.Event()
        self.committed = threading.Event()
        """Set by each commit."""
        gate = self

        class Connection(sqlite3.Connection):
            def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
                if sql == "COMMIT" and not gate._open.is_set():
                    gate._waiting.set()
                    gate._open.wait()
                cursor = super().execute(sql, *args)
                if sql == "COMMIT":
                    gate.committed.set()
                return cursor

        connect = sqlite3.connect
        monkeypatch.setattr(
            sqlite3, "connect", lambda *a, **kw: connect(*a, factory=Connection, **kw)
        )

    def close(self) -> None:
        self._waiting.clear()
        self._open.clear()

    def open(self) -> None:
        self._open.set()

    async def waiting(self) -> None:
        """Until a commit waits at the gate."""
        await anyio.to_thread.run_sync(self._waiting.wait)


async def settle() -> None:
    """Let every task that can run, run (a bounded number of the loop's steps, no time)."""
    for _ in range(200):
        await asyncio.sleep(0)


def recorded(state: Path) -> set[str]:
    """The ids whose fetch the state records."""
    db = sqlite3.connect(state)
    try:
        rows = db.execute(
            "SELECT id FROM documents WHERE status IN ('fetched', 'delivered', 'not_found')"
        )
        return {document_id for (document_id,) in rows}
    finally:
        db.close()


def runners() -> set[asyncio.Task[Any]]:
    return {
        t
        for t in asyncio.all_tasks()
        if getattr(t.get_coro(), "__qualname__", "") == "_run"  # a harvest's producer
    }


@pytest.mark.parametrize("answered", [IN_FLIGHT, 5])
@pytest.mark.parametrize("leave", ["break", "raise", "aclose", "cancel", "bare break"])
async def test_answers_that_arrive_while_the_state_commits_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leave: str, answered: int
) -> None:
    gate = Gate(monkeypatch)
    client = HeldClient(per_query=10)
    client.hold()
    state = tmp_path / "state.db"
    got: list[str] = []
    progressed, paused, go = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def read(h: Any) -> None:
        async for document in h:
            got.append(document.id)
            progressed.set()
            if len(got) == 40:
                paused.set()
                await go.wait()
                if leave == "raise":
                    raise RuntimeError("the consumer broke")
                if leave == "aclose":
                    await h.aclose()
                break

    async def consume() -> None:
        if leave == "bare break":  # no async with: left to the garbage collector
            await read(harvest(client, QUERIES, state=state, concurrency=IN_FLIGHT))
            return
        async with harvest(client, QUERIES, state=state, concurrency=IN_FLIGHT) as h:
            await read(h)

    consumer = asyncio.create_task(consume())
    while not paused.is_set():  # one answer at a time, each taken by the consumer
        client.answer(await client.unanswered(1))
        progressed.clear()
        await progressed.wait()
    held = await client.unanswered(IN_FLIGHT)  # the consumer holds its 40th document
    gate.close()
    client.answer(held[:1])
    await gate.waiting()  # the state commits the first answer...
    client.answer(held[1:answered])  # ...while the others arrive
    await settle()
    in_flight = {i for i, answer in client.held.items() if not answer.done()}
    if leave == "cancel":
        consumer.cancel()
    else:
        go.set()
    await settle()  # the consumer has left, and everything it stopped has stopped
    gate.open()
    left = leave in ("raise", "cancel")
    with pytest.raises((RuntimeError, asyncio.CancelledError)) if left else nullcontext():
        await consumer
    await asyncio.wait(runners() or {asyncio.ensure_future(asyncio.sleep(0))})

    # Every answer that arrived is in the state; a resume asks only for what was in flight.
    assert set(held[:answered]) <= recorded(state)
    again = HeldClient(per_query=10)
    async with harvest(again, QUERIES, state=state, concurrency=IN_FLIGHT) as h:
        rest = [document.id async for document in h]
    assert not set(again.sent) & set(held[:answered])
    assert set(again.sent) & set(client.sent) <= in_flight  # asked again: only those
    kept = got[:-1] if leave in ("raise", "cancel", "bare break") else got  # not delivered
    assert sorted(kept + rest) == sorted(f"{q}/{k}" for q in QUERIES for k in range(10))


async def test_an_acknowledgement_is_committed_while_the_harvest_waits_on_a_fetch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delivery waits for no later answer: while every fetch hangs (a quota window), a
    kill must not lose what the consumer already acknowledged."""
    gate = Gate(monkeypatch)
    state = tmp_path / "state.db"
    client = HeldClient(per_query=3)
    async with harvest(client, ["a"], state=state, acknowledge="manual") as h:
        got = [(await anext(h)).id, (await anext(h)).id]
        client.hold()  # the third fetch never answers: no later commit carries it
        h.acknowledge(got)
        while not set(got) <= delivered(state):
            gate.committed.clear()
            await anyio.to_thread.run_sync(gate.committed.wait)
        assert delivered(state) == set(got)


def delivered(state: Path) -> set[str]:
    db = sqlite3.connect(state)
    try:
        return {i for (i,) in db.execute("SELECT id FROM documents WHERE status = 'delivered'")}
    finally:
        db.close()
