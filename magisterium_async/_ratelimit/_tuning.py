"""Every tuning constant of the rate-limit engine, in one table, each with its reason.

The rule (``_rule.py``), the judge (``_judge.py``), the pool (``_scheduler.py``) and the shared
quota (``_shared.py``) read them from here by name; nothing else in the engine holds a bare
number that tunes behaviour.
"""

from __future__ import annotations

__all__ = [
    "AGREE_SHARE",
    "KEEP_SPANS",
    "LINE_GRACE",
    "LINE_POLL",
    "LINE_RECOUNT",
    "LONG_QUOTA_WAIT",
    "MAX_STEP_UP_DOUBLINGS",
    "PACE_INTERVALS",
    "PACE_QUIET_WINDOWS",
    "PACE_RUN_WINDOWS",
    "PROOF_429S",
    "PROOF_429S_WHOLE_SECONDS",
    "ROUND_HOLD_ROUND_TRIPS",
    "RTT_CAP_SHARE",
    "SHARED_ROUND_HOLD",
    "STARTS_PER_STEP_UP",
    "WHOLE_SECOND_BLUR",
]

# | name | value | what it does, and why this value |
# |---|---|---|
# | STARTS_PER_STEP_UP | 10 | A lowered pool tries one start more than the server allowed after
# |   |   | this many of the server's starts (the window that ran out counted, so one window at
# |   |   | least), as the next of its windows opens: a refused try costs one 429 in this many at
# |   |   | most, and a limit that came back is found within a few windows. |
STARTS_PER_STEP_UP = 10
# | MAX_STEP_UP_DOUBLINGS | 2 | Each step up refused in a row waits twice as long, this many
# |   |   | times at most (4x): a limit that stays put costs fewer 429s. |
MAX_STEP_UP_DOUBLINGS = 2
# | RTT_CAP_SHARE | 0.1 | The round trip the rule allows for where a window began, as a
# |   |   | share of the window: a stalled request must not shift the whole window. |
RTT_CAP_SHARE = 0.1
# | AGREE_SHARE | 0.5 | Two 429s point at one window end when their ends lie closer than
# |   |   | this share of the time between them: random 429s with a fixed wait move with
# |   |   | the clock, a real window's end stands still. |
AGREE_SHARE = 0.5
# | WHOLE_SECOND_BLUR | 1.0 | Waits in whole seconds (the service rounds up) blur where a
# |   |   | window ends by up to one second. |
WHOLE_SECOND_BLUR = 1.0
# | PROOF_429S | 2 | 429s in a row pointing at one window end that prove it ran out. |
PROOF_429S = 2
# | PROOF_429S_WHOLE_SECONDS | 3 | The same, when the waits are whole seconds (blurred). |
PROOF_429S_WHOLE_SECONDS = 3
# | ROUND_HOLD_ROUND_TRIPS | 3 | How long the first round holds further starts back, in round
# |   |   | trips of the request that answered first: one slow request must not stall a pool. |
ROUND_HOLD_ROUND_TRIPS = 3
# | KEEP_SPANS | 2 | How many spans of starts the log keeps: admission needs one, a step up
# |   |   | looks one window further back. |
KEEP_SPANS = 2
# | PACE_INTERVALS | 1 | While starts are paced (``RateRule.paced_start``), consecutive
# |   |   | starts are at least this many quota intervals (window / rate) apart: one keeps the
# |   |   | full rate (N starts a window still go), and a call that arrives waits one gap at
# |   |   | most; less lets bursts back, more wastes quota. |
PACE_INTERVALS = 1.0
# | PACE_QUIET_WINDOWS | 5 | Bulk starts stay paced this many windows after the last call
# |   |   | a burst would hold back (an interactive one, or one with a fairness key): pacing
# |   |   | costs a long bulk job nothing (N starts a span still go) and a job that ends
# |   |   | meanwhile one window at most; bursting again costs the next such call up to one
# |   |   | window's wait. Five windows (five minutes at the Pro quota) span the gaps between
# |   |   | an orchestrator's users; a bulk job alone bursts again after them. |
PACE_QUIET_WINDOWS = 5.0
# | PACE_RUN_WINDOWS | 4 | A bulk run (starts less than two spans apart) at the full rate
# |   |   | that has lasted this many windows is paced as if contended, while it runs: a
# |   |   | harvest, whose next window would otherwise go in a burst and hold a person's first
# |   |   | call back for up to a window. Four windows let a batch of up to four windows'
# |   |   | worth (60 searches at the Pro quota) burst as before; a longer run ends up to one
# |   |   | window later (its last window spread), and gets every start of every span
# |   |   | meanwhile. (Lowered, the log spaces starts already.) |
PACE_RUN_WINDOWS = 4.0
# | LINE_GRACE | 0.5 s | How long a process's head of line stays in the shared line past its
# |   |   | next ask: a process that went away holds the others back this long at most. |
LINE_GRACE = 0.5
# | LINE_POLL | 0.01 s | When a start is free but another process's call ranks first, how
# |   |   | soon to ask again: that call is due to take it within a round trip to Redis. |
LINE_POLL = 0.01
# | LINE_RECOUNT | 0.5 s | With a shared quota, how often a process waiting for its next
# |   |   | start counts its calls waiting, to tell Redis when more came: the others hold
# |   |   | its round-robin turns only for the calls it told (a local check; Redis is asked
# |   |   | only when the count grew). |
LINE_RECOUNT = 0.5
# | SHARED_ROUND_HOLD | 2 s | With a shared quota, the longest the first round (one client's
# |   |   | max_concurrency of starts) holds every other start while it is answered. |
SHARED_ROUND_HOLD = 2.0
# | LONG_QUOTA_WAIT | 10.0 | A call that will wait at least this many seconds for its pool's
# |   |   | quota is logged: once per pool at WARNING (shown even where logging was never set
# |   |   | up, so a script at the Pro quota does not sit silent for a minute), then at INFO once
# |   |   | per such wait. Below it a wait is the pacing at work, not news. |
LONG_QUOTA_WAIT = 10.0
