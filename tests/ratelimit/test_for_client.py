"""The scheduler a client gets: local limiters, or the shared quota's."""

from __future__ import annotations

from magisterium_async import RateLimits, SharedQuota
from magisterium_async._clock import VirtualClock
from magisterium_async._ratelimit import SharedPool, WindowLimiter, client_scheduler


async def test_without_a_shared_quota_each_metered_pool_limits_itself() -> None:
    scheduler, shared = client_scheduler(
        RateLimits(10, 2), max_concurrency=4, clock=VirtualClock(), on_event=None,
        shared_quota=None, identity="token",
    )  # fmt: skip
    assert shared is None
    for name in ("default", "expensive"):
        assert isinstance(scheduler.pool(name)._limiter, WindowLimiter)
    await scheduler.aclose()


async def test_with_a_shared_quota_the_pools_take_the_shared_limiters() -> None:
    # Nothing connects before a request: an unreachable URL is fine here.
    quota = SharedQuota("redis://127.0.0.1:1")
    scheduler, shared = client_scheduler(
        RateLimits(10, 2), max_concurrency=4, clock=VirtualClock(), on_event=None,
        shared_quota=quota, identity="token",
    )  # fmt: skip
    assert shared is not None
    for name in ("default", "expensive"):
        limiter = scheduler.pool(name)._limiter
        assert isinstance(limiter, SharedPool) and limiter is shared.limiters[name]
        # Redis admits each start: without its gate a pool would start on its own count.
        admissions = scheduler.pool(name)._admissions
        assert admissions is not None and admissions.gate is shared.gates[name]
    assert scheduler.pool(None)._limiter is None  # the unmetered pool stays unmetered
    await scheduler.aclose()
