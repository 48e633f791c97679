"""One loop timer bounding every request of a transport in time.

aiohttp's own ``ClientTimeout(total=...)`` arms a loop timer for each request and wraps
each read in a timer context: a few microseconds a request, which is a few percent of what
a request costs the client. Here each request joins a line instead (one small record
appended, one flag set when it ends), and one loop timer is armed at the earliest deadline
of all the lines. Requests with the same timeout end their lines in the order they joined,
so a line is first-in, first-out and its head is its earliest deadline. Deadlines stay
exact: the timer fires at the head's deadline, never on a coarser tick.

When the timer fires, every request past its deadline has the task awaiting it cancelled;
the request sees ``CancelledError`` and :meth:`SharedTimer.leave` turns it into
``TimeoutError`` (a cancellation from outside is passed on as it is), as
:func:`~magisterium_async._deadline.within` does.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Entry", "SharedTimer"]

# Ended records behind a slow request stay in its line until the head ends; past this many
# (and past twice the requests still waiting) the line is rebuilt without them, so memory
# stays bounded by the requests in flight, not by the rate times the timeout.
_COMPACT_AT = 64


class Entry:
    """One request's place in a line: its deadline, its task, and how it ended."""

    __slots__ = ("deadline", "ended", "fired", "task")

    def __init__(self, deadline: float, task: asyncio.Task[object]) -> None:
        self.deadline = deadline
        self.task = task
        self.ended = False
        self.fired = False


class _Line:
    """The requests of one timeout value, in the order they joined (and of their deadlines)."""

    __slots__ = ("entries", "waiting")

    def __init__(self) -> None:
        self.entries: deque[Entry] = deque()
        self.waiting = 0


class SharedTimer:
    """Deadlines for the requests of one event loop, on one loop timer.

    ``entry = timer.join(seconds)`` before a request, ``timer.leave(entry, error)`` in its
    ``finally`` and ``except CancelledError``: see :meth:`leave`.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lines: dict[float, _Line] = {}
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for = 0.0
        # The loop runs a timer up to its clock's resolution early.
        self._slack = loop._clock_resolution if hasattr(loop, "_clock_resolution") else 1e-9

    def __repr__(self) -> str:
        return f"<SharedTimer {self.waiting} waiting, {self.held} held>"

    @property
    def waiting(self) -> int:
        """Requests joined and not yet left."""
        return sum(line.waiting for line in self._lines.values())

    @property
    def held(self) -> int:
        """Records held in the lines: ended ones wait there behind a slower request."""
        return sum(len(line.entries) for line in self._lines.values())

    @property
    def lines(self) -> int:
        """Lines kept: one per timeout value in use, forgotten when the timer next fires."""
        return len(self._lines)

    def join(self, seconds: float) -> Entry:
        """Bound the current task's request to ``seconds`` from now."""
        task = asyncio.current_task(self._loop)
        assert task is not None, "SharedTimer.join() runs inside a task"
        entry = Entry(self._loop.time() + seconds, task)
        line = self._lines.get(seconds)
        if line is None:
            line = self._lines[seconds] = _Line()
        line.entries.append(entry)
        line.waiting += 1
        if self._handle is None or entry.deadline < self._armed_for:
            self._arm(entry.deadline)
        return entry

    def leave(self, entry: Entry, seconds: float) -> None:
        """The request of ``entry`` (joined with ``seconds``) has ended: forget it.

        Called from the request's ``finally`` (a second call does nothing). A
        ``CancelledError`` the request meets is raised as ``TimeoutError`` when
        :meth:`timed_out` says the deadline alone caused it.
        """
        if entry.ended:
            return
        entry.ended = True
        line = self._lines[seconds]
        line.waiting -= 1
        entries = line.entries
        while entries and entries[0].ended:
            entries.popleft()
        if len(entries) > _COMPACT_AT and len(entries) > 2 * line.waiting:
            line.entries = deque(e for e in entries if not e.ended)

    @staticmethod
    def timed_out(entry: Entry) -> bool:
        """Whether the ``CancelledError`` the request just met is its deadline's alone.

        ``False`` means it came from outside (too): the caller re-raises it.
        """
        if not entry.fired:
            return False
        task = entry.task
        # uncancel() (3.11+) counts the cancellations still pending: one from outside too.
        return not (hasattr(task, "uncancel") and task.uncancel() > 0)

    def _arm(self, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._armed_for = when
        self._handle = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._handle = None
        now = self._loop.time() + self._slack
        earliest: float | None = None
        for seconds in list(self._lines):
            line = self._lines[seconds]
            entries = line.entries
            while entries and (entries[0].ended or entries[0].deadline <= now):
                entry = entries.popleft()
                if not entry.ended and not entry.fired:
                    entry.fired = True
                    entry.task.cancel()
            if entries:
                head = entries[0].deadline
                earliest = head if earliest is None else min(earliest, head)
            elif line.waiting == 0:
                del self._lines[seconds]
        if earliest is not None:
            self._arm(earliest)
