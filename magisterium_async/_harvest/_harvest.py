"""The harvest: every document a list of queries finds, fetched once and yielded once.

:class:`Harvest` is what its consumer holds; :class:`HarvestRun` is one run's stages, in
one task group, joined by anyio memory streams::

    queries ─ claim ─▶ search ≤N ─▶ received ─▶ commit ─▶ new ids ─┬─▶ fetch ≤N ─▶ received
    state: ids an earlier run found and did not fetch, first ───────┘
    received ─▶ commit ─▶ documents ─┬─▶ deliver ─▶ the consumer ─▶ acknowledged ─▶ received
    state: documents an earlier run fetched and did not deliver, first

**Every answer that arrives is kept.** An answer, or an acknowledgement, goes into the
run's list of what was received in the step it arrives (nothing can cut in between), and
that list is committed in one transaction whenever anything is in it, and once more,
shielded, however the run ends: a resume repeats at most the requests in flight. Nothing
moves on before its answer is committed; a stage ends its stream once every answer it
asked for is. Backpressure applies where work starts: no search while ``2 * N`` found ids
wait for a fetch, no fetch while ``2 * N`` documents are not handed over, so memory stays
flat and the tasks alive are the work in flight.
"""

from __future__ import annotations

import math
import os
from collections.abc import AsyncIterable, Iterable
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, cast

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectSendStream

from magisterium_async._clock import Clock, LoopClock
from magisterium_async._config import whole_number
from magisterium_async._errors import AuthenticationError, StateError
from magisterium_async._harvest._batch import (
    DEFAULT_CONCURRENCY,
    ITEM_ERRORS,
    MAX_CONCURRENCY,
    BackgroundIterator,
    Client,
    check_source,
    for_each,
)
from magisterium_async._harvest._jsonl import OutputMark
from magisterium_async._harvest._lock import HarvestLock
from magisterium_async._harvest._shield import to_the_end
from magisterium_async._harvest._state import Fetched, HarvestedDocument, HarvestState, Searched
from magisterium_async._ratelimit import SchedulerStats
from magisterium_async._skills import require_query

Acknowledge = Literal["auto", "manual"]
OnError = Literal["record", "raise"]


class HarvestFailure(NamedTuple):
    """A search or fetch that failed after the client's retries."""

    kind: Literal["search", "fetch"]
    input: object
    """The query (``kind == "search"``) or the document id (``"fetch"``)."""
    error: Exception


@dataclass
class HarvestStats:
    """Live counters of one harvest run; read them during and after the harvest."""

    # The client's clock: ``started``, ``finished`` and ``elapsed`` are times on it. Not
    # annotated, so no field of the dataclass (``dataclasses.asdict`` leaves it out).
    _clock = cast(Clock, LoopClock())

    queries: int = 0
    """Queries read from the input."""
    searched: int = 0
    """Searches answered in this run."""
    skipped_queries: int = 0
    """Queries not searched: answered in an earlier run, or repeated in the input."""
    repeated_queries: int = 0
    """Of :attr:`skipped_queries`, those repeated in this run's input (the same query
    read again): ``searched + skipped_queries - repeated_queries`` is the distinct
    queries of the input answered, now or before."""
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
        end = self.finished if self.finished is not None else self._clock.now()
        return end - self.started


def _rate_limited(stats: SchedulerStats) -> int:
    return stats.default.rate_limited + stats.expensive.rate_limited + stats.unmetered.rate_limited


class _Handoff:
    """Where committed answers go while the stages run: new ids to the fetches (at most
    ``limit`` of them waiting before a search starts), documents towards the consumer
    (``slots``: fetched or being fetched and not handed over)."""

    def __init__(self, concurrency: int) -> None:
        self.limit = 2 * concurrency
        self._taken = anyio.Event()
        self.slots = anyio.Semaphore(2 * concurrency)
        self.to_fetch, self.ids = anyio.create_memory_object_stream[str](math.inf)
        self.ready, self.documents = anyio.create_memory_object_stream[HarvestedDocument](
            math.inf  # in type only: ``found`` and ``slots`` bound what they hold
        )

    def take(self) -> None:
        taken, self._taken = self._taken, anyio.Event()
        taken.set()  # every waiter of this round; the next round waits on a fresh event

    async def room(self) -> None:
        while self.ids.statistics().current_buffer_used >= self.limit:
            await self._taken.wait()


@dataclass(eq=False)
class HarvestRun:
    """One harvest run: its stages, counters and failures, what it received and has not
    committed yet, and its hold on the state. Knows nothing of the consumer."""

    client: Client
    queries: Iterable[str] | AsyncIterable[str]
    path: str | os.PathLike[str] | None
    on_error: OnError
    concurrency: int
    clock: Clock
    fatal: tuple[type[Exception], ...]
    stats: HarvestStats = field(default_factory=HarvestStats)
    failures: list[HarvestFailure] = field(default_factory=list)
    state: HarvestState | None = None
    closed: bool = False
    """Whether :meth:`close` ran: nothing received after it is committed."""

    def __post_init__(self) -> None:
        self._lock = None if self.path is None else HarvestLock(self.path, "state", StateError)
        self._rate_limited_before = _rate_limited(self.client.stats)
        self._answers: list[Searched | Fetched] = []  # received, not committed yet
        self._delivered: list[str] = []
        self._output: OutputMark | None = None
        self._arrived = anyio.Event()
        self._committing = anyio.Lock()
        self._handoff: _Handoff | None = None

    def received(
        self,
        answer: Searched | Fetched | None = None,
        delivered: Iterable[str] = (),
        output: OutputMark | None = None,
    ) -> None:
        """Keep what arrived, to be committed at once: it never awaits, so whatever stops
        the run next cannot come between an answer and this list."""
        if answer is not None:
            self._answers.append(answer)
        self._delivered.extend(delivered)
        self._output = output or self._output
        self._arrived.set()

    async def commit(self, state: HarvestState) -> None:
        """Commit what was received, in one transaction, then count it and hand it on
        (without awaiting: a cancellation after the commit loses nothing). One at a time,
        shielded: when it returns, all that was received before it is committed and handed
        on."""
        await to_the_end(self._commit(state))

    async def _commit(self, state: HarvestState) -> None:
        self.stats.rate_limited = _rate_limited(self.client.stats) - self._rate_limited_before
        async with self._committing:
            answers, self._answers = self._answers, []
            delivered, self._delivered = self._delivered, []
            output, self._output = self._output, None
            if not (answers or delivered or output):
                return
            searched = [answer for answer in answers if isinstance(answer, Searched)]
            fetched = [answer for answer in answers if isinstance(answer, Fetched)]
            new, documents = await state.record(searched, fetched, delivered, output)
            handoff = self._handoff
            for query, ids, error in searched:
                if error is not None:
                    self.fail("search", query, error)
                else:
                    self.stats.searched += 1
                    self.stats.results += len(ids or ())
            self.stats.unique_ids += len(new)
            if handoff is not None:
                for document_id in new:
                    handoff.to_fetch.send_nowait(document_id)
            for document_id, document, error in fetched:
                if document is not None:
                    self.stats.fetched += 1
                    if handoff is not None:
                        handoff.ready.send_nowait(documents[document_id])
                    continue
                if handoff is not None:
                    handoff.slots.release()
                if error is not None:
                    self.fail("fetch", document_id, error)
                else:
                    self.stats.not_found += 1

    def fail(self, kind: Literal["search", "fetch"], value: object, error: Exception) -> None:
        self.failures.append(HarvestFailure(kind, value, error))
        self.stats.failed += 1

    async def open(self) -> HarvestState:
        """Hold the state (refused at once, naming the holder, when another harvest
        does) and open it (made where no file is; one that is there is not written).
        Idempotent."""
        if self.state is None:
            if self._lock is not None:  # in a thread: a refusal may take a moment
                # To its end, whatever cancels the caller: a lock taken is one let go.
                await to_the_end(anyio.to_thread.run_sync(self._lock.acquire))
            self.state = await HarvestState.open(self.path)
        return self.state

    async def close(self) -> None:
        """Commit what waits (on the state reopened when the run has closed it: a
        delivery acknowledged after the last document), close the state, let it go."""
        state, self.state, self.closed = self.state, None, True
        try:
            if state is None and (self._delivered or self._output) and self.path is not None:
                state = await HarvestState.open(self.path)
            if state is not None:
                try:
                    await self.commit(state)
                finally:
                    await state.aclose()
        finally:
            self.release()

    def release(self) -> None:
        """Let go of the state's lock (none taken: nothing). Idempotent."""
        if self._lock is not None:
            self._lock.release()

    async def produce(self, out: MemoryObjectSendStream[HarvestedDocument | None]) -> None:
        self.stats._clock = self.clock
        self.stats.started = self.clock.now()
        try:
            state = await self.open()
            try:
                await state.begin_run()
                await self._stages(state, out)
            finally:  # whatever ended the run: what it received is kept
                self._handoff, self.state = None, None
                try:
                    await self.commit(state)
                finally:
                    await state.aclose()
        finally:
            self.stats.finished = self.clock.now()

    async def _stages(
        self, state: HarvestState, out: MemoryObjectSendStream[HarvestedDocument | None]
    ) -> None:
        handoff = self._handoff = _Handoff(self.concurrency)
        with handoff.to_fetch, handoff.ids, handoff.ready, handoff.documents:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._search, state, handoff)
                tg.start_soon(self._fetch, state, handoff)
                tg.start_soon(self._committer, state)
                await self._deliver(state, handoff, out)
                tg.cancel_scope.cancel()  # the committer's wait: the end commits the rest

    async def _committer(self, state: HarvestState) -> None:
        """Commit what arrives (answers, deliveries) as it arrives."""
        while True:
            await self._arrived.wait()
            self._arrived = anyio.Event()
            await self.commit(state)

    async def _ask(
        self, kind: Literal["search", "fetch"], value: str, done: anyio.Semaphore
    ) -> None:
        """One search or fetch; its answer (or its failure) is received as it arrives."""
        try:
            if kind == "search":
                results = await self.client.search(value)
                self.received(Searched(value, [result.id for result in results], None))
            else:
                self.received(Fetched(value, await self.client.fetch(value), None))
        except self.fatal:
            raise  # every request after it would fail too: stop, resumable
        except ITEM_ERRORS as exc:
            self.received(
                Searched(value, None, exc) if kind == "search" else Fetched(value, None, exc)
            )
            if self.on_error == "raise":
                raise
        finally:
            done.release()

    async def _search(self, state: HarvestState, handoff: _Handoff) -> None:
        in_flight = anyio.Semaphore(self.concurrency)

        async def claim(query: str) -> None:
            self.stats.queries += 1
            try:
                query = require_query("query", query)  # the one rule: stripped, bounded
            except ITEM_ERRORS as exc:
                self.fail("search", query, exc)
                if self.on_error == "raise":
                    raise
                return
            taken = await state.claim(query)
            if taken == "search":
                await handoff.room()
                await in_flight.acquire()
                searches.start_soon(self._ask, "search", query, in_flight)
            else:
                self.stats.skipped_queries += 1
                if taken == "duplicate":
                    self.stats.repeated_queries += 1

        async with anyio.create_task_group() as searches:
            await for_each(self.queries, claim)
        await self.commit(state)
        handoff.to_fetch.close()  # every search is recorded: no new id comes

    async def _fetch(self, state: HarvestState, handoff: _Handoff) -> None:
        in_flight = anyio.Semaphore(self.concurrency)

        async def fetch(document_id: str) -> None:
            await handoff.slots.acquire()
            await in_flight.acquire()
            fetches.start_soon(self._ask, "fetch", document_id, in_flight)

        async with anyio.create_task_group() as fetches:
            after = 0  # first the ids earlier runs found and did not fetch
            while page := await state.unfetched(after):
                for _, document_id in page:
                    await fetch(document_id)
                after = page[-1][0]
            async for document_id in handoff.ids:
                handoff.take()
                await fetch(document_id)
        await self.commit(state)
        handoff.ready.close()  # every fetch is recorded: no document comes

    async def _deliver(
        self,
        state: HarvestState,
        handoff: _Handoff,
        out: MemoryObjectSendStream[HarvestedDocument | None],
    ) -> None:
        after = 0  # first the documents earlier runs fetched and did not deliver
        while page := await state.undelivered(after):
            for _, document in page:
                self.stats.resumed += 1
                await out.send(document)
            after = page[-1][0]
        async for document in handoff.documents:
            await out.send(document)
            handoff.slots.release()
        # Handed over once the consumer asks for the item after the last document: by then
        # that document is acknowledged, and committed as the run ends.
        await out.send(None)


class Harvest(BackgroundIterator[HarvestedDocument | None]):
    """Every document the queries find, fetched once and yielded once, as they arrive.

    An async iterator of :class:`HarvestedDocument` and an async context manager;
    :meth:`aclose` (or leaving ``async with``) stops all work at once. :attr:`stats` and
    :attr:`failures` are live. It is iterated once: asked for a document after it ended,
    it raises ``RuntimeError``. With a ``state`` file it resumes, sending no request whose
    answer was recorded and yielding exactly the documents not *delivered* before
    (``acknowledge="auto"``: when the consumer asks for the next one or leaves in order;
    ``"manual"``: when given to :meth:`acknowledge`), and holds that state from its first
    document until :meth:`aclose` (:mod:`._lock`). See ``docs/batch-and-harvest.md``.
    """

    _ended = (
        "this harvest has ended (it ran to its end, or was closed): make a new one to "
        "harvest again (with the same state=, it resumes)"
    )

    def __init__(self, run: HarvestRun, acknowledge: Acknowledge) -> None:
        self._run = run  # first: __del__ lets go of its lock
        super().__init__(run.produce)
        self._auto = acknowledge == "auto"
        self._last: str | None = None
        self.stats: HarvestStats = run.stats
        """Counters of this run, updated as the harvest goes."""
        self.failures: list[HarvestFailure] = run.failures
        """``(kind, query or id, exception)`` for every search and fetch that failed."""

    def acknowledge(self, document_ids: Iterable[str], *, output: OutputMark | None = None) -> None:
        """Mark documents as delivered: a resumed harvest will not yield them again.
        Committed at once (off the event loop), and at the latest by :meth:`aclose`.

        Arguments:
            document_ids: ids of documents this harvest handed over, an iterable of
                ``str`` (one id: ``[id]``; a lone ``str`` is a ``TypeError``).
            output: a :attr:`JsonlWriter.mark` recorded with them: where the file that
                holds them ends, so a resume can check it appends to that file.

        Raises ``RuntimeError`` after :meth:`aclose`: what it names would never be
        recorded.
        """
        if isinstance(document_ids, (str, bytes)) or not isinstance(document_ids, Iterable):
            raise TypeError(
                "acknowledge() takes an iterable of document ids (one id: [id]), not "
                f"{type(document_ids).__name__} {document_ids!r:.80}"
            )
        ids = list(document_ids)
        if bad := [document_id for document_id in ids if not isinstance(document_id, str)]:
            kind = type(bad[0]).__name__
            raise TypeError(f"acknowledge() takes document ids as str, not {kind} {bad[0]!r:.80}")
        if output is not None and not isinstance(output, OutputMark):
            raise TypeError(f"output must be an OutputMark or None, not {type(output).__name__}")
        if self._run.closed:
            raise RuntimeError(
                "acknowledge() after the harvest was closed: its state is closed, so these "
                "documents would come again next run; acknowledge before leaving async with"
            )
        self._run.received(delivered=ids, output=output)

    async def found_by(self, document_id: str) -> tuple[str, ...]:
        """Every query whose recorded answer holds ``document_id``, over every run (``()``
        for an id no search returned): complete once the harvest has finished, where
        :attr:`HarvestedDocument.queries` is what was known when it was handed over.
        Without ``state=``, only while the harvest runs."""
        run = self._run
        if run.state is not None:
            return await run.state.found_by(document_id)
        if run.path is None:
            raise StateError(
                "found_by() after a harvest without state= cannot answer: its temporary "
                "state is gone; pass state=PATH to keep it",
                path="",
            )
        state = await HarvestState.open(run.path)
        try:
            return await state.found_by(document_id)
        finally:
            await state.aclose()

    def _deliver_last(self) -> None:
        if self._auto and self._last is not None:
            self._run.received(delivered=(self._last,))
        self._last = None

    async def __anext__(self) -> HarvestedDocument:
        self._deliver_last()
        document = await super().__anext__()
        while document is None:  # the end; the next receive waits for the state to close
            document = await super().__anext__()
        self._run.stats.yielded += 1
        self._last = document.id
        return document

    async def __aexit__(self, *exc_info: object) -> None:
        if any(exc_info):  # left by an exception
            self._last = None  # the consumer failed holding it: not delivered
        await self.aclose()

    async def aclose(self) -> None:
        """Stop all work now, record what was delivered, close the state. Idempotent.
        With ``acknowledge="auto"`` the document last handed over counts as delivered."""
        self._deliver_last()
        try:
            await super().aclose()
        finally:
            await to_the_end(self._run.close())

    def __del__(self) -> None:
        super().__del__()
        self._run.release()


async def hold(harvest: Harvest) -> HarvestState:
    """Take ``harvest``'s state before its first document (its lock, then the database,
    nothing written), for the command line to read and record what its output needs."""
    return await harvest._run.open()


def harvest(
    client: Client,
    queries: Iterable[str] | AsyncIterable[str],
    *,
    state: str | os.PathLike[str] | None = None,
    on_error: OnError = "record",
    concurrency: int = DEFAULT_CONCURRENCY,
    acknowledge: Acknowledge = "auto",
    clock: Clock | None = None,
    fatal: tuple[type[Exception], ...] = (),
) -> Harvest:
    """Search every query, fetch each document found once, and yield the documents
    (:class:`Harvest`).

    Arguments:
        queries: any iterable or async iterable of strings, read lazily; ids are deduped
            across queries (and across runs, with ``state``).
        state: the path of a SQLite file recording the harvest as it goes; harvesting
            again with the same path resumes.
        on_error: ``"record"``: a search or fetch that fails after the client's retries
            is in :attr:`Harvest.failures` and ``stats.failed``; ``"raise"``: the first
            stops the harvest and is raised.
        concurrency: searches, and separately fetches, in flight at once (1 to 1000).
        acknowledge: when a document counts as delivered (``"auto"`` or ``"manual"``).
        clock: the client's; times ``stats.elapsed``.
        fatal: failures that stop the harvest and are raised, as an
            :class:`AuthenticationError` always does (every request after one would fail
            too); the state keeps what was done, for a resume.
    """
    check_source("queries", queries)
    if on_error not in ("record", "raise"):
        raise ValueError(f'on_error must be "record" or "raise", not {on_error!r}')
    if acknowledge not in ("auto", "manual"):
        raise ValueError(f'acknowledge must be "auto" or "manual", not {acknowledge!r}')
    if state is not None and not isinstance(state, (str, os.PathLike)):
        raise TypeError(f"state must be a path or None, not {type(state).__name__}")
    if state is not None and not os.fspath(state):  # else a state thrown away at the end
        raise ValueError("state must not be empty: a file's path, or None for no state")
    concurrency = whole_number("concurrency", concurrency, maximum=MAX_CONCURRENCY)
    fatal = (AuthenticationError, *fatal)
    run = HarvestRun(client, queries, state, on_error, concurrency, clock or LoopClock(), fatal)
    return Harvest(run, acknowledge)
