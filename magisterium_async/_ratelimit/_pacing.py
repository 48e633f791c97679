"""Pacing: a pool's starts spread over the window while fairness keys wait in a backlog.

Pure: counts and times in, a time out; the pool asks it (through its limiter) and obeys.

The log alone lets a window's N starts go in one burst as the window opens: the best for
a lone job, and the worst for a user who arrives just after the burst, who waits for the
next window although the line puts their key next. So while the line holds calls with a
fairness key (the caller serves many users) and more calls wait than the log has free
starts (a burst would empty the window), consecutive starts are at least one *quota
interval* apart (the window over the starts it allows now). A backlog then costs nothing
in throughput (still N starts a window), and a newcomer's first call waits one gap at most.
Calls without a fairness key are never paced.
"""

from __future__ import annotations

import math

from magisterium_async._ratelimit._log import StartLog
from magisterium_async._ratelimit._tuning import PACE_INTERVALS

__all__ = ["paced_start", "paces"]


def paces(keyed: bool, waiting: int, free: int) -> bool:
    """Whether starts are paced: calls with a fairness key wait (``keyed``), and more calls
    wait (``waiting``) than the log has free starts (``free``)."""
    return keyed and waiting > free


def paced_start(
    log: StartLog, now: float, *, waiting: int, rate: int, window: float, span: float
) -> float:
    """When pacing lets the next start happen (``-inf``: no pacing now), for ``waiting``
    calls with a fairness key among them, at ``rate`` starts per ``window`` seconds, the
    log counting starts over ``span`` seconds (the window and the safety margin).

    The free starts are the rate less the starts in the last span; the next paced start is
    :data:`~._tuning.PACE_INTERVALS` quota intervals after the last start.
    """
    if not log:
        return -math.inf
    at = next(reversed(log)).time + PACE_INTERVALS * window / rate
    if at <= now or not paces(True, waiting, rate - log.started(now - span, now)):
        return -math.inf  # the next start may go now (the window is counted only if not)
    return at
