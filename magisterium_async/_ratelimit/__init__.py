"""The rate-limit engine."""

from magisterium_async._ratelimit._pool import Permit, Pool, Scheduler
from magisterium_async._ratelimit._quota import (
    PoolQuota,
    PoolStats,
    Quota,
    SchedulerStats,
    SharedQuota,
)
from magisterium_async._ratelimit._rule import Rule, Start, Verdict

__all__ = [
    "Permit",
    "Pool",
    "PoolQuota",
    "PoolStats",
    "Quota",
    "Rule",
    "Scheduler",
    "SchedulerStats",
    "SharedQuota",
    "Start",
    "Verdict",
]
