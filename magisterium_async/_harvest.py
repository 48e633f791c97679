"""The harvest: search every query, fetch every document found once, yield each once.

The pipeline, stages joined by anyio memory streams in one task group::

    queries ─ claim ─▶ search xN ─▶ record searches ─▶ fetch xN ─▶ record fetches ─▶ deliver
                                    (new ids only)                  (commit first)
    state: ids an earlier run found but did not fetch ─────▶ fetch
    state: documents an earlier run fetched but did not deliver ────────────────────▶ deliver

Every answer is committed to the state before anything that follows from it moves on, so
a resumed harvest never asks again for an answer it recorded; and recording never waits
for a later stage, so an answer received is on disk within a transaction even while the
consumer stalls. Backpressure is applied where work *starts* instead: no search starts
while ``2 * concurrency`` found ids wait for a fetch, and no fetch while
``2 * concurrency`` documents are fetched but not handed over, so memory stays flat
however long the input. The dedupe set is the state's ``documents`` table (a temporary
database without ``state=``): memory does not grow with the number of ids.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import AsyncIterable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal, NamedTuple, TypeVar

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._batch import (
    DEFAULT_CONCURRENCY,
    ITEM_ERRORS,
    BackgroundIterator,
    Guard,
    SearchFetchClient,
    check_concurrency,
    check_source,
    for_each,
)
from ._errors import AuthenticationError, StateError
from ._jsonl import OutputMark
from ._models import Document
from ._skills import require_text
from ._state import FetchOutcome, HarvestState

__all__ = ["Harvest", "HarvestFailure", "HarvestStats", "HarvestedDocument", "harvest"]

OnError = Literal["record", "raise"]
Acknowledge = Literal["auto", "manual"]

T = TypeVar("T")

_BATCH = 256  # most answers committed in one transaction
_SearchOutcome = tuple[str, list[str] | None, Exception | None]
_FetchOutcome = tuple[str, Document | None, Exception | None]


class HarvestedDocument(Document, frozen=True, kw_only=True):
    """A :class:`Document` as a harvest yields it, with the queries that found it.

    ``queries`` holds every query whose answer, recorded before the document was handed
    over, contained it (in the order the queries were first read, over every run of a
    resumed harvest). A query answered *after* the document was handed over is not in it;
    :meth:`Harvest.found_by` reads them all from the state. Encoded (``msgspec``,
    :class:`JsonlWriter`, the command line) it is the document's fields plus ``"queries"``.
    """

    queries: tuple[str, ...] = ()


def _harvested(document: Document, queries: tuple[str, ...]) -> HarvestedDocument:
    return HarvestedDocument(**msgspec.structs.asdict(document), queries=queries)


class HarvestFailure(NamedTuple):
    """A search or fetch that failed after the client's retries."""

    kind: Literal["search", "fetch"]
    input: object
    """The query (``kind == "search"``) or the document id (``"fetch"``)."""
    error: Exception


@dataclass
class HarvestStats:
    """Live counters of one harvest run; read them during and after the harvest."""

    queries: int = 0
    """Queries read from the input."""
    searched: int = 0
    """Searches answered in this run."""
    skipped_queries: int = 0
    """Queries not searched: answered in an earlier run, or repeated in the input."""
    results: int = 0
    """Search results received, duplicates included."""
    unique_ids: int = 0
    """Document ids found for the first time (in this run or any earlier one)."""
    fetched: int = 0
    """Documents fetched in this run."""
    resumed: int = 0
    """Documents fetched by an earlier run and yielded now, without a request."""
    yielded: int = 0
    """Documents handed to the consumer."""
    not_found: int = 0
    """Ids the service answered "Document not found." for."""
    failed: int = 0
    """Searches and fetches that failed after retries (see :attr:`Harvest.failures`)."""
    rate_limited: int = 0
    """429 answers the client met (and waited out) during the harvest."""
    started: float | None = field(default=None, repr=False)
    finished: float | None = field(default=None, repr=False)

    @property
    def elapsed(self) -> float:
        """Seconds since the harvest started (until it finished)."""
        if self.started is None:
            return 0.0
        end = self.finished if self.finished is not None else time.monotonic()
        return end - self.started


def _rate_limited(client: object) -> int:
    stats = getattr(client, "stats", None)
    pools = (getattr(stats, name, None) for name in ("default", "expensive", "unmetered"))
    return sum(int(getattr(pool, "rate_limited", 0)) for pool in pools)


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


class _Run:
    """One harvest run: the pipeline's stages and its counters. Knows nothing of the consumer."""

    def __init__(
        self,
        client: SearchFetchClient,
        queries: Iterable[str] | AsyncIterable[str],
        state: str | os.PathLike[str] | None,
        on_error: OnError,
        concurrency: int,
    ) -> None:
        self.client = client
        self.queries = queries
        self.path = state
        self.on_error = on_error
        self.concurrency = concurrency
        self.stats = HarvestStats()
        self.failures: list[HarvestFailure] = []
        self.delivered: list[str] = []
        self.output: OutputMark | None = None
        """Where the consumer's output file ends, to record with the next deliveries."""
        self.state: HarvestState | None = None
        self._delivery: anyio.Event | None = None
        self._delivering = True
        self.guard = Guard()
        self._rate_limited_before = 0

    def fail(self, kind: Literal["search", "fetch"], value: object, error: Exception) -> None:
        self.failures.append(HarvestFailure(kind, value, error))
        self.stats.failed += 1
        if self.on_error == "raise":
            self.guard.fail(error)

    def update_rate_limited(self) -> None:
        self.stats.rate_limited = _rate_limited(self.client) - self._rate_limited_before

    async def produce(self, out: MemoryObjectSendStream[HarvestedDocument | None]) -> None:
        self.stats.started = time.monotonic()
        self._rate_limited_before = _rate_limited(self.client)
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
                    if self.delivered or self.output is not None:
                        await state.record_fetches((), *self.take_delivered())
                    self.state = None
                    await state.aclose()
        finally:
            self.update_rate_limited()
            self.stats.finished = time.monotonic()
        self.guard.check()

    def deliver(self, document_ids: Iterable[str], output: OutputMark | None = None) -> None:
        """Note documents as delivered (and where the output now ends); committed promptly
        by :meth:`_commit_deliveries`."""
        self.delivered.extend(document_ids)
        if output is not None:
            self.output = output
        if self._delivery is not None:
            self._delivery.set()

    def take_delivered(self) -> tuple[list[str], OutputMark | None]:
        delivered, self.delivered = self.delivered, []
        output, self.output = self.output, None
        return delivered, output

    async def _pipeline(
        self, state: HarvestState, out: MemoryObjectSendStream[HarvestedDocument | None]
    ) -> None:
        n = self.concurrency
        guard = self.guard
        backlog = _Backlog(2 * n)
        # Documents fetched (or being fetched) and not yet handed over: what memory holds.
        slots = anyio.Semaphore(2 * n)
        to_search, searches = anyio.create_memory_object_stream[str](0)
        searched, search_outcomes = anyio.create_memory_object_stream[_SearchOutcome](0)
        # Unbounded in type only: ``backlog`` and ``slots`` bound what they hold.
        to_fetch, fetches = anyio.create_memory_object_stream[str](math.inf)
        fetched, fetch_outcomes = anyio.create_memory_object_stream[_FetchOutcome](0)
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
            tg.start_soon(guard(self._commit_deliveries), state)
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
        self, queries: MemoryObjectReceiveStream[str], out: MemoryObjectSendStream[_SearchOutcome]
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
        outcomes: MemoryObjectReceiveStream[_SearchOutcome],
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
        out: MemoryObjectSendStream[_FetchOutcome],
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
        outcomes: MemoryObjectReceiveStream[_FetchOutcome],
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
                found = await state.record_fetches(records, *self.take_delivered())
                self.update_rate_limited()
                for document_id, document, exc in batch:
                    if document is not None:
                        self.stats.fetched += 1
                        ready.send_nowait(_harvested(document, found.get(document_id, ())))
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
                    ready.send_nowait(_harvested(document, queries))
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
            self._delivering = False
            if self._delivery is not None:
                self._delivery.set()

    async def _commit_deliveries(self, state: HarvestState) -> None:
        # A delivery waits for one transaction, not for the next fetch: while the pipeline
        # stalls (a quota window) a kill must not lose what the consumer already has.
        while self._delivering:
            self._delivery = anyio.Event()
            if self.delivered or self.output is not None:
                await state.record_fetches((), *self.take_delivered())
            if self._delivering and not self.delivered and self.output is None:
                await self._delivery.wait()


class Harvest(BackgroundIterator[HarvestedDocument | None]):
    """Every document the queries find, fetched once and yielded once, as they arrive.

    An async iterator of :class:`HarvestedDocument` (a :class:`Document` that also names
    the ``queries`` that found it) and an async context manager; :meth:`aclose` (or
    leaving ``async with``) stops all work at once. :attr:`stats` and :attr:`failures`
    are live.

    With a ``state`` file the harvest is resumable. A harvest started again with the same
    state sends no request whose answer it recorded: searched queries are not searched
    again (the ids they found are still fetched if they were not), fetched or missing
    documents are not fetched again, and failed searches and fetches *are* tried again.

    **Every document is yielded once, across runs, once it is delivered.** A resumed
    harvest yields exactly the documents found and not *delivered* before (those already
    fetched come from the state, without a request), each once. What counts as delivered:

    - ``acknowledge="auto"`` (the default): a document handed to the consumer is delivered
      when the consumer asks for the next one, or closes the harvest in order: leaving
      ``async with`` normally (``break`` and ``return`` included) or calling
      :meth:`aclose`. Leaving ``async with`` by an exception (a cancellation, Ctrl-C)
      leaves the document in hand undelivered: a resumed harvest yields it again.
    - ``acknowledge="manual"``: only the ids given to :meth:`acknowledge` are delivered;
      a consumer that must keep each document exactly once acknowledges what it has made
      durable (:class:`JsonlWriter`'s ``on_durable`` does).

    Each delivery is committed to the state at once, in a transaction of its own (or the
    next one under way): only a process killed outright (``kill -9``) in that moment may
    see those documents again on resume. A bare ``async for`` left by ``break`` stops the
    work (and commits) only when the harvest object is garbage collected, without
    delivering the document in hand: use ``async with`` or :meth:`aclose` when you may
    leave early.
    """

    def __init__(self, run: _Run, acknowledge: Acknowledge) -> None:
        super().__init__(run.produce)
        self._run = run
        self._auto = acknowledge == "auto"
        self._last: str | None = None

    @property
    def stats(self) -> HarvestStats:
        """Counters of this run, updated as the harvest goes."""
        return self._run.stats

    @property
    def failures(self) -> list[HarvestFailure]:
        """``(kind, query or id, exception)`` for every search and fetch that failed."""
        return self._run.failures

    def acknowledge(self, document_ids: Iterable[str], *, output: OutputMark | None = None) -> None:
        """Mark documents as delivered: a resumed harvest will not yield them again.

        Committed to the state at once (in a transaction of its own, off the event loop),
        and at the latest by :meth:`aclose`. Needed only with ``acknowledge="manual"``.
        ``output`` (a :attr:`JsonlWriter.mark`) is recorded with them: where the file
        that holds them ends, so a resume can check it appends to that file.
        """
        self._run.deliver(document_ids, output)

    async def found_by(self, document_id: str) -> tuple[str, ...]:
        """Every query whose recorded answer holds ``document_id``, over every run.

        Complete once the harvest has finished (while it runs: as far as it has got), where
        :attr:`HarvestedDocument.queries` is what was known when the document was handed
        over. ``()`` for an id no search returned. Needs the state: without ``state=`` it
        works only while the harvest runs (its temporary database is gone afterwards).
        """
        state = self._run.state
        if state is not None:
            return await state.found_by(document_id)
        if self._run.path is None:
            raise StateError(
                "found_by() after a harvest without state= cannot answer: its temporary "
                "state is gone; pass state=PATH to keep it",
                path="",
            )
        opened = await HarvestState.open(self._run.path, new_run=False)
        try:
            return await opened.found_by(document_id)
        finally:
            await opened.aclose()

    def _deliver_last(self) -> None:
        if self._auto and self._last is not None:
            self._run.deliver((self._last,))
        self._last = None

    async def __anext__(self) -> HarvestedDocument:
        self._deliver_last()
        document = await super().__anext__()
        while document is None:  # the end; the next receive waits for the state to close
            document = await super().__anext__()
        self._run.stats.yielded += 1
        self._last = document.id
        return document

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self._last = None  # the consumer failed holding it: not delivered
        await self.aclose()

    async def aclose(self) -> None:
        """Stop all work now, record what was delivered, close the state. Idempotent.

        With ``acknowledge="auto"`` the document last handed over counts as delivered.
        """
        self._deliver_last()
        await super().aclose()
        run = self._run
        if (run.delivered or run.output is not None) and run.path is not None:
            with anyio.CancelScope(shield=True):
                state = await HarvestState.open(run.path, new_run=False)
                try:
                    await state.record_fetches((), *run.take_delivered())
                finally:
                    await state.aclose()
        run.delivered, run.output = [], None


def harvest(
    client: SearchFetchClient,
    queries: Iterable[str] | AsyncIterable[str],
    *,
    state: str | os.PathLike[str] | None = None,
    on_error: OnError = "record",
    concurrency: int = DEFAULT_CONCURRENCY,
    acknowledge: Acknowledge = "auto",
) -> Harvest:
    """Search every query, fetch each document found once, and yield the documents.

    ``queries`` is any iterable or async iterable of strings, read lazily. Ids are deduped
    across queries (and across runs, with ``state``). ``state`` is the path of a sqlite
    file recording the harvest as it goes; harvesting again with the same path resumes
    (see :class:`Harvest`). Searches and fetches that fail after the client's retries are
    recorded in :attr:`Harvest.failures` and counted in ``stats.failed``; with
    ``on_error="raise"`` the first of them stops the harvest and is raised. An
    :class:`AuthenticationError` (a token refused, a sign-in that cannot be renewed) always
    stops it and is raised: the state keeps what was done, for a resume once signed in.
    ``concurrency`` is the searches, and separately the fetches, in flight at once.
    ``acknowledge`` says when a document counts as delivered, so that a resumed harvest
    does not yield it again (see :class:`Harvest`): ``"auto"`` once the consumer asks for
    the next one or closes the harvest in order, ``"manual"`` only through
    :meth:`Harvest.acknowledge`. Each document yielded is a :class:`HarvestedDocument`
    naming the queries that found it.
    """
    check_source("queries", queries)
    if on_error not in ("record", "raise"):
        raise ValueError(f'on_error must be "record" or "raise", not {on_error!r}')
    if acknowledge not in ("auto", "manual"):
        raise ValueError(f'acknowledge must be "auto" or "manual", not {acknowledge!r}')
    if state is not None and not isinstance(state, (str, os.PathLike)):
        raise TypeError(f"state must be a path or None, not {type(state).__name__}")
    run = _Run(client, queries, state, on_error, check_concurrency(concurrency))
    return Harvest(run, acknowledge)
