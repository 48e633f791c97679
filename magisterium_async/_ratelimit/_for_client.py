"""The scheduler a client gets: local limiters, or with a shared quota the Redis ones.

The one place that decides which limiters a client's pools use, so the client only says
what it was given (its rate limits, its shared quota, whose quota it is).
"""

from __future__ import annotations

from collections.abc import Callable

from magisterium_async._clock import Clock
from magisterium_async._config import RateLimits
from magisterium_async._ratelimit._quota import SharedQuota
from magisterium_async._ratelimit._scheduler import Scheduler
from magisterium_async._ratelimit._shared import SharedLimiter
from magisterium_async._ratelimit._stats import PoolEvent

__all__ = ["client_scheduler"]


def client_scheduler(
    rate_limits: RateLimits,
    *,
    max_concurrency: int,
    clock: Clock,
    on_event: Callable[[PoolEvent], None] | None,
    shared_quota: SharedQuota | None,
    identity: str | None,
) -> tuple[Scheduler, SharedLimiter | None]:
    """The client's scheduler, and its :class:`SharedLimiter` when ``shared_quota`` is set.

    With a shared quota the pools' rate is decided in Redis, with every process on the
    same token (``identity``: the token, or the stored sign-in's identity): its limiters
    and remote gates take the local limiters' place. Closing the scheduler closes it.
    """
    shared = None
    if shared_quota is not None:
        assert identity is not None
        shared = SharedLimiter(
            shared_quota, identity, rate_limits, clock, first_round=max_concurrency
        )
    scheduler = Scheduler(
        rate_limits,
        max_concurrency=max_concurrency,
        clock=clock,
        on_event=on_event,
        limiters=shared.limiters if shared is not None else None,
        gates=shared.gates if shared is not None else None,
    )
    return scheduler, shared
