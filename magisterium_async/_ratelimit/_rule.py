"""The rate rule of one pool: when the next request may start, and what a 429 teaches.

Pure: times and outcomes come in, decisions go out; no clock, no I/O, no task. The pool
(``_pool.py``) applies it on the client's clock; with a shared quota (``_shared.py``) the
log and what the rule learned live in Redis, and this rule decides over them.

- **The log.** A start may go at ``t`` only if fewer than ``rate`` starts lie in
  ``(t - span, t]``, where the span is the quota's window plus a safety margin against
  network jitter. A burst of ``rate`` on an idle pool goes at once, and no interval of one
  window ever holds more, however the server counts (fixed windows, a sliding window, a
  token bucket). A start the server refused, or one that never reached it, leaves the log:
  it spent nothing.
- **A round.** A 429 is judged only once every request in flight when it came has been
  answered (at most one round trip; nothing new starts meanwhile). Then the server's
  window *ran out* if at least :data:`ROUND_SHARE` of our starts in the window its 429s
  name were refused: a window that runs out refuses all that come after its last
  admission, random 429s (a proxy's, a fluke) are a few of many. The pool's first round
  is judged the same way once its first answer is back, so that a client told far more
  than the server allows sends one round, not a window's worth, before it knows.
- **Learning.** A window that ran out pauses the pool to its end (``retryAfter``) and
  lowers the rate to what the server took of ours in it. None of ours in it: someone else
  spent the quota (the same user's MCP calls), so the pause alone, and the rate stays. A
  few refused of many lower the rate by as many, and pause nothing.
- **Stepping back up.** :data:`FIRST_STEP` windows after a lowering the rate tries one
  start more; once that is taken, straight back to what the window before the lowering
  took (the quota it showed has come back), else one more each window, up to the
  configured rate. A 429 while stepping up sends it back to the last rate the server took,
  and the next try waits twice as long (up to :data:`MAX_BACKOFF` windows).
- **Pacing.** Starts go one *interval* (the window over the rate) apart rather than in a
  window's burst for a window after a short pause (a server whose quota comes back bit by
  bit, a token bucket, takes them only so), and bulk starts do while
  the pool is *contended*: an interactive call (or one with a fairness key) arrived
  within :data:`QUIET` windows, or the bulk run has gone on for :data:`RUN` windows (a
  harvest). Whoever arrives then waits one interval, not a window; a short batch alone
  still bursts. While contended, bulk also leaves the span's last free start until the
  next is an interval away: after a burst, or calls that came close together, the log
  is lumpy, and a person's call would otherwise wait for its gap.

Each constant says why it has its value; nothing else here holds a bare number.
"""

from __future__ import annotations

import contextlib
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "FIRST_STEP",
    "MAX_BACKOFF",
    "QUIET",
    "REFILL",
    "ROUND_SHARE",
    "RUN",
    "Rule",
    "Start",
    "Verdict",
]

ROUND_SHARE = 1 / 3
"""A round with at least this share refused ran a window out. A window that runs out
refuses every request after the last it admits (told 1.5x the server's rate: a third of a
round); random 429s refuse a few in a hundred, and a round of 16 draws six of them once in
a few hundred rounds even at one in ten."""

FIRST_STEP = 2.0
"""Windows after a lowering before the first step back up: another party that spends the
quota in bursts is seen in one window of two, and a try in the very next would be refused."""

MAX_BACKOFF = 4
"""The most a refused step up multiplies the wait for the next one (in windows): a limit
that stays put costs a 429 every few windows at most."""

REFILL = 0.25
"""A pause shorter than this share of the window says the quota comes back bit by bit
(a token bucket: its wait is one interval): starts are paced for a window after it. A
longer one ends as a window opens whole (fixed and sliding windows): a burst then."""

QUIET = 2.0
"""Windows bulk starts stay paced after the last interactive (or keyed) call arrived."""

RUN = 2.0
"""Windows a run of bulk starts goes on before it is paced: a batch of up to two windows'
worth bursts (it finishes soonest); a harvest is paced, so that a person's first call
waits one interval, not a window."""


@dataclass(eq=False)
class Start:
    """One request let through: its ``time``, its name in a shared log (``ticket``), and
    what became of it."""

    time: float
    ticket: str | None = None
    outcome: Literal["out", "ok", "refused", "unsent"] = "out"


@dataclass(frozen=True)
class Verdict:
    """What a round of answers taught: a window ``ran_out`` (``end``: where the earliest
    of its 429s said it ends, ``until``: the latest; ``rtt``: the longest of their round
    trips; ``at``: when it was judged); the pool ``fell_short`` (``refused``: a few of a
    round: the server takes a little less than the rate, or they were random); or a
    ``step_refused`` (``end`` = ``until``: where its window ends)."""

    kind: Literal["ran_out", "fell_short", "step_refused"]
    at: float
    end: float
    until: float
    rtt: float = 0.0
    refused: int = 1


@dataclass(eq=False)
class _Round:
    """Requests whose answers are waited for before a 429 is judged: those in flight
    when it came (for the pool's first round: every start until the first answer)."""

    pending: set[Start]
    open: bool = False  # the pool's first round: it takes every start until an answer
    refused: int = 0
    ends: list[float] = field(default_factory=list)
    rtt: float = 0.0


class Rule:
    """One pool of ``limit`` starts per ``window`` seconds (``margin``: added to the span).

    ``adaptive=False``: the rate never moves (a 429 still pauses the pool).
    """

    def __init__(self, limit: int, window: float, margin: float, *, adaptive: bool = True) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self.limit, self.window, self.margin = limit, window, margin
        self.span = window + margin
        self.adaptive = adaptive
        self.log: deque[Start] = deque()
        self.refusals: deque[float] = deque()  # when the starts refused lately started
        self.rate = self.proven = limit  # allowed now; the most the server took lately
        self.before = 0  # what the server took of ours in the window before a lowering
        self.backoff, self.step_at, self.stepped_at = 1, math.inf, -math.inf
        self.paused_until = self.recovering_until = -math.inf
        self._round: _Round | None = None
        self._first = True  # the pool's first round is still to come
        self.settled = False  # its first round has been judged
        self.contended_at = self.run_since = self.last_start = -math.inf

    # Admission --------------------------------------------------------------------------

    @property
    def held(self) -> bool:
        """Whether starts wait for a round's answers."""
        return self._round is not None and not self._round.open

    def next_start(self, now: float, *, paced: bool = False) -> float:
        """When the next start may go (``<= now``: now; ``inf``: once a round is judged)."""
        if self.held:
            return math.inf
        log, refusals, keep = self.log, self.refusals, now - 2 * self.span
        while log and log[0].time <= keep and log[0].outcome != "out":
            log.popleft()  # kept two spans: admission looks one back, learning one more
        while refusals and refusals[0] <= keep:
            refusals.popleft()
        at = max(self.paused_until, self._log_free())
        if at > now and self.rate < self.limit and now >= self.step_at:
            self._step_up(now)
            at = max(self.paused_until, self._log_free())
        interval = self.window / self.rate
        contended = paced and self.contended(now)
        if log and (contended or now < self.recovering_until):
            at = max(at, log[-1].time + interval)
        if contended and 1 < self.rate <= len(log) + 1:  # the last free start kept
            at = max(at, log[1 - self.rate].time + self.span - interval)
        return at

    def contended(self, now: float) -> bool:
        """Whether bulk starts are paced now (see the module's docstring)."""
        running = now - self.last_start <= 2 * self.span  # a run of starts goes on
        return now < self.contended_at + QUIET * self.window or (
            running and now - self.run_since >= RUN * self.window
        )

    def start(self, now: float, ticket: str | None = None) -> Start:
        """A request starts now (:meth:`next_start` allowed it)."""
        start = Start(now, ticket)
        if now - self.last_start > 2 * self.span:
            self.run_since = now  # a new run of starts
        self.last_start = now
        self.log.append(start)
        if self._first:
            self._first = False
            self._round = _Round(set(), open=True)
        if self._round is not None and self._round.open:
            self._round.pending.add(start)
        return start

    def _log_free(self) -> float:
        log = self.log
        return log[-self.rate].time + self.span if len(log) >= self.rate else -math.inf

    # Outcomes: each returns what the pool must apply (a Verdict), if anything ------------

    def answered(self, start: Start, now: float) -> Verdict | None:
        """``start`` was answered without a 429."""
        start.outcome = "ok"
        return self._settle(start, now)

    def unsent(self, start: Start, now: float) -> Verdict | None:
        """``start`` never reached the server: it leaves the log."""
        start.outcome = "unsent"
        self._forget(start)
        return self._settle(start, now)

    def refused(self, start: Start, now: float, wait: float) -> Verdict | None:
        """``start`` got a 429 saying its window ends ``wait`` seconds from now."""
        start.outcome = "refused"
        self._forget(start)
        self.refusals.append(start.time)
        end = now + wait
        if self._round is None and now < self.paused_until:
            return None  # the pool is paused already: this only says so again
        if self.rate > self.proven:
            return Verdict("step_refused", now, end, end)
        if self._round is None:  # judged once what is in flight now is answered
            self._round = _Round({s for s in self.log if s.outcome == "out"})
        round_ = self._round
        round_.open = False
        round_.refused += 1
        round_.ends.append(end)
        round_.rtt = max(round_.rtt, now - start.time)
        return self._settle(start, now)

    def _settle(self, start: Start, now: float) -> Verdict | None:
        round_ = self._round
        if round_ is None:
            return None
        round_.pending.discard(start)
        round_.open = False  # the first answer closes the first round
        if round_.pending:
            return None
        self._round = None
        self.settled = True
        if not round_.refused:
            return None
        end = min(round_.ends)
        # Judged over every start of ours in the window the 429s name, not the round
        # alone: a window that ran out refused all we sent after its last admission,
        # while random 429s are a few of all we sent in it.
        began = self._began(end, round_.rtt)
        refused = sum(1 for t in self.refusals if t > began)
        few = refused < ROUND_SHARE * (refused + self._took(began, math.inf))
        kind: Literal["ran_out", "fell_short"] = "fell_short" if few else "ran_out"
        return Verdict(kind, now, end, max(round_.ends), round_.rtt, round_.refused)

    def _began(self, end: float, rtt: float) -> float:
        """Where the server's window that ends at ``end`` began, on our clock: one window
        before, less our requests' way there (it counts arrivals, and measured its wait
        as its answer left)."""
        return end - self.window - rtt - self.margin

    def _forget(self, start: Start) -> None:
        with contextlib.suppress(ValueError):  # aged out already
            self.log.remove(start)

    # Learning (a local pool's, and a shared one's over its state in Redis) -------------

    def apply(self, verdict: Verdict) -> None:
        """What ``verdict`` changes: the pause, and (adaptive) the rate."""
        if verdict.kind != "fell_short":
            self.paused_until = max(self.paused_until, verdict.until)
            if verdict.until - verdict.at < REFILL * self.window:
                # A short wait: the quota comes back bit by bit (a token bucket), and a
                # burst at its end would find one start's worth. Paced for a window.
                self.recovering_until = self.paused_until + self.window
        if not self.adaptive:
            return
        if verdict.kind == "step_refused":
            if self.rate > self.proven:  # back to what the server took; wait longer next time
                if self.rate > self.proven + 1:
                    self.before = self.proven  # the jump back was refused: not again
                self.rate = self.proven
                self.backoff = min(2 * self.backoff, MAX_BACKOFF)
                self.step_at = verdict.until + self.backoff * self.window
            return
        began = self._began(verdict.end, verdict.rtt)
        took = self._took(began, math.inf)
        if verdict.kind == "fell_short":
            # A few refused of many: the evidence is for as few starts less (random 429s
            # name windows of their own, and say nothing of the quota).
            took = self.rate - verdict.refused
        if 1 <= took < self.rate:
            # What the window before took is where a step up goes back to at once, once
            # one start more is taken: the quota it showed has come back.
            self.before = max(took, self._took(began - self.span, began))
            self.rate = self.proven = took
            if verdict.at < self.stepped_at + 2 * FIRST_STEP * self.window:
                # Lowered soon after a step up: that step was one too many, taken for a
                # while only out of slack (a token bucket's): wait longer next time.
                self.backoff = min(2 * self.backoff, MAX_BACKOFF)
            self.step_at = verdict.until + max(FIRST_STEP, self.backoff) * self.window

    def _took(self, after: float, until: float) -> int:
        """How many of ours the server took that started in ``(after, until]``."""
        return sum(1 for s in self.log if s.outcome == "ok" and after < s.time <= until)

    def _step_up(self, now: float) -> None:
        """The time for a step up has come and no 429 answered the last one: one start
        more, or straight back to what the window before the lowering took once one
        more was taken; up to the configured rate."""
        stepped = self.rate > self.proven
        self.proven, self.stepped_at = self.rate, now
        self.rate = min(self.limit, max(self.rate + 1, self.before if stepped else 0))
        # Back toward a rate the server took before, a window a step; beyond it, where
        # none was taken, as long a wait as after a lowering (a token bucket's slack
        # takes one start more for a while).
        self.step_at = now + (1 if self.rate <= self.before else FIRST_STEP) * self.window
        if self.rate >= self.limit:
            self.proven, self.backoff, self.step_at = self.limit, 1, math.inf

    def usage(self, now: float) -> tuple[int, int, float]:
        """What the log leaves at ``now``, changing nothing: the starts in the last span,
        how many more may start now, and when the next may."""
        used = sum(1 for s in self.log if s.time > now - self.span)
        at = max(self.paused_until, self._log_free(), now)
        return used, 0 if at > now else max(self.rate - used, 0), at
