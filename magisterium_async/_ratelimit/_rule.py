"""The rate rule: what a pool's rate should be, from its starts and what the server said.

Pure: starts and outcomes (a :class:`~._log.StartLog`) and times come in, a rate goes out.
It has no clock, no I/O and no lock, so it runs the same in one process or, with its
:class:`RuleState` kept in Redis, for every process on a token (``_shared.py``).

What it does, verdict by verdict (the verdicts are the judge's, ``_judge.py``):

- *proven* (a window ran out): the rate goes down to what the server took of our starts in
  that window (all of it, when nobody else spends the quota; none of them, or a window
  that began before any start of ours: others may have spent it, the quota is busy now,
  its size unknown, and the rate stays), and stays there until the first of the server's
  windows to open once its windows, the one that ran out counted, have taken
  :data:`~._tuning.STARTS_PER_STEP_UP` starts at that rate;
- then it *steps up*: one start more than the server allowed, or, once one of the server's
  windows took more than it allowed before (whoever shared the quota stopped), twice the
  rate, back toward the configured one, or at once what the server's window before the
  lowering took of ours, if more (the quota it had shown came back);
- *step up refused* (a 429 while stepping up): back to what the server allowed, and the
  next step up waits twice as long (up to :data:`~._tuning.MAX_STEP_UP_DOUBLINGS` times).

A step up begins as one of the server's windows opens (its phase is known from the ends
its 429s gave): its starts then have one whole window to show in, and one window proves
it. Begun anywhere else, they straddle two windows, neither holds more than the server
allowed before, and the proof waits for two (four processes sharing a quota recovered
from the shift scenario 0.7 s later in half the runs). The price: a step up that finds the
quota unchanged is refused for certain, where one begun mid-window sometimes slipped
through unproven (one process, told 1000/s against 10/s: 16 429s for 300, not 12).

And where starts go within a window, *pacing*: the log alone lets a window's N starts go
in one burst as the window opens: the best for a lone job, and the worst for whoever
arrives just after the burst (a person's interactive call, a new fairness key's first
call), who waits for the next window although the line puts them next. So consecutive
starts are at least one *quota interval* apart (the window over the starts it allows
now), :meth:`RateRule.paced_start`:

- bulk starts, while the pool is *contended*: a call a burst would hold back (an
  interactive one, or one with a fairness key) arrived within the last
  :data:`~._tuning.PACE_QUIET_WINDOWS` windows, or the pool's run of starts has lasted
  :data:`~._tuning.PACE_RUN_WINDOWS` (a harvest: the limiter says so);
- every start, while the line holds calls with a fairness key (the caller serves many
  users) and more calls wait than the log has free starts (a burst would empty the
  window).

Paced, a backlog costs nothing in throughput (still N starts a span), and whoever arrives
waits one gap at most. A short bulk job alone, with nobody else seen for a while, bursts
as the log allows; a bulk job that ends while paced ends up to one window later than a
burst would.
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass

from magisterium_async._ratelimit._judge import Verdict
from magisterium_async._ratelimit._log import Start, StartLog
from magisterium_async._ratelimit._tuning import (
    KEEP_SPANS,
    MAX_STEP_UP_DOUBLINGS,
    PACE_INTERVALS,
    PACE_QUIET_WINDOWS,
    RTT_CAP_SHARE,
    STARTS_PER_STEP_UP,
    WHOLE_SECOND_BLUR,
)

__all__ = ["RateRule", "RuleState", "contended", "keeps_a_start_free", "paces"]

logger = logging.getLogger("magisterium_async.ratelimit")


@dataclass
class RuleState:
    """What the rule has learned; small enough to keep in Redis.

    ``rate``: starts per window now in force; ``allowed``: what the server took in its
    window at the last 429; ``step_up_at``: when the next step up is due (``inf``: at the
    configured rate); ``refused_tries``: step ups refused in a row; ``phase``: where the
    server's windows end, modulo one window (``None``: unknown); ``rtt``: the round trip of
    the last request refused; ``before``: what the server's window before a proven one took
    of ours (a step up the server confirmed goes straight back to it; ``0``: none).
    """

    rate: int
    allowed: int
    step_up_at: float = math.inf
    refused_tries: int = 0
    phase: float | None = None
    rtt: float = 0.0
    before: int = 0


class RateRule:
    """The rule for one pool of ``limit`` starts per ``window`` seconds (``period``: the
    unit ``rate`` is reported in). ``adaptive=False``: the rate never moves."""

    __slots__ = ("adaptive", "limit", "margin", "name", "period", "state", "window")

    def __init__(
        self,
        name: str,
        limit: int,
        window: float,
        margin: float,
        *,
        period: float | None = None,
        adaptive: bool = True,
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self.name = name
        self.limit = limit
        self.window = window
        self.margin = margin
        self.period = window if period is None else period
        self.adaptive = adaptive
        self.state = RuleState(rate=limit, allowed=limit)

    # What the pool asks ----------------------------------------------------------------

    @property
    def rate(self) -> float:
        """Requests per ``period`` now in force."""
        return self.state.rate * self.period / self.window

    @property
    def span(self) -> float:
        """The window plus the safety margin: the log's horizon."""
        return self.window + self.margin

    @property
    def stepping_up(self) -> bool:
        """Whether the rate is above what the server allowed last: a 429 now answers that
        step up."""
        return self.state.rate > self.state.allowed

    def next_start(self, log: StartLog, now: float) -> float:
        """When the next start may happen (``<= now``: now); steps up when one is due and
        the log holds the pool back."""
        log.prune(now - KEEP_SPANS * self.span)
        state = self.state
        allows = log.allows(self.limit, state.rate, self.span)
        if state.rate < self.limit:
            if state.step_up_at <= now < allows:
                self.step_up(log, now)
                allows = log.allows(self.limit, state.rate, self.span)
            return min(allows, state.step_up_at)
        return allows

    def paced_start(
        self,
        log: StartLog,
        now: float,
        waiting: int,
        *,
        keyed: bool = True,
        bulk: bool = False,
        contended_at: float = -math.inf,
    ) -> float:
        """When pacing lets the next start happen (``-inf``: not paced now).

        Args:
            log: the pool's starts.
            now: the time.
            waiting: how many calls wait in line.
            keyed: whether calls with a fairness key are among them.
            bulk: whether the next start is a bulk call's.
            contended_at: when a call a burst would hold back last arrived (``-inf``:
                never); see :func:`contended`.

        The free starts are the rate less the starts in the last span; the next paced start
        is :data:`~._tuning.PACE_INTERVALS` quota intervals after the last start.
        """
        if not log:
            return -math.inf
        rate = self.state.rate
        interval = self.window / rate
        at = next(reversed(log)).time + PACE_INTERVALS * interval
        if bulk and contended(contended_at, now, self.window):
            at = max(at, keeps_a_start_free(log, rate, interval))
            return at if at > now else -math.inf
        if at <= now:
            return -math.inf  # the next start may go now (the window is counted only if not)
        if paces(keyed, waiting, rate - log.started(now - self.span, now)):
            return at
        return -math.inf

    # What the judge decided ------------------------------------------------------------

    def learn(self, log: StartLog, verdict: Verdict) -> None:
        """Apply one of the judge's verdicts over ``log``: the one mapping of verdicts to
        what the rule does (a local pool's and a shared one's alike)."""
        kind, start = verdict.kind, verdict.start
        if kind == "suspect":
            self.suspect(start, verdict.at, verdict.window_end)
        elif kind == "step_up_refused":
            self.step_up_refused(start, verdict.at, verdict.window_end)
        elif kind in ("proven", "expired"):
            self.proven(log, start, verdict.at, verdict.window_end)

    def suspect(self, start: Start, now: float, window_end: float) -> None:
        """An isolated 429: nothing changes but where the server's window ends, and the
        round trip that measures it."""
        if self.adaptive:
            self._locate(start, now, window_end)

    def step_up_refused(self, start: Start, now: float, window_end: float) -> None:
        """A 429 while stepping up: back to what the server allowed; wait longer next time."""
        if not self.adaptive:
            return
        self._locate(start, now, window_end)
        state = self.state
        state.refused_tries = min(state.refused_tries + 1, MAX_STEP_UP_DOUBLINGS)
        state.step_up_at = self._window_start(now + self._cautious())
        self._set(state.allowed, "a step up was refused")

    def proven(self, log: StartLog, start: Start, now: float, window_end: float) -> None:
        """A window ran out: the rate goes down to what the server took of ours in it."""
        if not self.adaptive:
            return
        self._locate(start, now, window_end)
        state = self.state
        # The server's window began one window before it ends, give or take the request's
        # round trip (it counts on arrival, and said where its window ends before the way
        # back) and the margin.
        began = window_end - self.window
        slack = self.margin + state.rtt
        accepted = log.accepted(began - slack, now)
        seen = log.started(began - self.window - slack, began + slack) > 0
        if (accepted == 0 or not seen) and began <= now + WHOLE_SECOND_BLUR:
            # None of ours got into that window, or none of ours was there as it began:
            # others may have spent it (all, or the part before ours came). The quota is
            # busy now (the pause says so); its size this says nothing of. (A window end
            # more than a window off, whole seconds aside, is a longer window's than ours:
            # none of ours could count, and the rate goes down as before.)
            logger.debug("pool %s: a window others had spent; the rate stays", self.name)
            return
        state.refused_tries = 0
        rate = max(1, min(accepted, state.rate - 1))
        # What the server's window before took of ours: the quota it had shown, to go
        # back to once a step up finds it back (a told rate no window took is not one).
        took_before = log.accepted(began - self.window - slack, began - slack)
        state.before = max(state.before, min(took_before, state.rate))
        state.allowed = rate
        state.step_up_at = max(self._window_start(now + self._cautious()), window_end)
        if rate < state.rate:
            self._set(rate, "rate limited by the server")

    # Inside the rule -------------------------------------------------------------------

    def step_up(self, log: StartLog, now: float) -> None:
        """Try a higher rate: above what the server allowed only once one of its windows
        (or two together, more than twice) took more than that; else one more than it
        allowed last."""
        state, window = self.state, self.window
        if state.rate > state.allowed:
            # Passed only once one window of the server's (its phase known from the ends its
            # 429s gave) took more than it allowed before: not by luck with the phase.
            # The last window start at or before now. Checks fall on window starts: one
            # taken a whole window early by a float's rounding would make the next check
            # due now, and "now" the answer to every start the log holds back.
            end = self._window_start(now)
            # The window's end as measured is late by the way back; starts reach the server
            # late by the way there: a round trip (and the margin) before it, they surely
            # fell in.
            last = end - state.rtt - self.margin
            took = log.accepted(end - window, last)
            # Or the two windows together took more than twice as much (one of them did):
            # evenly spaced, the stepped-up starts fit a trimmed window only at some phases,
            # two windows at nearly every phase, so the proof does not wait on the phase.
            took_two = log.accepted(end - 2 * window, last)
            if took <= state.allowed and took_two <= 2 * state.allowed:
                state.step_up_at = end + window
                return
            # Whoever shared the quota stopped, or it grew back.
            state.allowed = max(took, math.ceil(took_two / 2))
            state.refused_tries = 0
            # Back to the rate a window lowered, at once: the quota it had came back.
            new = max(2 * state.rate, state.before)
        elif state.rate < state.allowed:
            new = min(state.allowed, 2 * state.rate)
        else:
            new = state.rate + 1  # one more than the server allowed last time
        state.step_up_at = now + window
        self._set(min(new, self.limit), "stepping up")

    def _locate(self, start: Start, now: float, window_end: float) -> None:
        self.state.phase = window_end % self.window
        self.state.rtt = min(now - start.time, RTT_CAP_SHARE * self.window)

    def _window_start(self, t: float) -> float:
        """The last of the server's window starts at or before ``t`` (``t`` itself while
        its phase is unknown). A step up that begins there has one whole window of the
        server's to show itself in: begun anywhere else, its starts straddle two windows,
        none holds more than the server allowed before, and the proof waits for two."""
        phase = self.state.phase
        if phase is None:
            return t
        # A t on a window start, give or take a float's rounding, is that start.
        return phase + math.floor((t - phase) / self.window + 1e-9) * self.window

    def _cautious(self) -> float:
        state = self.state
        windows = math.ceil(STARTS_PER_STEP_UP / state.allowed) << state.refused_tries
        return windows * self.window

    def _set(self, rate: int, why: str) -> None:
        state = self.state
        old, state.rate = state.rate, rate
        if rate >= self.limit:
            state.allowed = self.limit
            state.before = 0
            state.step_up_at = math.inf
        logger.info("pool %s rate %d -> %d per %g s (%s)", self.name, old, rate, self.window, why)

    def __repr__(self) -> str:
        return f"<RateRule {self.name} {self.state.rate}/{self.window:g}s>"


def contended(since: float, now: float, window: float) -> bool:
    """Whether bulk starts are paced at ``now``: a call a burst would hold back (an
    interactive one, or one with a fairness key) arrived at ``since``, less than
    :data:`~._tuning.PACE_QUIET_WINDOWS` windows of ``window`` seconds ago."""
    return now < since + PACE_QUIET_WINDOWS * window


def keeps_a_start_free(log: StartLog, rate: int, interval: float) -> float:
    """When a paced start leaves the log a start free within one ``interval`` after it:
    once it and the ``rate - 1`` newest starts span ``rate - 1`` intervals (``-inf``: at
    once). Pacing spaces bulk starts, but starts that went together (the burst before
    anyone contended, interactive calls let through at once) leave the span as one; without
    this, the starts paced after them would fill the log until those leave, and a call
    arriving meanwhile would wait that long."""
    if rate < 2 or len(log) < rate - 1:
        return -math.inf
    oldest = next(itertools.islice(reversed(log), rate - 2, None))
    return oldest.time + (rate - 1) * interval


def paces(keyed: bool, waiting: int, free: int) -> bool:
    """Whether starts are paced: calls with a fairness key wait (``keyed``), and more calls
    wait (``waiting``) than the log has free starts (``free``)."""
    return keyed and waiting > free
