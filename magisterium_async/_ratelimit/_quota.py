"""The engine's value objects a user holds: where a quota is shared (:class:`SharedQuota`)
and what is left of the quota now (:class:`Quota`, one :class:`PoolQuota` per pool)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from magisterium_async._config import REDIS_URL_ENV, from_env, positive_number, whole_number
from magisterium_async._errors import SharedQuotaError
from magisterium_async._redis import describe, is_client

__all__ = ["PoolQuota", "PoolStats", "Quota", "SchedulerStats", "SharedQuota"]


@dataclass(frozen=True)
class PoolQuota:
    """What is left of one metered pool's quota now, as ``await client.quota()`` tells it.

    Attributes:
        pool: ``"default"`` (every skill but ``catholic_qa``) or ``"expensive"``.
        limit: starts allowed per ``period`` now: ``configured`` in whole starts per
            window (``2.9`` a minute allows 2), lower after the service showed a smaller
            quota (``math.inf``: unlimited).
        configured: starts per ``period`` as configured (``RateLimits``).
        period: the quota's period, in seconds (``RateLimits.period``).
        used: starts in the last window (the period, or longer for a limit below 1 per
            period, plus the safety margin): this process's, or every process's when
            the quota is shared (``0`` for an unlimited pool: nothing counts its starts).
        left: starts that could go now without waiting for the window (``None``:
            unlimited; at most 1 while the rate is lowered, since starts are then spaced).
        next_start_in: seconds until the next start is free (``0.0``: now), the pause
            included.
        paused_for: seconds until a pause after a 429 ends (``0.0``: not paused).
        shared: whether this was read from a shared quota (Redis); ``False`` with a
            shared quota means Redis did not answer, and this is this process's view.
    """

    pool: str
    limit: float
    configured: float
    period: float
    used: int
    left: int | None
    next_start_in: float
    paused_for: float = 0.0
    shared: bool = False

    @property
    def unlimited(self) -> bool:
        """Whether the pool has no quota at all."""
        return math.isinf(self.limit)


@dataclass(frozen=True)
class Quota:
    """What is left of the client's quota now, per metered pool: ``await client.quota()``.

    Reading it sends nothing to the service and spends no quota. With a
    :class:`SharedQuota` it is read from Redis (every process's starts); when Redis does
    not answer, each pool is this process's own view, with ``shared=False``.

    Attributes:
        default: every skill but ``catholic_qa``.
        expensive: ``catholic_qa``.
    """

    default: PoolQuota
    expensive: PoolQuota

    @property
    def pools(self) -> tuple[PoolQuota, PoolQuota]:
        """Both pools, ``default`` first."""
        return self.default, self.expensive

    @property
    def shared(self) -> bool:
        """Whether every metered pool was read from the shared quota (Redis); ``False``
        when no pool is metered (an unlimited pool has nothing to share)."""
        metered = [pool for pool in self.pools if not pool.unlimited]
        return bool(metered) and all(pool.shared for pool in metered)


@dataclass(frozen=True)
class SharedQuota:
    """Share the client's rate limits with every process on the same token, through Redis.

    The URL alone is enough: Redis decides each start over the shared log, and tells every
    process how many share the quota (those seen lately). Needs
    ``pip install 'magisterium-async[redis]'``.

    Args:
        url: the Redis URL (``redis://``, ``rediss://``, ``unix://``, ``redis+cluster://``,
            ``redis+sentinel://``), or a redis-py asyncio client the application owns (it is
            never closed here); ``None``: ``$MAGISTERIUM_REDIS_URL``.
        workers: only sizes the fallback: while Redis is unreachable each process starts
            ``limit / max(workers, clients seen lately)`` per period on its own. Give it
            when processes may lose Redis before they have ever reached it.
        timeout: the most every Redis call may take, in seconds.
        retry_interval: how often a client that lost Redis tries it again, in seconds.
        prefix: the start of every key this quota writes.
        account: whose quota this is (the service counts per account): name it when
            the tokens rotate, so that every process on it shares one quota whichever
            token it holds. ``None``: a stored sign-in's, else the hash of the token
            (for a ``token=`` callable, of the first one it returns).
    """

    url: str | Any | None = None
    workers: int = 1
    timeout: float = 0.5
    retry_interval: float = 1.0
    prefix: str = "magisterium"
    account: str | None = None

    def __post_init__(self) -> None:
        if is_client(self.url):
            url: Any = self.url
        elif self.url is None or isinstance(self.url, str):
            url = self.url or from_env(REDIS_URL_ENV)
        else:
            raise TypeError(
                f"SharedQuota(url=) must be a Redis URL or client, not {type(self.url)}"
            )
        if not url:
            raise SharedQuotaError(f"no Redis URL: pass url= or set ${REDIS_URL_ENV}")
        object.__setattr__(self, "url", url)
        whole_number("workers", self.workers)
        positive_number("timeout", self.timeout)
        positive_number("retry_interval", self.retry_interval)
        if self.account is not None:
            if not isinstance(self.account, str):
                raise TypeError(f"account must be a str, not {type(self.account).__name__}")
            if not self.account.strip():
                raise ValueError("account must name the account: a non-blank string")

    def __repr__(self) -> str:
        # Written out, not the dataclass's: the URL's password is masked (as everywhere).
        return (
            f"SharedQuota(url={describe(self.url)!r}, workers={self.workers}, "
            f"timeout={self.timeout}, retry_interval={self.retry_interval}, "
            f"prefix={self.prefix!r}, account={self.account!r})"
        )

    @classmethod
    def of(cls, value: SharedQuota | str | Any) -> SharedQuota:
        """A ``SharedQuota`` from a user's ``shared_quota=``: a URL or the object itself."""
        if isinstance(value, SharedQuota):
            return value
        if isinstance(value, str) or is_client(value):
            return cls(value)
        raise TypeError(f"shared_quota must be a Redis URL or SharedQuota, not {type(value)}")


@dataclass(frozen=True)
class PoolStats:
    """A snapshot of one pool, as ``client.stats`` gives it.

    Attributes:
        name: ``"default"``, ``"expensive"`` or ``"unmetered"``.
        sent: requests let through (a retry is one more).
        rate_limited: 429s.
        retries: retries counted by the client.
        paused_seconds: time spent paused so far.
        current_rate: requests per ``RateLimits.period`` now in force (lower after the
            server showed a smaller quota; ``inf``: unlimited).
        configured_rate: requests per period as configured.
        in_flight: requests let through and not yet done.
        waiting: requests waiting for their turn.
        next_start_in: seconds until time alone lets the first of them start (``0.0`` when
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
