"""The retry loop: one call through its pool, retried by the rules of :class:`RetryPolicy`."""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Awaitable, Callable
from typing import NamedTuple, TypeVar

from magisterium_async._clock import Clock
from magisterium_async._config import Priority, RetryPolicy
from magisterium_async._errors import (
    APIConnectionError,
    APITimeoutError,
    InternalServerError,
    MagisteriumError,
    RateLimitError,
    TLSError,
    UnexpectedStatusError,
)
from magisterium_async._ratelimit import Pool
from magisterium_async._telemetry import NO_OBSERVER, CallObserver, error_type

__all__ = ["RateLimitWait", "call_with_retries", "is_transient", "rate_limit_wait"]

logger = logging.getLogger("magisterium_async.retry")

T = TypeVar("T")


def is_transient(error: MagisteriumError, *, retry_timeouts: bool = True) -> bool:
    """Whether ``error`` may go away by itself: a dropped connection, a timeout, a 5xx."""
    if isinstance(error, TLSError):
        return False  # a refused certificate or handshake stays refused
    if isinstance(error, APITimeoutError):
        return retry_timeouts
    if isinstance(error, (APIConnectionError, InternalServerError)):
        return True
    if isinstance(error, UnexpectedStatusError):
        return error.status is not None and (error.status >= 500 or error.status == 408)
    return False


class RateLimitWait(NamedTuple):
    """What one 429 means in seconds: ``window``, until the server's window ends as it
    said (what the pool learns from); ``delay``, what the call waits before its next try."""

    window: float
    delay: float


def rate_limit_wait(error: RateLimitError, policy: RetryPolicy, limited: int) -> RateLimitWait:
    """The one turning of a 429 into waits; ``limited``: the call's 429s before this one.

    ``window`` is the service's wait (or ``policy.fallback_retry_after`` when it gave
    none), at most ``policy.max_retry_after``. ``delay`` is that, but at least
    ``policy.min_retry_after * 2**limited``, so a wait of 0 or a tiny one cannot make a hot
    loop, and it counts against ``policy.rate_limit_budget``.
    """
    wait = error.retry_after
    if wait is None:
        wait = policy.fallback_retry_after
    window = min(wait, policy.max_retry_after)
    floor = policy.min_retry_after * 2.0 ** min(limited, 64)
    return RateLimitWait(window, min(max(window, floor), policy.max_retry_after))


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    *,
    pool: Pool,
    policy: RetryPolicy,
    clock: Clock,
    what: str,
    priority: Priority = "interactive",
    fairness_key: str | None = None,
    retry_timeouts: bool = True,
    jitter: Callable[[], float] = random.random,
    deadline: float = math.inf,
    observer: CallObserver = NO_OBSERVER,
) -> T:
    """Run ``attempt`` in a slot of ``pool`` until it succeeds or may not be retried.

    ``priority`` and ``fairness_key`` place each try in the pool's line (see
    ``_ratelimit/_lines.py``); a retry waits in line again, with them.

    A 429 is told to the pool (which decides whether everyone pauses) and the call waits
    :func:`rate_limit_wait` outside its slot; it costs no retry, until the waits of this
    call pass ``policy.rate_limit_budget``, or until its wait would end after ``deadline``
    (a time on ``clock``): then the :class:`RateLimitError` is raised at once, since
    sleeping to the deadline could only end in a timeout. Transient failures are retried
    ``policy.max_retries`` times with exponential backoff, outside the pool's slot.
    ``observer`` hears of each slot, answer and retry (telemetry).
    """
    retries = 0
    limited = 0
    waited = 0.0
    while True:
        asked = clock.now()
        # acquire/release, not ``async with pool.slot()``: one object and one frame fewer
        # for each of the thousands of calls a gather leaves waiting here.
        permit = await pool.acquire(priority, fairness_key)
        try:
            observer.admitted(permit.started - asked)
            try:
                result = await attempt()
            except RateLimitError as exc:
                observer.answered(exc)
                window, delay = rate_limit_wait(exc, policy, limited)
                limited += 1
                waited += delay
                permit.rate_limited(window)
                if waited > policy.rate_limit_budget or clock.now() + delay > deadline:
                    raise
                permit.retried()
                observer.retrying(retries + limited, "rate_limited")
                logger.info("%s: rate limited (HTTP 429); retrying in %.3g s", what, delay)
            except MagisteriumError as exc:
                observer.answered(exc)
                if isinstance(exc, APIConnectionError) and not exc.reached_server:
                    permit.not_sent()  # the try spent no quota: its start is given back
                if retries >= policy.max_retries or not is_transient(
                    exc, retry_timeouts=retry_timeouts
                ):
                    raise
                permit.retried()
                delay = policy.backoff(retries, jitter())
                retries += 1
                observer.retrying(retries + limited, error_type(exc))
                limit = policy.max_retries
                # The error names the method already; the prefix is for those that do not.
                text = str(exc) if str(exc).startswith(what) else f"{what}: {exc}"
                logger.info("%s; retry %d of %d in %.3g s", text, retries, limit, delay)
            else:
                observer.answered(None)
                return result
        finally:
            permit.release()
        await clock.sleep(delay)
