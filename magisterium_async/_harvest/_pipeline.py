"""The harvest's pipeline: its stages, joined by anyio memory streams in one task group.

::

    queries ─ claim ─▶ search xN ─▶ record searches ─▶ fetch xN ─▶ record fetches ─▶ deliver
                                    (new ids only)                  (commit first)
    state: ids an earlier run found but did not fetch ─────▶ fetch
    state: documents an earlier run fetched but did not deliver ────────────────────▶ deliver

Owns :class:`HarvestRun` (one run: the stages, the counters, the failures) and the
backpressure between the stages. Every answer is committed to the state before anything
that follows from it moves on, so a resumed harvest never asks again for an answer it
recorded; and recording never waits for a later stage, so an answer received is on disk
within a transaction even while the consumer stalls. Backpressure is applied where work
*starts* instead: no search starts while ``2 * concurrency`` found ids wait for a fetch,
and no fetch while ``2 * concurrency`` documents are fetched but not handed over, so
memory stays flat however long the input. The dedupe set is the state's ``documents``
table (a temporary database without ``state=``): memory does not grow with the number of
ids.
"""

from __future__ import annotations

import math
import os
from collections.abc import AsyncIterable, Iterable
from typing import Literal, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from magisterium_async._clock import Clock
from magisterium_async._errors import AuthenticationError
from magisterium_async._harvest._batch import ITEM_ERRORS, Guard, for_each
from magisterium_async._harvest._delivery import Deliveries
from magisterium_async._harvest._records import (
    HarvestClient,
    HarvestedDocument,
    HarvestFailure,
    HarvestStats,
    harvested,
    rate_limited,
)
from magisterium_async._harvest._state import HarvestState
from magisterium_async._harvest._state_store import FetchOutcome
from magisterium_async._models import Document
from magisterium_async._skills import require_text

__all__ = ["HarvestRun", "OnError"]

OnError = Literal["record", "raise"]

T = TypeVar("T")

_BATCH = 256  # most answers committed in one transaction
# A search's answer as it comes back: the query, the ids found or the error raised.
_Searched = tuple[str, list[str] | None, Exception | None]
# A fetch's answer as it comes back (before the state's FetchOutcome records it): the id,
# the document (None: not found) or the error raised.
_Fetched = tuple[str, Document | None, Exception | None]


class _Backlog:
    """Ids found and not yet taken by a fetch; no new search starts while it is full."""

    def __init__(self, limit: int) -> None:
        self.size = 0
        self.limit = limit
        self._changed = anyio.Event()

    def add(self, count: int) -> None:
        self.size += count

    def take(self) -> None:
        self.size -= 1
        # Wake every waiter of this round, then start the next round with a fresh event.
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def room(self) -> None:
        while self.size >= self.limit:
            await self._changed.wait()


def _drain(receive: MemoryObjectReceiveStream[T], first: T) -> list[T]:
    batch = [first]
    while len(batch) < _BATCH:
        try:
            batch.append(receive.receive_nowait())
        except (anyio.WouldBlock, anyio.EndOfStream):
            break
    return batch


class HarvestRun:
    """One harvest run: the pipeline's stages and its counters. Knows nothing of the consumer."""

    def __init__(
        self,
        client: HarvestClient,
        queries: Iterable[str] | AsyncIterable[str],
        state: str | os.PathLike[str] | None,
        on_error: OnError,
        concurrency: int,
        clock: Clock,
    ) -> None:
        self.client = client
        self.queries = queries
        self.path = state
        self.on_error = on_error
        self.concurrency = concurrency
        self.clock = clock
        self.stats = HarvestStats()
        self.failures: list[HarvestFailure] = []
        self.deliveries = Deliveries()
        self.state: HarvestState | None = None
        self.guard = Guard()
        self._rate_limited_before = 0

    def fail(self, kind: Literal["search", "fetch"], value: object, error: Exception) -> None:
        self.failures.append(HarvestFailure(kind, value, error))
        self.stats.failed += 1
        if self.on_error == "raise":
            self.guard.fail(error)

    def update_rate_limited(self) -> None:
        self.stats.rate_limited = rate_limited(self.client.stats) - self._rate_limited_before

    async def produce(self, out: MemoryObjectSendStream[HarvestedDocument | None]) -> None:
        self.stats.start(self.clock)
        self._rate_limited_before = rate_limited(self.client.stats)
        try:
            # Nothing between the open and the ``try`` may yield to the loop: a cancellation
            # there would leave the database open.
            state = self.state = await HarvestState.open(self.path)
            try:
                await self._pipeline(state, out)
                if self.guard.error is None:
                    # Handed over once the consumer asks for the item after the last
                    # document: by then that document is acknowledged, and recorded below.
                    await out.send(None)
            finally:
                with anyio.CancelScope(shield=True):
                    await self.deliveries.commit(state)
                    self.state = None
                    await state.aclose()
        finally:
            self.update_rate_limited()
            self.stats.finish()
        self.guard.check()

    async def _pipeline(
        self, state: HarvestState, out: MemoryObjectSendStream[HarvestedDocument | None]
    ) -> None:
        n = self.concurrency
        guard = self.guard
        backlog = _Backlog(2 * n)
        # Documents fetched (or being fetched) and not yet handed over: what memory holds.
        slots = anyio.Semaphore(2 * n)
        to_search, searches = anyio.create_memory_object_stream[str](0)
        searched, search_outcomes = anyio.create_memory_object_stream[_Searched](0)
        # Unbounded in type only: ``backlog`` and ``slots`` bound what they hold.
        to_fetch, fetches = anyio.create_memory_object_stream[str](math.inf)
        fetched, fetch_outcomes = anyio.create_memory_object_stream[_Fetched](0)
        ready, deliveries = anyio.create_memory_object_stream[HarvestedDocument](math.inf)
        async with anyio.create_task_group() as tg:
            guard.watch(tg.cancel_scope)
            tg.start_soon(guard(self._claim_queries), state, to_search, backlog)
            for _ in range(n):
                tg.start_soon(guard(self._search), searches.clone(), searched.clone())
                tg.start_soon(guard(self._fetch), fetches.clone(), fetched.clone(), backlog, slots)
            tg.start_soon(
                guard(self._record_searches), state, search_outcomes, to_fetch.clone(), backlog
            )
            tg.start_soon(guard(self._resume_fetches), state, to_fetch, backlog)
            tg.start_soon(guard(self._record_fetches), state, fetch_outcomes, ready.clone(), slots)
            tg.start_soon(guard(self._resume_documents), state, ready, slots)
            tg.start_soon(guard(self._deliver), deliveries, out, slots)
            tg.start_soon(guard(self.deliveries.keep), state)
            for stream in (searches, searched, fetches, fetched):
                stream.close()

    async def _claim_queries(
        self, state: HarvestState, to_search: MemoryObjectSendStream[str], backlog: _Backlog
    ) -> None:
        async def claim(query: str) -> None:
            self.stats.queries += 1
            try:
                require_text("query", query)
            except ITEM_ERRORS as exc:
                self.fail("search", query, exc)
                return
            if await state.claim_query(query) == "search":
                await backlog.room()
                await to_search.send(query)
            else:
                self.stats.skipped_queries += 1

        async with to_search:
            await for_each(self.queries, claim)

    async def _search(
        self, queries: MemoryObjectReceiveStream[str], out: MemoryObjectSendStream[_Searched]
    ) -> None:
        async with queries, out:
            async for query in queries:
                try:
                    results = await self.client.search(query)
                except AuthenticationError:
                    raise  # every request after it would fail too: stop, resumable
                except ITEM_ERRORS as exc:
                    await out.send((query, None, exc))
                else:
                    await out.send((query, [r.id for r in results], None))

    async def _record_searches(
        self,
        state: HarvestState,
        outcomes: MemoryObjectReceiveStream[_Searched],
        to_fetch: MemoryObjectSendStream[str],
        backlog: _Backlog,
    ) -> None:
        # Never waits on the fetches: an answer received is an answer recorded at once.
        async with outcomes, to_fetch:
            async for first in outcomes:
                batch = _drain(outcomes, first)
                new_ids = await state.record_searches(
                    [(q, ids, None if exc is None else repr(exc)) for q, ids, exc in batch]
                )
                for query, ids, exc in batch:
                    if exc is not None:
                        self.fail("search", query, exc)
                    else:
                        self.stats.searched += 1
                        self.stats.results += len(ids or ())
                self.stats.unique_ids += len(new_ids)
                self.update_rate_limited()
                backlog.add(len(new_ids))
                for document_id in new_ids:
                    to_fetch.send_nowait(document_id)

    async def _resume_fetches(
        self, state: HarvestState, to_fetch: MemoryObjectSendStream[str], backlog: _Backlog
    ) -> None:
        async with to_fetch:
            after = 0
            while page := await state.unfetched(after):
                for _, document_id in page:
                    await backlog.room()
                    backlog.add(1)
                    to_fetch.send_nowait(document_id)
                after = page[-1][0]

    async def _fetch(
        self,
        ids: MemoryObjectReceiveStream[str],
        out: MemoryObjectSendStream[_Fetched],
        backlog: _Backlog,
        slots: anyio.Semaphore,
    ) -> None:
        async with ids, out:
            async for document_id in ids:
                backlog.take()
                await slots.acquire()
                try:
                    document = await self.client.fetch(document_id)
                except AuthenticationError:
                    raise
                except ITEM_ERRORS as exc:
                    await out.send((document_id, None, exc))
                else:
                    await out.send((document_id, document, None))

    async def _record_fetches(
        self,
        state: HarvestState,
        outcomes: MemoryObjectReceiveStream[_Fetched],
        ready: MemoryObjectSendStream[HarvestedDocument],
        slots: anyio.Semaphore,
    ) -> None:
        # Never waits on the consumer: documents go on only once committed.
        async with outcomes, ready:
            async for first in outcomes:
                batch = _drain(outcomes, first)
                records: list[FetchOutcome] = [
                    (i, doc, None if exc is None else repr(exc)) for i, doc, exc in batch
                ]
                found = await state.record_fetches(records, *self.deliveries.take())
                self.update_rate_limited()
                for document_id, document, exc in batch:
                    if document is not None:
                        self.stats.fetched += 1
                        ready.send_nowait(harvested(document, found.get(document_id, ())))
                        continue
                    slots.release()
                    if exc is not None:
                        self.fail("fetch", document_id, exc)
                    else:
                        self.stats.not_found += 1

    async def _resume_documents(
        self,
        state: HarvestState,
        ready: MemoryObjectSendStream[HarvestedDocument],
        slots: anyio.Semaphore,
    ) -> None:
        async with ready:
            after = 0
            while page := await state.undelivered(after):
                for _, document, queries in page:
                    await slots.acquire()
                    self.stats.resumed += 1
                    ready.send_nowait(harvested(document, queries))
                after = page[-1][0]

    async def _deliver(
        self,
        documents: MemoryObjectReceiveStream[HarvestedDocument],
        out: MemoryObjectSendStream[HarvestedDocument | None],
        slots: anyio.Semaphore,
    ) -> None:
        try:
            async with documents:
                async for document in documents:
                    await out.send(document)
                    slots.release()
        finally:
            self.deliveries.close()
