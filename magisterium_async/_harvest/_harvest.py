"""The harvest as its consumer holds it: :class:`Harvest` and :func:`harvest`.

What the consumer sees and does: iterating, acknowledging (when a document counts as
delivered), closing, asking the state who found a document. The stages that do the work
and the delivery bookkeeping are in :mod:`._pipeline`, what it yields and counts in
:mod:`._results`, the state in :mod:`._state`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterable, Iterable
from types import TracebackType
from typing import Literal

from magisterium_async._clock import Clock, LoopClock
from magisterium_async._errors import StateError
from magisterium_async._harvest._batch import (
    DEFAULT_CONCURRENCY,
    MAX_CONCURRENCY,
    BackgroundIterator,
    check_concurrency,
    check_source,
)
from magisterium_async._harvest._jsonl import OutputMark
from magisterium_async._harvest._lock import HarvestLock
from magisterium_async._harvest._pipeline import HarvestClient, HarvestRun, OnError
from magisterium_async._harvest._results import HarvestedDocument, HarvestFailure, HarvestStats
from magisterium_async._harvest._state import HarvestState

__all__ = [
    "MAX_CONCURRENCY",
    "Acknowledge",
    "Harvest",
    "HarvestClient",
    "HarvestFailure",
    "HarvestStats",
    "HarvestedDocument",
    "OnError",
    "harvest",
    "harvest_holding",
]

Acknowledge = Literal["auto", "manual"]


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

    **One harvest at a time per state.** From the first document asked for until
    :meth:`aclose` (leaving ``async with``), or until the harvest is garbage collected,
    the harvest holds an exclusive OS lock on its state (``STATE.lock`` beside it, who
    holds it in ``STATE.lock.info``; both removed when it ends). Another harvest of the
    same state, in this process or any other of the host, raises :class:`StateError` at
    its first document, naming the holder (pid, host, since when). A harvest killed
    outright holds nothing.
    """

    def __init__(self, run: HarvestRun, acknowledge: Acknowledge) -> None:
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
        self._run.deliveries.note(document_ids, output)

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
            self._run.deliveries.note((self._last,))
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
        try:
            await super().aclose()
            await self._run.deliveries.commit_to(self._run.path)
        finally:
            self._run.release()

    def __del__(self) -> None:
        super().__del__()
        run = getattr(self, "_run", None)  # None: __init__ never got so far
        if run is not None:
            run.release()


def harvest(
    client: HarvestClient,
    queries: Iterable[str] | AsyncIterable[str],
    *,
    state: str | os.PathLike[str] | None = None,
    on_error: OnError = "record",
    concurrency: int = DEFAULT_CONCURRENCY,
    acknowledge: Acknowledge = "auto",
    clock: Clock | None = None,
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
    ``concurrency`` is the searches, and separately the fetches, in flight at once (from 1
    to :data:`MAX_CONCURRENCY`, 1000; the tasks alive follow the work in flight, not it).
    ``acknowledge`` says when a document counts as delivered, so that a resumed harvest
    does not yield it again (see :class:`Harvest`): ``"auto"`` once the consumer asks for
    the next one or closes the harvest in order, ``"manual"`` only through
    :meth:`Harvest.acknowledge`. Each document yielded is a :class:`HarvestedDocument`
    naming the queries that found it. ``clock`` (the client's) times ``stats.elapsed``.
    """
    return harvest_holding(
        None,
        client,
        queries,
        state=state,
        on_error=on_error,
        concurrency=concurrency,
        acknowledge=acknowledge,
        clock=clock,
    )


def harvest_holding(
    lock: HarvestLock | None,
    client: HarvestClient,
    queries: Iterable[str] | AsyncIterable[str],
    *,
    state: str | os.PathLike[str] | None = None,
    on_error: OnError = "record",
    concurrency: int = DEFAULT_CONCURRENCY,
    acknowledge: Acknowledge = "auto",
    clock: Clock | None = None,
) -> Harvest:
    """:func:`harvest` on a state whose ``lock`` the caller holds already (the command
    line takes it before it reads the state), or takes itself (``None``)."""
    check_source("queries", queries)
    if on_error not in ("record", "raise"):
        raise ValueError(f'on_error must be "record" or "raise", not {on_error!r}')
    if acknowledge not in ("auto", "manual"):
        raise ValueError(f'acknowledge must be "auto" or "manual", not {acknowledge!r}')
    if state is not None and not isinstance(state, (str, os.PathLike)):
        raise TypeError(f"state must be a path or None, not {type(state).__name__}")
    run = HarvestRun(
        client,
        queries,
        state,
        on_error,
        check_concurrency(concurrency),
        clock or LoopClock(),
        lock,
    )
    return Harvest(run, acknowledge)
