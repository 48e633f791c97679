"""The sliding log: every start of one pool, with its outcome, for as long as it matters.

A *start* is one request let through at a time on the client's clock. The log allows a
start at ``t`` only if fewer than N starts lie in ``(t - span, t]`` (``span`` = the window
plus the safety margin), so no interval of one window ever holds more than N starts however
the server counts (fixed window, sliding window, token bucket), while a burst of N on an idle
pool still goes at once. (A leaky bucket that starts empty, as ``aiolimiter``, lets about 2N
through in one window, so it is not used.)
"""

from __future__ import annotations

import contextlib
import math
from collections import deque
from collections.abc import Iterator

__all__ = ["Start", "StartLog"]


class Start:
    """One request's start, as the log records it: ``time``, whether it got a 429
    (``limited``, with the 429's ``wait``) and whether it is over (``done``); ``ticket``:
    its name in a shared log (``None`` for a local one)."""

    __slots__ = ("done", "limited", "ticket", "time", "wait")

    def __init__(self, time: float, ticket: str | None = None) -> None:
        self.time = time
        self.ticket = ticket
        self.limited = False
        self.wait = 0.0
        self.done = False

    def __repr__(self) -> str:
        state = "429" if self.limited else "done" if self.done else "out"
        return f"<Start {self.time:g} {state}>"


class StartLog:
    """The starts of one pool, oldest first; pure data, no clock of its own."""

    __slots__ = ("_starts",)

    def __init__(self, starts: list[Start] | None = None) -> None:
        self._starts: deque[Start] = deque(starts or ())

    def __len__(self) -> int:
        return len(self._starts)

    def __iter__(self) -> Iterator[Start]:
        return iter(self._starts)

    def __reversed__(self) -> Iterator[Start]:
        return reversed(self._starts)

    def add(self, start: Start) -> None:
        """Record a start (they come in time order)."""
        self._starts.append(start)

    def forget(self, start: Start) -> None:
        """Take back a start that sent nothing (a no-op once it has aged out)."""
        with contextlib.suppress(ValueError):
            self._starts.remove(start)

    def prune(self, before: float) -> None:
        """Drop the starts at or before ``before``: nothing looks that far back."""
        starts = self._starts
        while starts and starts[0].time <= before:
            starts.popleft()

    def allows(self, limit: int, rate: int, span: float) -> float:
        """When the next start may happen: never more than ``limit`` starts in a ``span``,
        and, lowered (``rate < limit``), the ``rate`` starts the server took (a 429 took
        nothing) evenly spaced, so wherever the server's window falls it holds as many, and
        a step up one too high is refused at once, not after a run of luck with the phase.
        """
        starts = self._starts
        at = starts[-limit].time + span if len(starts) >= limit else -math.inf
        if rate < limit:
            taken = 0
            for s in reversed(starts):
                if not s.limited:
                    if taken == 0:
                        at = max(at, s.time + span / rate)
                    taken += 1
                    if taken == rate:
                        at = max(at, s.time + span)
                        break
        return at

    def accepted(self, begin: float, end: float) -> int:
        """How many starts in ``[begin, end)`` the server answered without a 429."""
        return sum(1 for s in self._starts if begin <= s.time < end and s.done and not s.limited)

    def started(self, begin: float, end: float) -> int:
        """How many starts lie in ``(begin, end]``, whatever their outcome."""
        return sum(1 for s in self._starts if begin < s.time <= end)

    def usage(self, limit: int, rate: int, span: float, now: float) -> tuple[int, int, float]:
        """What :meth:`allows` leaves at ``now``, read without changing anything: the starts
        in the last ``span``, how many more may start now, and when the next may (``now``
        at the earliest). Lowered (``rate < limit``), starts are spaced: one at a time.
        """
        used = self.started(now - span, now)
        at = self.allows(limit, rate, span)
        if at > now:
            return used, 0, at
        return used, 1 if rate < limit else max(limit - used, 1), now
