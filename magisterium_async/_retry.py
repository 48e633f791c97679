"""The retry loop: one call through its pool, retried by the rules of :class:`RetryPolicy`."""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ._clock import Clock
from ._config import RetryPolicy
from ._errors import (
    APIConnectionError,
    APITimeoutError,
    InternalServerError,
    MagisteriumError,
    RateLimitError,
    UnexpectedStatusError,
)
from ._scheduler import Pool

__all__ = ["call_with_retries", "is_transient"]

logger = logging.getLogger("magisterium_async")

T = TypeVar("T")


def is_transient(error: MagisteriumError, *, retry_timeouts: bool = True) -> bool:
    """Whether ``error`` may go away by itself: a dropped connection, a timeout, a 5xx."""
    if isinstance(error, APITimeoutError):
        return retry_timeouts
    if isinstance(error, (APIConnectionError, InternalServerError)):
        return True
    if isinstance(error, UnexpectedStatusError):
        return error.status is not None and (error.status >= 500 or error.status == 408)
    return False


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    *,
    pool: Pool,
    policy: RetryPolicy,
    clock: Clock,
    what: str,
    retry_timeouts: bool = True,
    jitter: Callable[[], float] = random.random,
) -> T:
    """Run ``attempt`` in a slot of ``pool`` until it succeeds or may not be retried.

    A 429 pauses the whole pool (the next slot waits it out) and costs no retry, until the
    waits of this call pass ``policy.rate_limit_budget``. Transient failures are retried
    ``policy.max_retries`` times with exponential backoff, outside the pool's slot.
    """
    retries = 0
    waited = 0.0
    while True:
        async with pool.slot() as permit:
            try:
                return await attempt()
            except RateLimitError as exc:
                wait = exc.retry_after
                if wait is None:
                    wait = policy.fallback_retry_after
                wait = min(wait, policy.max_retry_after)
                permit.rate_limited(wait)
                waited += wait
                if waited > policy.rate_limit_budget:
                    raise
                permit.retried()
                logger.debug("%s: rate limited, retrying after %.3g s", what, wait)
                continue
            except MagisteriumError as exc:
                if retries >= policy.max_retries or not is_transient(
                    exc, retry_timeouts=retry_timeouts
                ):
                    raise
                permit.retried()
                delay = policy.backoff(retries, jitter())
                retries += 1
                logger.debug("%s: %s; retry %d in %.3g s", what, exc, retries, delay)
        await clock.sleep(delay)
