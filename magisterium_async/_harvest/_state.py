"""The harvest's state, as the harvest uses it: every call off the event loop.

:class:`HarvestState` runs each call of the synchronous :class:`~._state_store.Store` (the
schema, its statements and its rules: see :mod:`._state_store`) in a worker thread, one at
a time, each as one transaction that cancellation does not cut short; a failure of the
database is a :class:`StateError` naming the file. One state file serves one harvest at a
time.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import TypeVar

import anyio
import anyio.to_thread
import msgspec

from magisterium_async._errors import StateError
from magisterium_async._harvest._jsonl import OutputMark
from magisterium_async._harvest._state_store import (
    FetchOutcome,
    Held,
    QueryClaim,
    StateSummary,
    Store,
    read_items,
)

__all__ = ["HarvestState", "recorded_items"]

T = TypeVar("T")


@contextmanager
def _state_errors(path: str) -> Iterator[None]:
    try:
        yield
    except (sqlite3.Error, msgspec.DecodeError, msgspec.ValidationError) as exc:
        where = repr(path) if path else "(temporary)"
        raise StateError(f"harvest state {where}: {exc}", path=path) from exc


async def recorded_items(path: str | os.PathLike[str]) -> tuple[list[str], list[str]]:
    """Every query and every document id the state at ``path`` holds, whatever their
    status (``[]`` and ``[]`` without a file); read-only, off the event loop, no run begun."""
    where = os.fspath(path)
    with _state_errors(where):
        return await anyio.to_thread.run_sync(read_items, where)


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

    async def record_searches(
        self, outcomes: Sequence[tuple[str, list[str] | None, str | None]]
    ) -> list[str]:
        """Record ``(query, ids, error)`` answers (``ids`` ``None``: failed, with ``error``).

        Returns the ids no earlier search had found, now ``pending``, in order.
        """
        return await self._call(partial(self._store.record_searches, outcomes))

    async def record_fetches(
        self,
        outcomes: Sequence[FetchOutcome],
        delivered: Sequence[str] = (),
        output: OutputMark | None = None,
    ) -> dict[str, tuple[str, ...]]:
        """Record fetch answers and mark ``delivered`` documents as handed over (and,
        in the same transaction, where the output file now ends: ``output``).

        Returns, for each document fetched, the queries that have found it (see
        :meth:`found_by`).
        """
        return await self._call(partial(self._store.record_fetches, outcomes, delivered, output))

    async def output(self) -> OutputMark | None:
        """Where the harvest's output file was left, as last recorded (``None``: never)."""
        return await self._call(self._store.output)

    async def record_output(self, mark: OutputMark) -> None:
        """Record where the harvest's output file now ends."""
        await self._call(partial(self._store.record_output, mark))

    async def undelivered(self, after: int = 0, limit: int = 32) -> list[Held]:
        """Documents fetched by an earlier run but never delivered, by ``seq`` after ``after``,
        each with the queries that have found it."""
        return await self._call(partial(self._store.undelivered, after, limit))

    async def found_by(self, document_id: str) -> tuple[str, ...]:
        """The queries whose recorded answers hold ``document_id``, in the order they were
        first taken (over every run); ``()`` for an id no search returned."""
        return await self._call(partial(self._store.found_by, document_id))

    async def unfetched(self, after: int = 0, limit: int = 256) -> list[tuple[int, str]]:
        """Ids found by an earlier run and not fetched (or failed), by ``seq`` after ``after``."""
        return await self._call(partial(self._store.unfetched, after, limit))

    async def summary(self) -> StateSummary:
        """Counts of queries and documents by status."""
        return await self._call(self._store.summary)

    async def aclose(self) -> None:
        """Close the database (waiting for a call in progress to finish)."""
        await self._call(self._store.close)
