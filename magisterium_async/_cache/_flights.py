"""Calls in flight, shared: identical calls made while one is running wait for its answer.

Each key in flight has one task doing the work, shielded from its waiters: a waiter that
is cancelled leaves, and the work goes on for the others. When the last waiter has left,
nobody wants the answer any more and the work is cancelled (a cancelled single call
cancels its request, as it would without sharing). A failure reaches every waiter as an
exception of its own: a copy of the work's, with the work's traceback under the waiter's
frames, so no instance is raised twice and no traceback grows with each waiter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

__all__ = ["Flights"]

T = TypeVar("T")


class _Flight(Generic[T]):
    __slots__ = ("task", "waiters")

    def __init__(self, task: asyncio.Task[T]) -> None:
        self.task = task
        self.waiters = 0


class Flights(Generic[T]):
    """The calls in flight of one client, by key."""

    def __init__(self) -> None:
        self._flights: dict[str, _Flight[T]] = {}

    def __len__(self) -> int:
        return len(self._flights)

    async def run(self, key: str, work: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """``work()``'s result, and whether it was another call's (``True``: this call
        joined one already in flight for ``key`` and sent nothing of its own).

        Arguments:
            key: what makes two calls identical.
            work: the call itself, started only when no identical call is in flight.
        """
        flight = self._flights.get(key)
        joined = flight is not None
        if flight is None:
            flight = _Flight(asyncio.ensure_future(work()))
            self._flights[key] = flight
            flight.task.add_done_callback(lambda _: self._land(key, flight))
        flight.waiters += 1
        try:
            result = await asyncio.shield(flight.task)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            failure = exc
        else:
            return result, joined
        finally:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.task.done():
                self._land(key, flight)  # a later identical call starts afresh
                flight.task.cancel()
        copy = own_copy(failure)
        context, suppressed = copy.__context__, copy.__suppress_context__
        try:
            raise copy
        except BaseException:
            # Raising sets the context to what the loop was handling when it woke this
            # waiter (Python 3.10 resumes it inside an except): the work's own goes back.
            copy.__context__, copy.__suppress_context__ = context, suppressed
            raise

    def _land(self, key: str, flight: _Flight[T]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]


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
