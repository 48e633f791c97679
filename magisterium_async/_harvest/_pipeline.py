"""One harvest run: its stages, joined by anyio memory streams in one task group, and
the bookkeeping of what the consumer has been given.

::

    queries ─ claim ─▶ search ≤N ─▶ record searches ─▶ fetch ≤N ─▶ record fetches ─▶ deliver
                                    (new ids only)                  (commit first)
    state: ids an earlier run found but did not fetch ─────▶ fetch
    state: documents an earlier run fetched but did not deliver ────────────────────▶ deliver

Owns :class:`HarvestRun` (one run: the stages, the counters, the failures, the hold on
the state) and the backpressure between the stages. Every answer is committed to the
state before anything that follows from it moves on, so a resumed harvest never asks
again for an answer it recorded; and recording never waits for a later stage, so an
answer received is on disk within a transaction even while the consumer stalls.
Backpressure is applied where work *starts* instead: no search starts while ``2 * N``
found ids wait for a fetch, and no fetch while ``2 * N`` documents are fetched but not
handed over, so memory stays flat however long the input. A search or a fetch is a task
started when its input arrives and gone when its answer is sent on: the tasks alive are
the work in flight, at most ``N`` of each, never ``N`` made up front. The dedupe set is
the state's ``documents`` table (a temporary database without ``state=``): memory does
not grow with the number of ids.

:class:`Deliveries` holds the ids the consumer has been given (and where its output file
now ends) until a transaction takes them to the state: the next fetch's own
(:meth:`Deliveries.take`), one of their own while the pipeline runs
(:meth:`Deliveries.keep`), or, after the pipeline is gone, one on the state reopened
(:meth:`Deliveries.commit_to`).
"""

from __future__ import annotations

import math
import os
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from typing import Literal, Protocol, TypeVar

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from magisterium_async._clock import Clock
from magisterium_async._errors import AuthenticationError, StateError
from magisterium_async._harvest._batch import ITEM_ERRORS, Guard, SearchFetchClient, for_each
from magisterium_async._harvest._jsonl import OutputMark
from magisterium_async._harvest._lock import HarvestLock
from magisterium_async._harvest._results import (
    HarvestedDocument,
    HarvestFailure,
    HarvestStats,
)
from magisterium_async._harvest._state import Fetched, HarvestState, Searched
from magisterium_async._ratelimit import SchedulerStats
from magisterium_async._skills import require_query

__all__ = ["Deliveries", "HarvestClient", "HarvestRun", "OnError", "rate_limited"]

OnError = Literal["record", "raise"]

T = TypeVar("T")

_BATCH = 256  # most answers committed in one transaction


class HarvestClient(SearchFetchClient, Protocol):
    """What a harvest needs of a client: searches, fetches, and the pools' counters (for
    :attr:`HarvestStats.rate_limited`). :class:`AsyncMagisterium` is one."""

    @property
    def stats(self) -> SchedulerStats: ...


def rate_limited(stats: SchedulerStats) -> int:
    """The 429s met over every pool."""
    return stats.default.rate_limited + stats.expensive.rate_limited + stats.unmetered.rate_limited


class Deliveries:
    """Documents delivered and not yet committed to the state."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._output: OutputMark | None = None
        self._noted: anyio.Event | None = None
        self._open = True

    @property
    def pending(self) -> bool:
        """Whether anything waits to be committed."""
        return bool(self._ids) or self._output is not None

    def note(self, document_ids: Iterable[str], output: OutputMark | None = None) -> None:
        """Note documents as delivered (and where the output now ends); committed promptly."""
        self._ids.extend(document_ids)
        if output is not None:
            self._output = output
        if self._noted is not None:
            self._noted.set()

    def take(self) -> tuple[list[str], OutputMark | None]:
        """What waits, handed to a transaction about to commit it (``record_fetches``)."""
        ids, self._ids = self._ids, []
        output, self._output = self._output, None
        return ids, output

    async def commit(self, state: HarvestState) -> None:
        """Commit what waits, in a transaction of its own (nothing when nothing waits)."""
        if self.pending:
            await state.record_fetches((), *self.take())

    async def commit_to(self, path: str | os.PathLike[str] | None) -> None:
        """Commit what waits to the state at ``path``, reopened (the pipeline is gone);
        without a path (a temporary state, gone too) it is dropped."""
        if self.pending and path is not None:
            with anyio.CancelScope(shield=True):
                state = await HarvestState.open(path, new_run=False)
                try:
                    await self.commit(state)
                finally:
                    await state.aclose()
        self.take()

    def close(self) -> None:
        """No more deliveries through the pipeline: :meth:`keep` ends."""
        self._open = False
        if self._noted is not None:
            self._noted.set()

    async def keep(self, state: HarvestState) -> None:
        """Commit each delivery as it comes, until :meth:`close`.

        A delivery waits for one transaction, not for the next fetch: while the pipeline
        stalls (a quota window) a kill must not lose what the consumer already has.
        """
        while self._open:
            self._noted = anyio.Event()
            await self.commit(state)
            if self._open and not self.pending:
                await self._noted.wait()


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
    """One harvest run: the pipeline's stages and its counters. Knows nothing of the consumer.

    ``lock`` is the hold on the state file when the caller has taken it already (the
    command line holds it before it reads the state); without one, a run with a state
    takes its own at the start (:meth:`produce`) and lets it go in :meth:`release`.
    """

    def __init__(
        self,
        client: HarvestClient,
        queries: Iterable[str] | AsyncIterable[str],
        state: str | os.PathLike[str] | None,
        on_error: OnError,
        concurrency: int,
        clock: Clock,
        lock: HarvestLock | None = None,
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
        self._own_lock: HarvestLock | None = None
        if state is not None and lock is None:
            self._own_lock = HarvestLock(state, "state", StateError)

    def release(self) -> None:
        """Let go of the hold on the state this run took (none taken: nothing). Idempotent."""
        if self._own_lock is not None:
            self._own_lock.release()

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
            if self._own_lock is not None:
                # Before the state is read: refused at once if held (in a thread: a
                # refusal may take a moment to name the holder).
                await anyio.to_thread.run_sync(self._own_lock.acquire)
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
        searched, search_outcomes = anyio.create_memory_object_stream[Searched](0)
        # Unbounded in type only: ``backlog`` and ``slots`` bound what they hold.
        to_fetch, fetches = anyio.create_memory_object_stream[str](math.inf)
        fetched, fetch_outcomes = anyio.create_memory_object_stream[Fetched](0)
        ready, deliveries = anyio.create_memory_object_stream[HarvestedDocument](math.inf)
        async with anyio.create_task_group() as tg:
            guard.watch(tg.cancel_scope)
            tg.start_soon(guard(self._claim_queries), state, to_search, backlog)
            tg.start_soon(guard(self._searches), tg, searches, searched)
            tg.start_soon(guard(self._fetches), tg, fetches, fetched, backlog, slots)
            tg.start_soon(
                guard(self._record_searches), state, search_outcomes, to_fetch.clone(), backlog
            )
            tg.start_soon(guard(self._resume_fetches), state, to_fetch, backlog)
            tg.start_soon(guard(self._record_fetches), state, fetch_outcomes, ready.clone(), slots)
            tg.start_soon(guard(self._resume_documents), state, ready, slots)
            tg.start_soon(guard(self._deliver), deliveries, out, slots)
            tg.start_soon(guard(self.deliveries.keep), state)

    async def _claim_queries(
        self, state: HarvestState, to_search: MemoryObjectSendStream[str], backlog: _Backlog
    ) -> None:
        async def claim(query: str) -> None:
            self.stats.queries += 1
            try:
                query = require_query("query", query)  # the one rule: stripped, bounded
            except ITEM_ERRORS as exc:
                self.fail("search", query, exc)
                return
            taken = await state.claim_query(query)
            if taken == "search":
                await backlog.room()
                await to_search.send(query)
                return
            self.stats.skipped_queries += 1
            if taken == "duplicate":
                self.stats.repeated_queries += 1

        async with to_search:
            await for_each(self.queries, claim)

    async def _dispatch(
        self,
        tg: TaskGroup,
        inputs: MemoryObjectReceiveStream[str],
        out: MemoryObjectSendStream[T],
        call: Callable[[str, MemoryObjectSendStream[T]], Awaitable[None]],
        before: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Start ``call(input, out)`` as a task per input, at most ``concurrency`` at once;
        ``out`` closes once the inputs have ended and every call has sent its answer."""
        in_flight = anyio.Semaphore(self.concurrency)

        async def one(value: str, send: MemoryObjectSendStream[T]) -> None:
            async with send:
                try:
                    await call(value, send)
                finally:
                    in_flight.release()

        async with inputs, out:
            async for value in inputs:
                if before is not None:
                    await before()
                await in_flight.acquire()
                tg.start_soon(self.guard(one), value, out.clone())

    async def _searches(
        self,
        tg: TaskGroup,
        queries: MemoryObjectReceiveStream[str],
        out: MemoryObjectSendStream[Searched],
    ) -> None:
        async def search(query: str, send: MemoryObjectSendStream[Searched]) -> None:
            try:
                results = await self.client.search(query)
            except AuthenticationError:
                raise  # every request after it would fail too: stop, resumable
            except ITEM_ERRORS as exc:
                await send.send(Searched(query, None, exc))
            else:
                await send.send(Searched(query, [r.id for r in results], None))

        await self._dispatch(tg, queries, out, search)

    async def _record_searches(
        self,
        state: HarvestState,
        outcomes: MemoryObjectReceiveStream[Searched],
        to_fetch: MemoryObjectSendStream[str],
        backlog: _Backlog,
    ) -> None:
        # Never waits on the fetches: an answer received is an answer recorded at once.
        async with outcomes, to_fetch:
            async for first in outcomes:
                batch = _drain(outcomes, first)
                new_ids = await state.record_searches(batch)
                for answer in batch:
                    if answer.error is not None:
                        self.fail("search", answer.query, answer.error)
                    else:
                        self.stats.searched += 1
                        self.stats.results += len(answer.ids or ())
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
                for found in page:
                    await backlog.room()
                    backlog.add(1)
                    to_fetch.send_nowait(found.id)
                after = page[-1].seq

    async def _fetches(
        self,
        tg: TaskGroup,
        ids: MemoryObjectReceiveStream[str],
        out: MemoryObjectSendStream[Fetched],
        backlog: _Backlog,
        slots: anyio.Semaphore,
    ) -> None:
        async def fetch(document_id: str, send: MemoryObjectSendStream[Fetched]) -> None:
            try:
                document = await self.client.fetch(document_id)
            except AuthenticationError:
                raise
            except ITEM_ERRORS as exc:
                await send.send(Fetched(document_id, None, exc))
            else:
                await send.send(Fetched(document_id, document, None))

        async def taken() -> None:
            backlog.take()
            await slots.acquire()

        await self._dispatch(tg, ids, out, fetch, before=taken)

    async def _record_fetches(
        self,
        state: HarvestState,
        outcomes: MemoryObjectReceiveStream[Fetched],
        ready: MemoryObjectSendStream[HarvestedDocument],
        slots: anyio.Semaphore,
    ) -> None:
        # Never waits on the consumer: documents go on only once committed.
        async with outcomes, ready:
            async for first in outcomes:
                batch = _drain(outcomes, first)
                found = await state.record_fetches(batch, *self.deliveries.take())
                self.update_rate_limited()
                for answer in batch:
                    if answer.document is not None:
                        self.stats.fetched += 1
                        ready.send_nowait(found[answer.id])
                        continue
                    slots.release()
                    if answer.error is not None:
                        self.fail("fetch", answer.id, answer.error)
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
                for held in page:
                    await slots.acquire()
                    self.stats.resumed += 1
                    ready.send_nowait(held.document)
                after = page[-1].seq

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
