"""The seams between a pool and its quota: :class:`Limiter` (when may the next start
happen, and what to learn from the judge's verdicts) and :class:`RemoteGate` (another
party's leave for each start: the Redis-shared quota). :class:`WindowLimiter` is the local
limiter: a sliding log and the rate rule, on the client's clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from magisterium_async._config import Priority
from magisterium_async._ratelimit._judge import Verdict
from magisterium_async._ratelimit._log import Start, StartLog
from magisterium_async._ratelimit._rule import RateRule
from magisterium_async._ratelimit._tuning import PACE_RUN_WINDOWS

__all__ = ["Limiter", "RemoteGate", "WindowLimiter"]


class Limiter(Protocol):
    """The rate limit of one metered pool, as the pool sees it.

    The pool asks :meth:`next_start` while it has a waiter, records every start with
    :meth:`start` (and takes back one that sent nothing with :meth:`forget`), and hands on
    every verdict of its judge to :meth:`learn`.
    """

    @property
    def rate(self) -> float:
        """Requests per ``RateLimits.period`` now in force (``inf``: no limit here)."""
        ...

    @property
    def stepping_up(self) -> bool:
        """Whether the rate is above what the server allowed last (a 429 now answers that)."""
        ...

    def next_start(self, now: float) -> float:
        """When the next start may happen: ``<= now`` lets it start now; else ask again
        then (the answer may move when asked again)."""
        ...

    def contention(self, now: float) -> None:
        """A call a burst would hold back arrived (an interactive one, or one with a
        fairness key): bulk starts are paced for a while (see :func:`~._rule.contended`)."""
        ...

    def paced_start(self, now: float, waiting: int, *, keyed: bool, bulk: bool) -> float:
        """When pacing (:meth:`RateRule.paced_start`) lets the next start happen
        (``-inf``: not paced now): ``waiting`` calls in line, ``keyed`` whether calls with
        a fairness key are among them, ``bulk`` whether the next start is a bulk call's."""
        ...

    def start(self, start: Start) -> None:
        """A request started (``next_start`` allowed it)."""
        ...

    def usage(self, now: float) -> tuple[int, int, float]:
        """This process's view of the window, changing nothing: the starts in it, how many
        more may start now, and when the next may (see :meth:`StartLog.usage`)."""
        ...

    def forget(self, start: Start) -> None:
        """A recorded start was given back before anything was sent."""
        ...

    def learn(self, verdict: Verdict) -> None:
        """What the judge decided about a 429."""
        ...

    async def aclose(self) -> None:
        """Release what the limiter holds (connections, tasks). Idempotent."""
        ...


class RemoteGate(Protocol):
    """Another party's leave for each start, asked once the pool itself may start one.

    The pool asks on behalf of its line: ``line()`` says, whenever the gate asks again,
    the priority of the waiter whose turn is next, how many calls wait in the pool, and
    whether the line *contends* (its head is interactive, or it holds calls with a
    fairness key: other parties' bulk starts are then paced, see :func:`~._rule.contended`).
    When :meth:`admit` returns, the pool starts whoever is first in line then, its
    :class:`Start` carrying the ticket.
    """

    async def admit(self, line: Callable[[], tuple[Priority, int, bool]]) -> str:
        """Wait until one start is admitted; its ticket (its name on the remote side)."""
        ...

    def answered(self, start: Start) -> None:
        """A start admitted here is over (its outcome is on ``start``)."""
        ...

    def give_back(self, ticket: str) -> None:
        """An admission that was not used: nothing was sent."""
        ...


class WindowLimiter:
    """The local limiter: a sliding log of starts, ``limit`` per ``window + margin``, and
    (``adaptive``) the rate rule that learns from 429s."""

    def __init__(
        self,
        name: str,
        limit: int,
        window: float,
        margin: float,
        *,
        period: float | None = None,
        adaptive: bool = True,
    ) -> None:
        self.name = name
        self.rule = RateRule(name, limit, window, margin, period=period, adaptive=adaptive)
        self.log = StartLog()
        self.contended_at = -math.inf  # when a call a burst would hold back last arrived
        self.run_since = self.last_start = -math.inf  # the run of starts going on

    @property
    def rate(self) -> float:
        return self.rule.rate

    @property
    def stepping_up(self) -> bool:
        return self.rule.stepping_up

    def next_start(self, now: float) -> float:
        return self.rule.next_start(self.log, now)

    def contention(self, now: float) -> None:
        self.contended_at = now

    def paced_start(self, now: float, waiting: int, *, keyed: bool, bulk: bool) -> float:
        rule = self.rule
        contended_at = self.contended_at
        if (
            rule.state.rate >= rule.limit
            and self.last_start > now - 2 * rule.span
            and now - self.run_since >= PACE_RUN_WINDOWS * rule.window
        ):
            contended_at = now  # a long run at the full rate (a harvest) is paced
        return rule.paced_start(
            self.log, now, waiting, keyed=keyed, bulk=bulk, contended_at=contended_at
        )

    def start(self, start: Start) -> None:
        if start.time - self.last_start > 2 * self.rule.span:
            self.run_since = start.time
        self.last_start = start.time
        self.log.add(start)

    def usage(self, now: float) -> tuple[int, int, float]:
        rule = self.rule
        return self.log.usage(rule.limit, rule.state.rate, rule.span, now)

    def forget(self, start: Start) -> None:
        self.log.forget(start)

    def learn(self, verdict: Verdict) -> None:
        self.rule.learn(self.log, verdict)

    async def aclose(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"<WindowLimiter {self.name} {self.rule.state.rate}/{self.rule.window:g}s>"
