"""What a client tells while it works: one typed stream of events, and its subscribers.

Every part that has something worth observing emits an event into the client's one
:class:`Events`: the pools (a request sent, a 429, a pause, a rate change, a wait for
quota), the call (its start and end, each answer, each retry), the sign-in (a refresh),
the cache (a hit, a shared call), and anything a person reading the log should know (a
:class:`Notice`). Its subscribers are the library's log (:class:`EventLog`), OpenTelemetry
(``_telemetry.py``), the counters behind ``client.stats`` (:class:`Counters`), the command
line's status line and the application's ``on_event``; each reads the events, none reads
another's output. No module but the log subscriber (and the command line's own output)
calls :mod:`logging`.

A part below the client is handed the stream as a plain callable (:data:`OnEvent`) by
whoever makes it (``emit=``, or ``events=``); one made without a client (a command that
needs none) gets :data:`log_event`, the log alone.

The kinds, what each means and what ``value`` holds, are the table of
``docs/observability.md``; each comes as a :class:`PoolEvent`, or as the subclass that says
more (:class:`RetryEvent`, :class:`AnswerEvent`, :class:`CallEvent`, :class:`Notice`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import sys
from collections.abc import Callable
from typing import Any, Literal, TextIO, get_args

import msgspec

from magisterium_async._clock import LoopClock
from magisterium_async._config import LOG_ENV, from_env
from magisterium_async._errors import JSONRPCError

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
    "call_started",
    "call_ended",
    "notice",
]


# Events hold numbers and strings, never in a reference cycle: the cyclic GC need not
# track them (a CallEvent, which holds a call's params and result, is tracked).
class PoolEvent(msgspec.Struct, frozen=True, gc=False):
    """One thing that happened, for ``on_event`` callbacks (your own metrics).

    ``kind`` says what (the table of ``docs/observability.md``);
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


def error_type(error: BaseException) -> str:
    """How events and spans name a failure (OpenTelemetry's ``error.type``): the JSON-RPC
    code as a string, else the exception's class name."""
    if isinstance(error, JSONRPCError):
        return str(error.code)
    return type(error).__name__


class AnswerEvent(PoolEvent, frozen=True):
    """A request's answer came (``kind="answered"``), ``value`` seconds after it left.

    - ``method``: the call's (``message/send``, ``GET <card URL>``);
    - ``outcome``: ``"ok"``, ``"rate_limited"`` (a 429) or ``"error"`` (any other failure);
    - ``retry_after``: after a 429, the wait the service asked for (``None``: none).
    """

    method: str
    outcome: Literal["ok", "rate_limited", "error"]
    retry_after: float | None


class CallEvent(PoolEvent, frozen=True, gc=True):
    """A protocol call begins (``kind="call_started"``, ``value`` 0) or ends
    (``"call_ended"``, ``value``: seconds it took), in the task of its caller.

    - ``method``: ``message/send``, ``tasks/get``, ``tasks/cancel`` or ``tasks/list``;
    - ``params``: what it sends (its message, or the task's id), as built for A2A 0.3;
    - ``cache``: for a call the cache policy covers, how it was answered (``"hit"``,
      ``"coalesced"`` or ``"miss"``: a request of its own; ``None`` until it ends), else
      ``None``;
    - ``result``: what it returned (a ``Task`` or a ``TaskPage``; ``None`` until then);
    - ``error``: the exception it ended with (``None``: none).
    """

    method: str
    params: Any
    cache: str | None = None
    result: Any = None
    error: BaseException | None = None


Level = Literal["debug", "info", "warning"]
"""How much a :class:`Notice` matters, as :mod:`logging`'s levels of the same names."""
Topic = Literal["auth", "cache", "harvest", "ratelimit", "retry", "transport"]
"""What a :class:`Notice` is about: its logger is ``magisterium_async.<topic>``."""
_NOW = LoopClock().now  # a notice's time when its part has no clock: the loop's


class Notice(PoolEvent, frozen=True):
    """Something a person reading the log should know (``kind="notice"``, ``value`` 0):
    the ``message`` (whole, never a secret in it), at ``level``, about ``topic``. Made by
    :func:`notice`."""

    level: Level
    topic: Topic
    message: str


def notice(
    level: Level, topic: Topic, message: str, *, pool: str = "", time: float | None = None
) -> Notice:
    """A :class:`Notice`, to hand to the stream: ``emit(notice("warning", "cache", "..."))``.

    Arguments:
        level: ``"debug"``, ``"info"`` or ``"warning"``.
        topic: what it is about (its logger: ``magisterium_async.<topic>``).
        message: the text, whole (it is not formatted later): no token, no secret.
        pool: the pool it concerns, if any.
        time: on the client's clock, if the part has it; else the loop's.
    """
    return Notice("notice", pool, _NOW() if time is None else time, 0.0, level, topic, message)


OnEvent = Callable[[PoolEvent], None]
"""A subscriber, and what a part is handed to emit with: called with every event, in the
event loop, as it happens."""


def unheard(event: PoolEvent) -> None:
    """Where the events of a part nobody listens to go: nowhere."""


class Events:
    """One client's stream: calling it with an event hands the event to every subscriber
    in the order given. A subscriber that raises is told of in the log (a WARNING on
    ``magisterium_async.ratelimit``) and ignored: observing never fails a call."""

    __slots__ = ("_subscribers",)

    def __init__(self, *subscribers: OnEvent) -> None:
        self._subscribers = subscribers

    def __call__(self, event: PoolEvent) -> None:
        for subscriber in self._subscribers:
            try:
                returned: object = subscriber(event)
                if returned is not None and asyncio.iscoroutine(returned):
                    returned.close()  # a lambda calling an async def: never awaited here
                    raise TypeError("it returned a coroutine, which is never awaited")
            except Exception as exc:
                failure = f"{type(exc).__name__}: {exc}"
                said = f"on_event callback failed on {event.kind} event ({failure}); ignored"
                log_event(notice("warning", "ratelimit", said, pool=event.pool, time=event.time))


# The counters behind client.stats -----------------------------------------------------


class Counters:
    """The counts behind ``client.stats``, per pool, from the stream: requests ``sent``,
    429s (``rate_limited``), ``retries``, and seconds paused (:meth:`paused_seconds`)."""

    __slots__ = ("_counts", "_pauses")

    def __init__(self) -> None:
        self._counts: collections.Counter[tuple[str, str]] = collections.Counter()
        # Per pool: seconds paused (the part still to come included), and until when.
        self._pauses: dict[str, tuple[float, float]] = {}

    def __call__(self, event: PoolEvent) -> None:
        kind = event.kind
        if kind in ("sent", "rate_limited", "retried"):
            self._counts[event.pool, kind] += 1
        elif kind == "paused":
            paused, until = self._pauses.get(event.pool, (0.0, -math.inf))
            if event.time + event.value > until:
                # A pause that lengthens one under way counts only the time it adds.
                paused += event.time + event.value - max(until, event.time)
                self._pauses[event.pool] = (paused, event.time + event.value)

    def of(self, pool: str) -> tuple[int, int, int]:
        """``pool``'s ``(sent, rate_limited, retries)``."""
        counts = self._counts
        return counts[pool, "sent"], counts[pool, "rate_limited"], counts[pool, "retried"]

    def paused_seconds(self, pool: str, now: float) -> float:
        """Seconds ``pool`` has spent paused by ``now``."""
        paused, until = self._pauses.get(pool, (0.0, now))
        return paused - max(0.0, until - now)


# The log --------------------------------------------------------------------------------

LOGGER = "magisterium_async"
"""The root of the library's loggers: ``magisterium_async.<topic>``."""
LONG_QUOTA_WAIT = 10.0
"""A wait for quota of at least this many seconds is news for the log (a shorter one is
the pacing at work)."""
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


_LOGGERS = {topic: logging.getLogger(f"{LOGGER}.{topic}") for topic in get_args(Topic)}
# What the log has nothing to say about: the most frequent kinds, passed over first.
_UNSAID = frozenset({"sent", "call_started", "call_ended", "cache_hit", "coalesced"})


class EventLog:
    """The log subscriber: what a person reading the library's log is told, from the stream.

    - each retry, at INFO on ``magisterium_async.retry`` (the method, why, its number and
      the wait); each answer at DEBUG on ``.transport``;
    - the pools' pauses and rate changes at INFO on ``.ratelimit`` (resumes at DEBUG), and
      a long wait for quota (:data:`LONG_QUOTA_WAIT` or more) once per wait: the first of a
      pool at WARNING (Python shows a WARNING where logging was never set up, so a program
      that watches nothing does not sit silent for a minute), later ones at INFO; at INFO
      from the first with ``quiet_waits`` (the application hears the events itself);
    - a refresh of the sign-in at INFO on ``.auth``;
    - every :class:`Notice`, at its level, on its topic's logger.
    """

    __slots__ = ("_quiet", "_told")

    def __init__(self, *, quiet_waits: bool = False) -> None:
        self._quiet = quiet_waits
        self._told: dict[str, float] = {}  # per pool: the end of the last long wait told

    def __call__(self, event: PoolEvent) -> None:
        kind = event.kind
        if kind in _UNSAID:
            return
        if isinstance(event, AnswerEvent):
            log = _LOGGERS["transport"]
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s: %s after %s", event.method, event.outcome, duration(event.value))
        elif isinstance(event, Notice):
            _LOGGERS[event.topic].log(_LEVELS[event.level], "%s", event.message)
        elif isinstance(event, RetryEvent):
            _log_retry(event)
        elif kind == "waiting":
            self._waiting(event)
        elif kind == "paused":
            _LOGGERS["ratelimit"].info(
                "pool %s paused for %s after a 429", event.pool, duration(event.value)
            )
        elif kind == "resumed":
            _LOGGERS["ratelimit"].debug("pool %s resumed", event.pool)
        elif kind == "rate_changed":
            _LOGGERS["ratelimit"].info("pool %s rate now %g per period", event.pool, event.value)
        elif kind == "refreshing":
            _LOGGERS["auth"].info("refreshing the access token (at most %s)", duration(event.value))

    def _waiting(self, event: PoolEvent) -> None:
        wake = event.time + event.value
        told = self._told.get(event.pool)
        if event.value < LONG_QUOTA_WAIT or (told is not None and wake <= told):
            return
        self._told[event.pool] = wake
        level = logging.INFO if self._quiet or told is not None else logging.WARNING
        _LOGGERS["ratelimit"].log(
            level,
            "the %s pool's quota is spent for now: calls wait %s for the next start "
            "(rate_limits= sets the quota; client.stats.%s.next_start_in tells the wait)",
            event.pool,
            duration(event.value),
            event.pool,
        )


def duration(seconds: float) -> str:
    """A span of time as every message says it: ``0.04s`` and ``30.5s`` under a minute
    (three figures), then ``3m07s``, ``2h05m``, ``3d04h``; ``forever`` past 30 years (or
    for infinity). Round first where fewer figures serve (a countdown)."""
    if not seconds < 1e9:
        return "forever"
    if seconds < 59.5:
        return f"{seconds:.3g}s"
    minutes, rest = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{rest:02d}s"


def _log_retry(event: RetryEvent) -> None:
    log, method, wait = _LOGGERS["retry"], event.method, event.value
    if event.retry == 0:
        told = event.retry_after
        asked_for = "" if told is None else f"; the service asks to wait {duration(told)}"
        log.info("%s: rate limited (HTTP 429%s); retrying in %s", method, asked_for, duration(wait))
        return
    # The error names the method already; the prefix is for those that do not.
    text = event.message if event.message.startswith(method) else f"{method}: {event.message}"
    log.info("%s; retry %d of %d in %s", text, event.retry, event.max_retries, duration(wait))


log_event = EventLog()
"""The log of a part made without a client's stream (a command that needs no client)."""


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to ``sys.stderr`` as it is when a record comes (a test may have replaced it)."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


class _JsonRecords(logging.Formatter):
    """A record as one JSON object: ``{"level", "logger", "message"}``."""

    def format(self, record: logging.LogRecord) -> str:
        said = {"level": record.levelname.lower(), "logger": record.name}
        return msgspec.json.encode({**said, "message": record.getMessage()}).decode()


def log_to_stderr(level: int, *, json: bool = False) -> None:
    """Show the library's records of ``level`` and above on stderr, each as a line of
    text or (``json``: the command line's ``--json``, whose reader parses every line of
    stderr) as one JSON object.

    One handler however often it is called; the most verbose level asked for wins (``-v``
    does not quieten ``$MAGISTERIUM_LOG=debug``), the last format asked for too.
    """
    logger = logging.getLogger(LOGGER)
    found = [h for h in logger.handlers if isinstance(h, _Stderr)]
    handler = found[0] if found else _Stderr()
    handler.setLevel(min(handler.level, level) if found else level)
    logger.addHandler(handler)  # once: a handler already there is not added again
    handler.setFormatter(_JsonRecords() if json else logging.Formatter(_FORMAT, "%H:%M:%S"))
    if logger.getEffectiveLevel() > level:  # lowered only: --json's WARNING changes none
        logger.setLevel(level)


def log_from_environment() -> None:
    """Turn the log on as ``$MAGISTERIUM_LOG`` asks (``info`` or ``debug``); a value it
    does not know is said, once, and ignored."""
    value = (from_env(LOG_ENV) or "").lower()
    if value in ("info", "debug"):
        log_to_stderr(_LEVELS[value])
    elif value:
        said = f"${LOG_ENV}={value[:40]!r}"
        logging.getLogger(LOGGER).warning("%s: expected info or debug; ignored", said)
