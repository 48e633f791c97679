"""The rate-limit engine: every request waits here for its quota, and 429s teach it.

The parts, each one job, in the order they import each other:

- ``_rule.py``: the **rule** of one pool, pure (no clock, no I/O): its **log** of starts
  (never more than the rate in a window plus a safety margin), the **rounds** that judge a
  429 once what was in flight is answered, what a window that **ran out** teaches (a pause
  to its end, a lower rate), the **steps** back up, and **pacing** (starts one interval
  apart while interactive calls are about, for a long bulk run, and after a short pause).
- ``_line.py``: the **line** of one pool: interactive calls before bulk ones, round-robin
  over fairness keys, first come first served within a key.
- ``_quota.py``: the value objects a user holds: :class:`SharedQuota`, :class:`Quota`,
  :class:`PoolQuota`, :class:`PoolStats`, :class:`SchedulerStats`.
- ``_shared.py``: the same rule for every process on one account, over its state in
  Redis, and the fallback while Redis does not answer.
- ``_pool.py``: the **pools** (``default``, ``expensive``, ``unmetered``), each a line, caps
  and a rule, and the **scheduler** that lets waiters through over all of them and tells
  what happens on the client's event stream.

The seam the call path uses::

    scheduler = Scheduler(rate_limits, max_concurrency=n, clock=clock, emit=events,
                          shared=shared_quota_or_None, account=account)
    permit = await scheduler.pool("default").acquire(priority, fairness_key)
    wait = permit.rate_limited(retry_after)  # a 429: the seconds this call waits
    permit.release(sent=True)                # sent=False: nothing reached the server

and the flow of one 429, in one direction: the call tells its permit; the pool hands it to
its rule, which holds new starts until the round in flight is answered, then gives a
verdict; the pool applies it (or, with a shared quota, to the state in Redis); the call waits what
its permit said, and asks for a turn again.
"""

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
