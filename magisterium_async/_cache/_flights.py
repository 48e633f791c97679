"""Calls in flight, shared: identical calls made while one is running wait for its answer.

Each key in flight has one task doing the work, and each caller waits for it on a future
of its own, woken when the work is over: a caller that is cancelled leaves (its future
goes, the task is not touched), and the work goes on for the others. When the last caller
has left, nobody wants the answer any more and the work is cancelled (a cancelled single
call cancels its request, as it would without sharing). A failure reaches every caller as
an exception of its own: a copy of the work's, with the work's traceback under the
caller's frames, so no instance is raised twice and no traceback grows with each caller.

Why a task, even for a call nobody joins: a second identical call may come at any time,
and from then on the first caller's cancellation must not reach the work. Cancelling a
task cancels what its innermost ``await`` waits for (inside the work itself), so work
awaited in the first caller's own task could not be kept going once it is cancelled; only
work in a task of its own can. What a flight costs besides is kept small (a call waiting
for the pool's slot holds it all the while, and thousands may wait at once): one future
per caller and one callback per flight, not a shield's future, callbacks and contexts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar

__all__ = ["Flights"]

T = TypeVar("T")


class _Flight(Generic[T]):
    """One key's work in flight and the futures of the callers waiting for it."""

    __slots__ = ("flights", "key", "task", "waiters")

    def __init__(self, flights: dict[str, _Flight[T]], key: str, task: asyncio.Future[T]) -> None:
        self.flights = flights
        self.key = key
        self.task = task
        self.waiters: list[asyncio.Future[None]] = []

    def land(self) -> None:
        """No identical call joins this one any more: a later one starts afresh."""
        if self.flights.get(self.key) is self:
            del self.flights[self.key]

    def landed(self, task: asyncio.Future[T]) -> None:
        """The work is over (the task's done callback): every caller still waiting is woken."""
        self.land()
        if not task.cancelled():
            task.exception()  # read by the callers; never "exception never retrieved"
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(None)

    def leave(self, waiter: asyncio.Future[None]) -> None:
        """A caller is cancelled: it stops waiting; the last to go cancels the work."""
        self.waiters.remove(waiter)
        if not self.waiters and not self.task.done():
            self.land()
            self.task.cancel()


class Flights(Generic[T]):
    """The calls in flight of one client, by key."""

    def __init__(self) -> None:
        self._flights: dict[str, _Flight[T]] = {}

    def __len__(self) -> int:
        return len(self._flights)

    async def run(self, key: str, work: Coroutine[Any, Any, T]) -> tuple[T, bool]:
        """``work``'s result, and whether it was another call's (``True``: this call
        joined one already in flight for ``key`` and sent nothing of its own).

        Arguments:
            key: what makes two calls identical.
            work: the call itself, a coroutine not yet started: started only when no
                identical call is in flight, else closed unstarted.
        """
        flight = self._flights.get(key)
        joined = flight is not None
        if flight is not None:
            work.close()
        else:
            flight = _Flight(self._flights, key, asyncio.ensure_future(work))
            self._flights[key] = flight
            flight.task.add_done_callback(flight.landed)
        waiter = asyncio.get_running_loop().create_future()
        flight.waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            flight.leave(waiter)
            raise
        task = flight.task
        if task.cancelled():  # cancelled by another hand (the loop's end): so is this call
            raise asyncio.CancelledError
        failure = task.exception()
        if failure is None:
            return task.result(), joined
        copy = own_copy(failure)
        context, suppressed = copy.__context__, copy.__suppress_context__
        try:
            raise copy
        except BaseException:
            # Raising sets the context to what the loop was handling when it woke this
            # caller (Python 3.10 resumes it inside an except): the work's own goes back.
            copy.__context__, copy.__suppress_context__ = context, suppressed
            raise


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
