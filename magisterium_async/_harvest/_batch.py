"""Batches: many searches or fetches at once, one :class:`BatchItem` per input as it completes.

The work runs in a background task that owns an anyio task group and hands results to the
consumer through a memory object stream with no buffer, so nothing runs ahead of the
consumer by more than the in-flight window. The same machinery (:class:`BackgroundIterator`,
:func:`for_each`) drives the harvest pipeline. An error that ends the work is the first
error of its task groups, raised to the consumer as itself (never an ``ExceptionGroup``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import sys
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from magisterium_async._config import whole_number
from magisterium_async._errors import MagisteriumError
from magisterium_async._harvest._shield import to_the_end
from magisterium_async._models import Document, SearchResult
from magisterium_async._ratelimit import SchedulerStats

if sys.version_info < (3, 11):  # anyio's backport
    from exceptiongroup import ExceptionGroup  # type: ignore[import-not-found, unused-ignore]

DEFAULT_CONCURRENCY = 16
"""Calls a batch or a harvest keeps in flight unless told otherwise.

The client's scheduler still applies its rate limits and ``max_concurrency`` underneath."""

MAX_CONCURRENCY = 1000
"""The most ``concurrency`` a batch or a harvest takes: far past what a quota of requests a
minute can use, and low enough that no typo can make it hold the memory of millions."""

ITEM_ERRORS: tuple[type[Exception], ...] = (MagisteriumError, ValueError, TypeError)
"""What one item's failure may be: anything else is a bug and ends the whole batch."""

In = TypeVar("In")
R = TypeVar("R")
T = TypeVar("T")
SelfT = TypeVar("SelfT", bound="BackgroundIterator[Any]")


class Client(Protocol):
    """What batches and harvests need of a client: searches, fetches, and the pools'
    counters (a harvest's 429s). :class:`AsyncMagisterium` is one."""

    async def search(self, query: str) -> list[SearchResult]: ...

    async def fetch(self, document_id: str) -> Document | None: ...

    @property
    def stats(self) -> SchedulerStats: ...


@dataclass(frozen=True, slots=True)
class BatchItem(Generic[In, R]):
    """The outcome for one input of a batch: ``result``, or the ``error`` it raised."""

    input: In
    result: R | None
    error: Exception | None

    @property
    def ok(self) -> bool:
        """Whether the call succeeded (``result`` may still be ``None``: a missing document)."""
        return self.error is None


async def for_each(
    source: Iterable[T] | AsyncIterable[T], handle: Callable[[T], Awaitable[Any]]
) -> None:
    """Await ``handle(item)`` for each item of an iterable or async iterable, pulling the
    next only afterwards."""
    if isinstance(source, AsyncIterable):
        async for item in source:
            await handle(item)
    else:
        for item in source:
            await handle(item)


def check_source(name: str, source: object) -> None:
    """Refuse a lone string (it would be iterated character by character) or a non-iterable."""
    if isinstance(source, (str, bytes)):
        raise TypeError(f"{name} must be an iterable of strings, not a single string")
    if not isinstance(source, (Iterable, AsyncIterable)):
        raise TypeError(
            f"{name} must be an iterable or async iterable, not {type(source).__name__}"
        )


Produce = Callable[[MemoryObjectSendStream[T]], Awaitable[None]]


async def _run(produce: Produce[T], send: MemoryObjectSendStream[T], box: list[Exception]) -> None:
    # Must not refer to the iterator object: the iterator's __del__ is what cancels this task
    # when a bare ``async for`` is left with ``break``. The error goes in the box before the
    # task ends, and so before the stream closes: the consumer finds it when it sees the end.
    try:
        await produce(send)
    except Exception as exc:
        while isinstance(exc, ExceptionGroup):  # a task group's: its first error is the one
            exc = exc.exceptions[0]
        box.append(exc)


class BackgroundIterator(Generic[T]):
    """An async iterator over what a background task produces; an async context manager.

    The task starts at the first ``__anext__`` and is stopped by :meth:`aclose` (or by
    leaving ``async with``, or by closing the client that made it). Left by ``break``
    without any of them, it is cancelled when the iterator is garbage collected, which
    CPython does at once when nothing else refers to it; ``async with`` makes the
    clean-up deterministic. It is iterated once: asked for an item after it ended (ran to
    its end, or was closed) it raises ``RuntimeError``.
    """

    _ended = "this batch has ended (it ran to its end, or was closed): make a new one"

    def __init__(self, produce: Produce[T]) -> None:
        self._produce = produce
        self._task: asyncio.Task[None] | None = None
        self._receive: MemoryObjectReceiveStream[T] | None = None
        self._box: list[Exception] = []
        self._closed = False

    def __aiter__(self: SelfT) -> SelfT:
        return self

    async def __aenter__(self: SelfT) -> SelfT:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def __anext__(self) -> T:
        if self._closed:
            if self._box:  # stopped from outside (its client closed): said once
                raise self._box.pop()
            raise RuntimeError(self._ended)  # a second pass would end quietly, with nothing
        if self._receive is None:  # the first: the task starts
            send, self._receive = anyio.create_memory_object_stream[T](0)
            self._task = asyncio.get_running_loop().create_task(
                _run(self._produce, send, self._box)
            )
            # However it ends: cancelled before it ever ran included.
            self._task.add_done_callback(lambda _: send.close())
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            pass
        await BackgroundIterator.aclose(self)  # the task has ended (not the subclass's close)
        if self._box:
            raise self._box.pop()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Stop all work now and wait until it has stopped. Idempotent."""
        self._closed = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await to_the_end(asyncio.wait([task]))
        if self._receive is not None:
            self._receive.close()

    async def abort(self, error: Exception) -> None:
        """Stop as :meth:`aclose` does, and raise ``error`` in the reader's next
        ``__anext__`` (one waiting now included): stopped from outside (its client
        closed), it must not look like a run that ended with nothing left to do."""
        if not self._closed:
            self._box[:] = [error]
        await self.aclose()

    def __del__(self) -> None:
        task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(RuntimeError):  # the event loop is already closed
                task.cancel()
        if self._receive is not None:
            self._receive.close()


class Batch(BackgroundIterator[BatchItem[In, R]]):
    """One :class:`BatchItem` per input, as each completes (or in input order). Inputs are
    pulled lazily: at most ``concurrency`` calls are in flight (``ordered``: at most
    ``2 * concurrency`` items held), the next input read only when one is free."""


def _batch(
    inputs: Iterable[In] | AsyncIterable[In],
    call: Callable[[In], Awaitable[R]],
    name: str,
    concurrency: int,
    ordered: bool,
) -> Batch[In, R]:
    check_source(name, inputs)
    concurrency = whole_number("concurrency", concurrency, maximum=MAX_CONCURRENCY)

    async def produce(send: MemoryObjectSendStream[BatchItem[In, R]]) -> None:
        # ``slots`` bounds the items taken from the input and not yet handed over,
        # ``limiter`` the calls in flight: unordered they are equal; ordered, the slots
        # beyond ``concurrency`` are the reorder buffer, so one slow item does not stall
        # the others.
        slots = anyio.Semaphore(2 * concurrency if ordered else concurrency)
        limiter = anyio.CapacityLimiter(concurrency)
        done, finished = anyio.create_memory_object_stream[tuple[int, BatchItem[In, R]]](math.inf)
        started = itertools.count()

        async def one(index: int, value: In) -> None:
            try:
                async with limiter:
                    result = await call(value)
            except ITEM_ERRORS as exc:
                done.send_nowait((index, BatchItem(value, None, exc)))
            else:
                done.send_nowait((index, BatchItem(value, result, None)))

        async def emit() -> None:
            waiting: dict[int, BatchItem[In, R]] = {}
            following = 0
            async for index, item in finished:
                waiting[index if ordered else following] = item  # unordered: the next to go
                while following in waiting:
                    await send.send(waiting.pop(following))
                    slots.release()
                    following += 1

        async with done, finished, anyio.create_task_group() as tg:
            tg.start_soon(emit)
            async with anyio.create_task_group() as calls:

                async def start(value: In) -> None:
                    await slots.acquire()
                    calls.start_soon(one, next(started), value)

                await for_each(inputs, start)
            done.close()  # every call has answered: emit ends with the last item

    return Batch(produce)


def search_many(
    client: Client,
    queries: Iterable[str] | AsyncIterable[str],
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    ordered: bool = False,
) -> Batch[str, list[SearchResult]]:
    """Search every query (any iterable or async iterable, read lazily); a
    :class:`BatchItem` per query as it completes (``ordered``: in input order).
    ``item.error`` is the :class:`MagisteriumError` after the client's retries, or the
    ``ValueError``/``TypeError`` of a query that cannot be sent: one failure never stops
    the others; any other exception ends the batch and is raised by the iterator."""
    return _batch(queries, client.search, "queries", concurrency, ordered)


def fetch_many(
    client: Client,
    ids: Iterable[str] | AsyncIterable[str],
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    ordered: bool = False,
) -> Batch[str, Document | None]:
    """Fetch every document id, as :func:`search_many` searches: ``item.result`` is the
    :class:`Document`, or ``None`` when the service does not know the id."""
    return _batch(ids, client.fetch, "ids", concurrency, ordered)
