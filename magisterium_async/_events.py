"""What a client tells while it works: one typed stream of events, and its subscribers.

Every part of the client that has something worth observing emits a :class:`PoolEvent`
(a :class:`RetryEvent` for a retry) into the client's one :class:`Events`: the pools (a
request sent, a 429, a pause, a rate change, a wait for quota), the call loop (an
answer, a retry with its delay and reason), the sign-in (a refresh) and the cache (a hit,
a shared flight). Its subscribers are the library's log, the command line's status line
and the application's ``on_event``; each reads the events, none reads another's output.

Kinds, and what ``value`` holds for each:

========================  =============================================================
``sent``                  a request left: seconds it waited for its slot
``answered``              a request's answer came (or its failure): seconds it took
``retried``               the call is tried again (a :class:`RetryEvent`): seconds before
                          the next try
``rate_limited``          a 429: the wait the service asked for (at most
                          ``RetryPolicy.max_retry_after``)
``paused``                the pool pauses after a proven 429: seconds until it resumes
``resumed``               the pause is over: seconds it lasted
``rate_changed``          the pool's rate: the new rate (requests per period)
``waiting``               calls wait for the pool's quota: seconds until the next start
                          (``time + value``: when)
``refreshing``            the sign-in is being refreshed: seconds it may take at most
``cache_hit``             a call answered from the cache: 0
``coalesced``             a call answered by an identical one in flight: 0
========================  =============================================================
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

import msgspec

__all__ = ["EventKind", "Events", "OnEvent", "PoolEvent", "RetryEvent", "unheard"]

logger = logging.getLogger("magisterium_async.ratelimit")

EventKind = Literal[
    "sent",
    "answered",
    "retried",
    "rate_limited",
    "paused",
    "resumed",
    "rate_changed",
    "waiting",
    "refreshing",
    "cache_hit",
    "coalesced",
]


class PoolEvent(msgspec.Struct, frozen=True):
    """One thing that happened, for ``on_event`` callbacks (your own metrics).

    ``kind`` says what (the table in this module's docstring, and ``docs/observability.md``);
    ``pool`` is ``"default"``, ``"expensive"`` or ``"unmetered"`` (``tasks/get``,
    ``tasks/cancel``, the agent card), or ``""`` for what belongs to no pool (a refresh of
    the sign-in); ``time`` is the client's clock's ``now()``; ``value``: seconds, or a rate
    for ``rate_changed``.
    """

    kind: EventKind
    pool: str
    time: float
    value: float


class RetryEvent(PoolEvent, frozen=True):
    """A retry (``kind="retried"``): ``value`` seconds before it, and why.

    - ``method``: the call's (``message/send``, ``tasks/get``, ``GET <card URL>``);
    - ``reason``: the failure as OpenTelemetry's ``error.type`` says it (the JSON-RPC code,
      the exception's class), or ``"rate_limited"`` after a 429;
    - ``message``: the failure's message (``""`` after a 429);
    - ``retry``: the retry's number after a failure (1 for the first, up to
      ``max_retries``), ``0`` after a 429 (which spends no retry);
    - ``max_retries``: the call's ``RetryPolicy.max_retries``;
    - ``retry_after``: after a 429, the wait the service asked for (``None``: none).
    """

    method: str
    reason: str
    message: str
    retry: int
    max_retries: int
    retry_after: float | None


OnEvent = Callable[[PoolEvent], None]
"""A subscriber: called with every event, in the event loop, as it happens."""


def unheard(event: PoolEvent) -> None:
    """Where the events of a part nobody listens to go: nowhere."""


class Events:
    """One client's stream: calling it with an event hands the event to every subscriber
    in the order they subscribed. A subscriber that raises is logged (WARNING) and
    ignored: observing never fails a call."""

    __slots__ = ("_subscribers", "watched")

    def __init__(self, *subscribers: OnEvent, watched: bool = False) -> None:
        self._subscribers = list(subscribers)
        self.watched = watched
        """Whether the application itself hears the stream (``on_event=``): then a long
        wait for quota is told to it, and the log keeps it at INFO."""

    def __repr__(self) -> str:
        return f"<Events subscribers={len(self._subscribers)}>"

    def subscribe(self, subscriber: OnEvent) -> None:
        """Hand ``subscriber`` every event from now on."""
        self._subscribers.append(subscriber)

    def unsubscribe(self, subscriber: OnEvent) -> None:
        """Hand ``subscriber`` no more events (nothing if it was not subscribed)."""
        if subscriber in self._subscribers:
            self._subscribers.remove(subscriber)

    def __call__(self, event: PoolEvent) -> None:
        for subscriber in self._subscribers:
            try:
                subscriber(event)
            except Exception:
                logger.warning(
                    "on_event callback failed on %s event; ignored", event.kind, exc_info=True
                )
