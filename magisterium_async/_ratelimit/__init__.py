"""The rate-limit engine: every call waits here for its quota, and learns from 429s.

Terms, each defined before use:

- **pool**: one quota of the service. ``default`` (every skill but ``catholic_qa``),
  ``expensive`` (``catholic_qa``), and ``unmetered`` (``tasks/get``, ``tasks/cancel``, the
  agent card): only the client's ``max_concurrency`` applies there.
- **start**: the moment a request is let through. The **log** (``_log.py``) keeps each
  pool's starts with their outcome; the **window** is the quota's period, the **span** the
  window plus a safety **margin** against network jitter. The log never lets more than N
  starts into one span.
- **429** and its **wait** (``retryAfter``): ``now + wait`` is where the server says its
  window ends, the **window end**.
- **verdict**: what the **judge** (``_judge.py``, pure) makes of a 429: ``suspect`` (one
  429 alone; the next start goes alone as the pool's **check**), ``proven`` (a window ran
  out; the pool **pauses** to its end), ``step_up_refused``, and a few more.
- **rate**: the starts per window the **rule** (``_rule.py``, pure) allows now; it goes
  down to what the server took when a window is proven, and **steps up** toward the
  configured rate later. Its constants live in one table, ``_tuning.py``.
- **limiter**: the seam between a pool and its quota (``_limiter.py``): the local
  :class:`WindowLimiter` (log + rule), or a shared one. A **remote gate** is another
  party's leave for each start; Redis is one (``_shared.py``, its keys and scripts in
  ``_scripts.py``). A pool asks its gate for **admissions** on behalf of its line, one at a
  time.
- **line** (``_lines.py``): who waits, and whose turn is next: **interactive** calls before
  **bulk** ones; round-robin over **fairness keys** (a key that arrives goes ahead of the
  key that had the last turn); first come first served within a key.
- **pacing** (part of the rule): consecutive starts at least one **quota interval** (the
  window over the rate) apart instead of a window's burst, so whoever arrives waits one
  interval or so, not a window: bulk starts while the pool is **contended** (an
  interactive call, or one with a fairness key, arrived within the last few windows; with
  a shared quota, in any process) or its run of starts has lasted a few windows (a
  harvest), and every start while calls with a fairness key wait, more than the log has
  free starts. A short bulk job alone bursts as the log allows.
- **first round**: what a metered pool starts before its first answer comes back; the pool
  holds further starts until that round is answered.
- **pool** and **scheduler** (``_scheduler.py``): a pool is one quota's line, caps, pause,
  judge, first round and limiter; a request holds a **permit** while it runs. The
  scheduler makes the pools, hands each what they share (the client-wide cap) and two
  callbacks, and decides whose turn is next over all of them, with the local or the shared
  limiters.

Dependencies point one way, as listed: the pure parts (``_tuning``, ``_log``, ``_judge``,
``_rule``), then the line and the limiter seams, the shared quota (``_scripts``,
``_shared``), and the pools with their scheduler on top. Nothing imports a module above it.

The flow of one 429, in one direction::

    transport -> 429 -> Permit.rate_limited(wait) -> the call's delay
              -> Pool.rate_limited  -> Judge.on_429 -> [Verdict, ...]
              -> Pool._apply(verdict): pause the pool (proven, late, step up refused)
              -> Limiter.learn(verdict) -> the rule: the rate and the next step up
                 (shared: the same rule, applied to the log and state in Redis)
              <- how long the pool is paused: the call waits that at least

and of one call: ``Pool.acquire()`` -> the line -> ``Scheduler.pump`` (cap, pause, check,
first round, ``Limiter.next_start``, pacing, the remote gate) -> ``Permit`` -> the request ->
``Permit.release()`` -> the judge and the gate hear the outcome -> ``pump`` again.
"""

from magisterium_async._config import Priority
from magisterium_async._ratelimit._judge import Judge, Verdict, VerdictKind
from magisterium_async._ratelimit._limiter import Limiter, RemoteGate, WindowLimiter
from magisterium_async._ratelimit._lines import PRIORITIES, WaitingLine
from magisterium_async._ratelimit._log import Start, StartLog
from magisterium_async._ratelimit._quota import PoolQuota, Quota, SharedQuota
from magisterium_async._ratelimit._rule import RateRule, RuleState
from magisterium_async._ratelimit._scheduler import (
    Permit,
    Pool,
    PoolStats,
    Scheduler,
    SchedulerStats,
)
from magisterium_async._ratelimit._shared import SharedLimiter, SharedPool

__all__ = [
    "PRIORITIES",
    "Judge",
    "Limiter",
    "Permit",
    "Pool",
    "PoolQuota",
    "PoolStats",
    "Priority",
    "Quota",
    "RateRule",
    "RemoteGate",
    "RuleState",
    "Scheduler",
    "SchedulerStats",
    "SharedLimiter",
    "SharedPool",
    "SharedQuota",
    "Start",
    "StartLog",
    "Verdict",
    "VerdictKind",
    "WaitingLine",
    "WindowLimiter",
]
