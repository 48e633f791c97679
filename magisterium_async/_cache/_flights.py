"""Calls in flight, shared: identical calls made while one is running wait for its answer.

Each key in flight has one leader, the first call, and the others join it. The leader
readies the work in its own task (it looks in the store, waits for its turn in the pool's
line) and then starts it in a task of its own; each caller waits for that task on a future
of its own, woken when the work is over. A caller that is cancelled leaves (its future
goes, the task is not touched), and the work goes on for the others. When the last caller
has left, nobody wants the answer any more and the work is cancelled (a cancelled single
call cancels its request, as it would without sharing). A leader ends its part in exactly
one of four ways, each without waiting: it starts the work, settles the flight with an
answer it found, fails it with the error that stopped it, or, cancelled, starts the rest
of the work for those who joined (nothing was sent yet) or lands the flight when nobody
did. A failure reaches every caller as an exception of its own: a copy of the work's,
with the work's traceback under the caller's frames, so no instance is raised twice and no
traceback grows with each caller.

Why a task once the work starts, even for a call nobody joins: a second identical call
may come at any time, and from then on the first caller's cancellation must not reach
the work. Cancelling a task cancels what its innermost ``await`` waits for (inside the
work itself), so work awaited in the first caller's own task could not be kept going once
it is cancelled; only work in a task of its own can. Why not before: thousands of calls
may wait for the pool's line at once, and a task (with its context, its weak reference,
its callbacks and the work's coroutines) for each would be thousands of objects more for
the cyclic GC to walk, again and again, while nothing of theirs runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

__all__ = ["Flight", "Flights"]

T = TypeVar("T")


class Flight(Generic[T]):
    """One key's work in flight (or being readied by its leader) and the futures of the
    callers waiting for it."""

    __slots__ = ("cleanup", "flights", "key", "task", "waiters")

    def __init__(self, flights: dict[str, Flight[T]], key: str) -> None:
        self.flights = flights
        self.key = key
        self.task: asyncio.Future[T] | None = None  # None while the leader readies it
        self.cleanup: Callable[[], None] | None = None
        self.waiters: list[asyncio.Future[None]] = []

    def start(self, work: Coroutine[Any, Any, T], cleanup: Callable[[], None] | None) -> None:
        """Run ``work`` in a task of its own; ``cleanup`` is called once it is over
        (whether or not it ever ran: a task cancelled before its first step runs none of
        its code)."""
        self.task = asyncio.ensure_future(work)
        self.cleanup = cleanup
        self.task.add_done_callback(self.landed)

    def settle(self, result: T) -> None:
        """The leader found the answer without any work (in the store): it is everyone's."""
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        done.set_result(result)
        self.task = done
        self.landed(done)

    def fail(self, error: BaseException) -> None:
        """The leader failed before any work started (its turn timed out, the client was
        closed): everyone who joined it fails alike, each with a copy of ``error``."""
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        done.set_exception(error)
        self.task = done
        self.landed(done)

    def land(self) -> None:
        """No identical call joins this one any more: a later one starts afresh."""
        if self.flights.get(self.key) is self:
            del self.flights[self.key]

    def landed(self, task: asyncio.Future[T]) -> None:
        """The work is over (the task's done callback): every caller still waiting is woken."""
        self.land()
        if self.cleanup is not None:
            self.cleanup()
        if not task.cancelled():
            task.exception()  # read by the callers; never "exception never retrieved"
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(None)

    def leave(self, waiter: asyncio.Future[None]) -> None:
        """A caller is cancelled: it stops waiting; the last to go cancels the work (none
        is started yet while the leader readies it, and the leader decides then)."""
        self.waiters.remove(waiter)
        task = self.task
        if not self.waiters and task is not None and not task.done():
            self.land()
            task.cancel()

    async def wait(self) -> T:
        """The work's result (or its failure, as an exception of this caller's own)."""
        waiter = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            self.leave(waiter)
            raise
        task = self.task
        assert task is not None  # a waiter is woken only by the work's end
        if task.cancelled():  # cancelled by another hand (the loop's end): so is this call
            raise asyncio.CancelledError
        failure = task.exception()
        if failure is None:
            return task.result()
        copy = own_copy(failure)
        context, suppressed = copy.__context__, copy.__suppress_context__
        try:
            raise copy
        except BaseException:
            # Raising sets the context to what the loop was handling when it woke this
            # caller (Python 3.10 resumes it inside an except): the work's own goes back.
            copy.__context__, copy.__suppress_context__ = context, suppressed
            raise


class Flights(Generic[T]):
    """The calls in flight of one client, by key."""

    def __init__(self) -> None:
        self._flights: dict[str, Flight[T]] = {}

    def __len__(self) -> int:
        return len(self._flights)

    def get(self, key: str) -> Flight[T] | None:
        """The flight an identical call leads for ``key`` (join it: :meth:`Flight.wait`),
        or ``None``."""
        return self._flights.get(key)

    def lead(self, key: str) -> Flight[T]:
        """A new flight for ``key``, led by the caller: identical calls join it from now
        on. The leader then ends its part without waiting in between (see the module's
        docstring): :meth:`Flight.start`, :meth:`Flight.settle`, :meth:`Flight.fail`, or,
        cancelled, :meth:`Flight.start` for those who joined, else :meth:`Flight.land`;
        until then a joiner waits and the flight stays (every later call joins it)."""
        flight: Flight[T] = Flight(self._flights, key)
        self._flights[key] = flight
        return flight


def own_copy(error: BaseException) -> BaseException:
    """A new exception equal to ``error`` (class, args, attributes, cause, traceback), to
    raise in one waiter; ``error`` itself when it cannot be copied."""
    cls = type(error)
    try:
        clone: Any = cls.__new__(cls, *error.args)
        clone.args = error.args
        state = getattr(error, "__dict__", None)
        if state:
            clone.__dict__.update(state)
            notes = state.get("__notes__")
            if isinstance(notes, list):
                clone.__notes__ = list(notes)
    except Exception:
        return error
    clone.__cause__ = error.__cause__
    clone.__context__ = error.__context__
    clone.__suppress_context__ = error.__suppress_context__
    copied: BaseException = clone.with_traceback(error.__traceback__)
    return copied
