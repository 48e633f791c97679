"""What the engine tells its users: :class:`PoolEvent` for ``on_event`` callbacks, and
the frozen snapshots :class:`PoolStats` and :class:`SchedulerStats` of ``client.stats``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["EventKind", "PoolEvent", "PoolStats", "SchedulerStats"]

EventKind = Literal["sent", "rate_limited", "paused", "resumed", "rate_changed", "retried"]


@dataclass(frozen=True)
class PoolEvent:
    """One thing that happened in a pool, for ``on_event`` callbacks (your own metrics).

    ``pool`` is ``"default"``, ``"expensive"`` or ``"unmetered"`` (``tasks/get``,
    ``tasks/cancel``, the agent card); ``time`` is the clock's ``now()``. ``value`` by kind:
    ``sent``: seconds the request waited for its slot; ``rate_limited``: the wait after the
    429; ``paused``: seconds until the pool resumes; ``resumed``: seconds the pause lasted;
    ``rate_changed``: the new rate (requests per period); ``retried``: 1.
    """

    kind: EventKind
    pool: str
    time: float
    value: float


@dataclass(frozen=True)
class PoolStats:
    """A snapshot of one pool.

    ``sent``: requests let through (a retry is one more); ``rate_limited``: 429s;
    ``retries``: retries counted by the client; ``paused_seconds``: time spent paused so far;
    ``current_rate`` / ``configured_rate``: requests per ``RateLimits.period`` now in force
    (lower after a 429 when adaptive) and as configured (``inf``: unlimited); ``in_flight``:
    requests let through and not yet done; ``waiting``: requests waiting for their turn;
    ``next_start_in``: seconds until time alone lets the first of them start (``0.0`` when
    nobody waits, or the wait is for a free slot rather than for quota).
    """

    name: str
    sent: int
    rate_limited: int
    retries: int
    paused_seconds: float
    current_rate: float
    configured_rate: float
    in_flight: int
    waiting: int
    next_start_in: float = 0.0


@dataclass(frozen=True)
class SchedulerStats:
    """A snapshot of every pool, and the requests in flight over all of them."""

    default: PoolStats
    expensive: PoolStats
    unmetered: PoolStats
    in_flight: int
    max_concurrency: int
