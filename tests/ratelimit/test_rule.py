"""The rate rule alone: hand-built logs and times in, a rate out (it has no clock); and
pacing, when a pool's starts are spread over the window and the next paced start."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest

from magisterium_async._ratelimit import RateRule, RuleState, Start, StartLog
from magisterium_async._ratelimit._rule import contended, keeps_a_start_free, paces
from magisterium_async._ratelimit._tuning import (
    MAX_STEP_UP_DOUBLINGS,
    PACE_INTERVALS,
    PACE_QUIET_WINDOWS,
    RTT_CAP_SHARE,
    STARTS_PER_STEP_UP,
)

WINDOW = 60.0


def start(t: float, *, limited: bool = False, done: bool = True) -> Start:
    s = Start(t)
    s.limited, s.done = limited, done
    return s


def log_of(*times: float) -> StartLog:
    """Starts the server took (answered without a 429)."""
    return StartLog([start(t) for t in times])


def rule(limit: int = 10, margin: float = 0.0, *, adaptive: bool = True) -> RateRule:
    return RateRule("default", limit, WINDOW, margin, adaptive=adaptive)


def proven_at(r: RateRule, log: StartLog, taken_then_429: int) -> Start:
    """``taken_then_429`` successes at 0..n-1, then a 429 to a start at n; proven at n+0.5,
    the server saying its window ends at 60. Returns the 429'd start."""
    for t in range(taken_then_429):
        log.add(start(float(t)))
    refused = start(float(taken_then_429), limited=True)
    log.add(refused)
    r.proven(log, refused, taken_then_429 + 0.5, WINDOW)
    return refused


# proven: down to what the server took --------------------------------------------------


def test_proven_lowers_the_rate_to_what_the_server_took_in_its_window() -> None:
    r, log = rule(), StartLog()
    log.add(start(-5.0))  # before the server's window began: not counted
    proven_at(r, log, 6)
    assert r.state.rate == 6 and r.state.allowed == 6
    assert r.rate == 6.0
    assert not r.stepping_up


def test_a_window_that_took_none_of_ours_leaves_the_rate() -> None:
    r, log = rule(), StartLog()
    proven_at(r, log, 0)  # the server took none of ours: someone else spent it all
    assert (r.state.rate, r.state.allowed, r.state.step_up_at) == (10, 10, math.inf)


def test_proven_never_lowers_below_one() -> None:
    r, log = rule(), StartLog()
    proven_at(r, log, 1)
    r.proven(log, start(2.0, limited=True), 2.5, WINDOW)  # then one of one more
    assert r.state.rate == 1


def test_proven_always_lowers_by_one_at_least() -> None:
    r, log = rule(), StartLog()
    proven_at(r, log, 9)
    log.add(start(9.2))  # a 10th success in that window (counted where it arrived)
    r.proven(log, start(9.3, limited=True), 9.5, WINDOW)
    assert r.state.rate == 8  # 9, then one lower although the window took 10


def test_after_proven_the_lowered_rate_holds_starts_back_evenly_until_the_window_ends() -> None:
    r, log = rule(), StartLog()
    proven_at(r, log, 6)
    # 6 taken starts, the oldest at 0: the next may start a span after it.
    assert r.next_start(log, 6.5) == WINDOW


def test_the_round_trip_counted_where_a_window_began_is_capped() -> None:
    r, log = rule(), StartLog()
    stalled = start(0.0, limited=True)
    log.add(stalled)
    r.proven(log, stalled, 30.0, 50.0)  # answered 30 s after it was sent
    assert r.state.rtt == RTT_CAP_SHARE * WINDOW
    assert r.state.phase == 50.0 % WINDOW


# Stepping up -------------------------------------------------------------------------------


@pytest.mark.parametrize("allowed", [1, 2, 6, 9])
def test_a_step_up_is_due_after_starts_per_step_up_of_the_servers_starts(allowed: int) -> None:
    r, log = rule(), StartLog()
    proven_at(r, log, allowed)
    windows = math.ceil(STARTS_PER_STEP_UP / allowed)
    # The server's window that the last of them falls in begins the step up (its windows
    # start at whole minutes here): the stepped-up starts have one whole window to show in.
    assert r.state.step_up_at == windows * WINDOW
    assert windows * allowed >= STARTS_PER_STEP_UP


def test_a_step_up_is_never_due_before_the_proven_window_ends() -> None:
    r, log = rule(), StartLog()
    early = start(0.0, limited=True)
    log.add(early)
    r.proven(log, early, 0.1, 1000.0)  # a window ending far off (a longer quota)
    assert r.state.step_up_at == 1000.0


def test_a_step_up_begins_at_one_of_the_servers_window_starts() -> None:
    """Begun mid-window, the stepped-up starts straddle two of the server's windows, neither
    holds more than it allowed before, and the proof waits for two; begun as one opens, that
    window shows it."""
    r, log = rule(), log_of(0.0, *(10.0 + i for i in range(6)))
    refused = start(16.0, limited=True)
    log.add(refused)
    r.proven(log, refused, 16.5, 65.0)  # the server's windows end at 5 s past each minute
    assert r.state.rate == 6
    # Due after two windows of 6 (at 136.5): the window that began at 125 begins it.
    assert r.state.step_up_at == 125.0


def steps_up_from_six() -> tuple[RateRule, StartLog, float]:
    """Proven at 6 a window; then the log full of 6 taken starts as the step up falls due."""
    r, log = rule(), StartLog()
    proven_at(r, log, 6)
    due = r.state.step_up_at
    for t in range(70, 130, 10):
        log.add(start(float(t)))
    return r, log, due


def test_the_step_up_is_one_above_what_the_server_allowed() -> None:
    r, log, due = steps_up_from_six()
    assert r.next_start(log, due - 0.1) == due  # not yet: wake up when it is due
    assert r.state.rate == 6
    at = r.next_start(log, due)
    assert r.state.rate == 7 and r.state.allowed == 6
    assert r.stepping_up
    assert at == pytest.approx(120.0 + WINDOW / 7)  # the new rate, evenly spaced
    assert r.state.step_up_at == due + WINDOW


def test_a_step_up_waits_until_the_log_holds_the_pool_back() -> None:
    """A step up only matters when the rate is what keeps a start waiting."""
    r, log = rule(), StartLog()
    proven_at(r, log, 6)
    due = r.state.step_up_at
    assert r.next_start(log, due + 1) <= due + 1  # the log allows a start anyway
    assert r.state.rate == 6


def test_a_refused_step_up_goes_back_and_the_next_waits_twice_as_long_up_to_4x() -> None:
    r, log, due = steps_up_from_six()
    base = math.ceil(STARTS_PER_STEP_UP / 6) * WINDOW
    now = due
    waits: list[float] = []
    for _ in range(MAX_STEP_UP_DOUBLINGS + 2):
        r.step_up(log, now)
        assert r.state.rate == 7 and r.stepping_up
        refused = start(now, limited=True)
        log.add(refused)
        r.step_up_refused(refused, now + 0.5, now + 10.0)
        assert r.state.rate == 6 and not r.stepping_up
        # The next step up begins one of the server's windows (they end at now + 10 + k
        # windows), the one that the wait's end falls in.
        assert (r.state.step_up_at - (now + 10.0)) % WINDOW == 0
        waits.append(r.state.step_up_at - (now + 0.5))
        now += 1.0
    assert [math.ceil(wait / WINDOW) * WINDOW for wait in waits] == [
        2 * base,
        4 * base,
        4 * base,
        4 * base,
    ]
    assert MAX_STEP_UP_DOUBLINGS == 2


def test_a_step_up_checked_on_a_window_start_never_lets_the_log_be_passed() -> None:
    """Step ups and their checks fall on the server's window starts. Where a float's
    rounding took the window before for the one beginning, the next check fell due at
    once, and every start the log held back was told it may go now (a burst over the
    limit). Many phases, each a refused step up, a step up, then its check."""
    rng, window, bursts = random.Random(3), 1.0, []
    for _ in range(2000):
        window_end = round(rng.uniform(1, 100), rng.choice([2, 3, 6, 15]))
        r = RateRule("default", 15, window, window / 60)
        r.state.rate, r.state.allowed = 12, 11
        began = window_end - window
        log = StartLog([start(began + (0.02 + i * 0.05) * window) for i in range(11)])
        refused = start(began + 0.6 * window, limited=True)
        log.add(refused)
        r.step_up_refused(refused, began + 0.62 * window, window_end)
        due = r.state.step_up_at
        log = StartLog([start(due - (0.95 - i * 0.05) * window) for i in range(11)])
        r.next_start(log, due)  # the step up, at a window start
        check = r.state.step_up_at  # its check, at the next one
        for i in range(11):
            log.add(start(due + (0.05 + i * 0.085) * window))
        said_now = 0
        while said_now < 5 and r.next_start(log, check) <= check:
            said_now += 1
            log.add(start(check))
        if said_now > 1 or log.started(check - r.span, check) > r.limit:
            bursts.append(window_end)
    assert bursts == []


def stepping_up(took: int) -> tuple[RateRule, StartLog]:
    """Stepped up to 7 of 20 (the server allowed 6); the last server window (its ends at
    whole minutes) took ``took`` of ours; a step up falls due at 180."""
    r = rule(limit=20)
    r.state = RuleState(rate=7, allowed=6, step_up_at=180.0, phase=0.0, rtt=0.1)
    log = log_of(*(121.0 + i for i in range(took)), 184.0)
    return r, log


def test_once_a_window_took_more_than_allowed_the_rate_doubles_back() -> None:
    r, log = stepping_up(took=7)
    r.next_start(log, 185.0)
    assert r.state.allowed == 7 and r.state.rate == 14
    assert r.state.step_up_at == 245.0


def test_a_confirmed_step_up_goes_back_at_once_to_what_the_window_before_the_429_took() -> None:
    """20 of 20 a window, then the quota shrank (6 taken, then a 429): once a step up is
    confirmed (the quota came back), the rate goes straight back to 20, not 7, 14, 20."""
    r = rule(limit=20)
    log = log_of(*(-50.0 + i for i in range(20)))  # the window before took all 20
    proven_at(r, log, 6)
    assert (r.state.rate, r.state.before) == (6, 20)
    r.state = dataclasses.replace(r.state, rate=7, step_up_at=180.0, phase=0.0, rtt=0.1)
    log = log_of(*(121.0 + i for i in range(7)), 184.0)
    r.next_start(log, 185.0)
    assert r.state.rate == 20 and r.state.step_up_at == math.inf


def test_a_told_rate_no_window_took_is_not_gone_back_to() -> None:
    r = rule(limit=1000)
    proven_at(r, StartLog(), 10)  # told 1000, the first window took 10
    assert r.state.before == 0


def test_doubling_stops_at_the_configured_rate() -> None:
    r = rule(limit=20)
    r.state = RuleState(rate=14, allowed=7, step_up_at=240.0, phase=0.0, rtt=0.1)
    log = log_of(*(181.0 + i for i in range(10)), 244.0)
    r.step_up(log, 245.0)
    assert r.state.rate == 20 and r.state.allowed == 20
    assert r.state.step_up_at == math.inf  # at the configured rate: nothing more to try
    assert not r.stepping_up


def test_two_windows_that_took_more_than_twice_allowed_confirm_a_step_up_at_any_phase() -> None:
    """7 a span (61 s), evenly spaced, against a server that allowed 6: the last window,
    trimmed by the round trip and the margin, holds only 6 of them at this phase, but the
    two windows before the check hold 13 (> 2 x 6: one of them took 7)."""
    r = rule(limit=20, margin=1.0)
    r.state = RuleState(rate=7, allowed=6, step_up_at=240.0, phase=0.0, rtt=5.0)
    log = log_of(*(121.0 + k * 61.0 / 7 for k in range(13)))
    assert log.accepted(180.0, 234.0) == 6 and log.accepted(120.0, 234.0) == 13
    r.step_up(log, 245.0)
    assert r.state.allowed == 7 and r.state.rate == 14


def test_a_step_up_not_yet_taken_by_a_whole_window_waits_a_window_more() -> None:
    r, log = stepping_up(took=6)
    r.next_start(log, 185.0)
    assert r.state.rate == 7 and r.state.allowed == 6
    assert r.state.step_up_at == 240.0  # the end of the next server window


def full_log_before(t: float, n: int = 10) -> tuple[StartLog, Start]:
    """``n`` starts up to ``t``, the last one 429'd: the log was full at a window's edge."""
    log = log_of(*(t - n + 1 + i for i in range(n - 1)))
    suspect = start(t, limited=True)
    log.add(suspect)
    return log, suspect


# Suspect, non-adaptive, reporting ---------------------------------------------------------


def test_a_suspect_moves_nothing_but_where_the_window_ends() -> None:
    r = rule()
    r.suspect(start(10.0, limited=True), 10.5, 75.0)
    assert r.state.rate == 10 and r.state.step_up_at == math.inf
    assert r.state.phase == 15.0 and r.state.rtt == 0.5


def test_non_adaptive_never_moves() -> None:
    r = rule(margin=1.0, adaptive=False)
    log, suspect = full_log_before(100.0)
    r.suspect(suspect, 100.5, 101.0)
    r.proven(log, suspect, 100.5, 101.0)
    r.step_up_refused(suspect, 100.5, 101.0)
    assert r.state == RuleState(rate=10, allowed=10)
    assert r.next_start(log, 100.5) == 91.0 + r.span


def test_the_rate_is_reported_per_period() -> None:
    r = RateRule("expensive", 1, 120.0, 0.0, period=60.0)  # 0.5 a minute, as one per 2
    assert r.rate == 0.5


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        RateRule("default", 0, WINDOW, 0.0)


# Pacing --------------------------------------------------------------------------------

RATE, PACE_WINDOW, MARGIN = 10, 1.0, 0.02  # 10 a second, a 20 ms safety margin
INTERVAL = PACE_INTERVALS * PACE_WINDOW / RATE


def paced(log: StartLog, now: float, waiting: int, rate: int = RATE) -> float:
    """When a rule of :data:`RATE` a second, lowered to ``rate``, paces the next start."""
    r = RateRule("default", RATE, PACE_WINDOW, MARGIN)
    r.state.rate = rate
    return r.paced_start(log, now, waiting)


def test_paced_only_with_fairness_keys_and_more_waiting_than_free_starts() -> None:
    assert paces(keyed=True, waiting=11, free=10)
    assert not paces(keyed=True, waiting=10, free=10)  # they all fit: a burst harms nobody
    assert not paces(keyed=False, waiting=1000, free=0)  # no keys: a lone job bursts


def test_with_a_backlog_the_next_start_is_one_quota_interval_after_the_last() -> None:
    log = log_of(0.0, 0.1, 0.2)
    assert paced(log, 0.2, waiting=1000) == pytest.approx(0.2 + INTERVAL)
    assert paced(log, 0.25, waiting=1000) == pytest.approx(0.2 + INTERVAL)


def test_once_the_interval_has_passed_pacing_holds_nothing_back() -> None:
    assert paced(log_of(0.0, 0.1), 0.2, waiting=1000) == -math.inf


def test_calls_that_fit_in_the_free_starts_are_not_paced() -> None:
    log = log_of(0.0, 0.0, 0.0)  # 7 of 10 starts free in the span
    assert paced(log, 0.0, waiting=7) == -math.inf
    assert paced(log, 0.0, waiting=8) == pytest.approx(INTERVAL)


def test_starts_older_than_the_span_count_as_free_again() -> None:
    log = log_of(*[0.0] * 10, 1.0)  # the first ten have left the span at 1.02
    assert paced(log, 1.05, waiting=9) == -math.inf
    assert paced(log, 1.05, waiting=10) == pytest.approx(1.0 + INTERVAL)


def test_a_lowered_rate_paces_at_its_own_longer_interval() -> None:
    assert paced(log_of(0.0), 0.0, waiting=1000, rate=5) == pytest.approx(PACE_WINDOW / 5)


def test_an_empty_log_is_never_paced() -> None:
    assert paced(StartLog(), 0.0, waiting=1000) == -math.inf


def test_contended_for_the_quiet_windows_after_a_call_a_burst_would_hold_back() -> None:
    quiet = PACE_QUIET_WINDOWS * PACE_WINDOW
    assert contended(2.0, 2.0, PACE_WINDOW)
    assert contended(2.0, 2.0 + quiet - 0.001, PACE_WINDOW)
    assert not contended(2.0, 2.0 + quiet, PACE_WINDOW)  # quiet: bulk bursts again
    assert not contended(-math.inf, 0.0, PACE_WINDOW)  # nobody seen


def contended_rule() -> RateRule:
    return RateRule("default", RATE, PACE_WINDOW, MARGIN)


def test_while_contended_a_bulk_start_is_paced_whatever_waits() -> None:
    log = log_of(10.0)  # 9 of 10 starts free, one bulk call waiting: a burst would fit
    paced_bulk = contended_rule().paced_start(
        log, 10.0, 1, keyed=False, bulk=True, contended_at=9.0
    )
    assert paced_bulk == pytest.approx(10.0 + INTERVAL)


def test_while_contended_interactive_starts_are_not_paced() -> None:
    rule = contended_rule()
    log = log_of(10.0)
    assert rule.paced_start(log, 10.0, 1, keyed=False, bulk=False, contended_at=9.0) == -math.inf


def test_bulk_is_not_paced_when_nobody_contended_lately() -> None:
    rule, log = contended_rule(), log_of(10.0)
    assert rule.paced_start(log, 10.0, 1000, keyed=False, bulk=True) == -math.inf
    long_ago = 10.0 - PACE_QUIET_WINDOWS * PACE_WINDOW
    assert rule.paced_start(log, 10.0, 1, keyed=False, bulk=True, contended_at=long_ago) == (
        -math.inf
    )


def test_a_paced_start_keeps_a_start_free_within_an_interval() -> None:
    # Two starts went together at 1.0; eight paced after them would fill the log to 2.02.
    log = log_of(1.0, 1.0, *(1.0 + 0.1 * i for i in range(1, 8)))
    at = keeps_a_start_free(log, RATE, INTERVAL)
    assert at == pytest.approx(1.0 + 9 * INTERVAL)  # the ten then span nine intervals
    rule = contended_rule()
    paced = rule.paced_start(log, 1.75, 1, keyed=False, bulk=True, contended_at=1.0)
    assert paced == pytest.approx(1.9)  # not at 1.8, one interval after the last


def test_evenly_paced_starts_keep_a_start_free_at_once() -> None:
    log = log_of(*(0.1 * i for i in range(9)))
    assert keeps_a_start_free(log, RATE, INTERVAL) == pytest.approx(0.9)  # = the paced gap


def test_a_rate_of_one_keeps_nothing_back() -> None:
    assert keeps_a_start_free(log_of(0.0), 1, PACE_WINDOW) == -math.inf
    assert keeps_a_start_free(log_of(0.0), 3, PACE_WINDOW / 3) == -math.inf  # too few starts
