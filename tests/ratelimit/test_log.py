"""The sliding log alone: when the next start may happen, and what the rule counts in it."""

from __future__ import annotations

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from magisterium_async._ratelimit import Start, StartLog


def log_of(*times: float, limited: tuple[float, ...] = (), done: bool = True) -> StartLog:
    """A log of starts at ``times``; those in ``limited`` got a 429."""
    log = StartLog()
    for t in times:
        start = Start(t)
        start.limited = t in limited
        start.done = done
        log.add(start)
    return log


# allows: the limit ------------------------------------------------------------------------


def test_an_empty_log_allows_a_start_at_once() -> None:
    assert StartLog().allows(3, 3, 60.0) == -math.inf


def test_fewer_than_the_limit_in_the_log_allow_a_start_at_once() -> None:
    assert log_of(0.0, 1.0).allows(3, 3, 60.0) == -math.inf


def test_the_next_start_waits_a_span_after_the_nth_most_recent() -> None:
    log = log_of(0.0, 1.0, 2.0, 5.0)
    # limit 3: the third most recent start is at 1.0, so the next may start at 1.0 + span.
    assert log.allows(3, 3, 60.0) == 61.0


def test_429d_starts_count_against_the_limit() -> None:
    """At the configured rate every start counts, 429 or not: the server may count it."""
    log = log_of(0.0, 1.0, limited=(0.0, 1.0))
    assert log.allows(2, 2, 60.0) == 60.0


# allows: a lowered rate -------------------------------------------------------------------


def test_a_lowered_rate_spaces_starts_evenly_over_the_span() -> None:
    log = log_of(0.0)
    assert log.allows(10, 2, 60.0) == 30.0  # span / rate after the last start
    log.add(Start(30.0))
    assert log.allows(10, 2, 60.0) == 60.0  # and never more than ``rate`` in one span


def test_a_lowered_rate_never_lets_more_than_rate_taken_starts_into_a_span() -> None:
    log = log_of(0.0, 1.0, 2.0)
    # rate 2: the second most recent taken start is at 1.0; the spacing after 2.0 is 32.
    assert log.allows(10, 2, 60.0) == 61.0


def test_a_429d_start_took_nothing_under_a_lowered_rate() -> None:
    taken = log_of(0.0, 30.0)
    refused = log_of(0.0, 30.0, limited=(30.0,))
    assert taken.allows(10, 2, 60.0) == 60.0
    # The 429 at 30 took nothing of the server's rate: the spacing runs from 0.
    assert refused.allows(10, 2, 60.0) == 30.0


def test_a_lowered_rate_still_keeps_the_limit() -> None:
    """Many 429s in a row take nothing of the rate, but still count against the limit."""
    log = log_of(0.0, 1.0, 2.0, limited=(0.0, 1.0, 2.0))
    assert log.allows(3, 2, 60.0) == 60.0


# accepted / started: the counts the rule reads ---------------------------------------------


def test_accepted_counts_answered_successes_in_a_half_open_range() -> None:
    log = log_of(0.0, 5.0, 6.0, 7.0, 10.0, limited=(7.0,))
    next(s for s in log if s.time == 6.0).done = False  # sent, not answered yet
    assert log.accepted(0.0, 10.0) == 2  # [0, 10): 0 and 5, not 10
    assert log.accepted(0.1, 10.1) == 2  # 5 and 10
    assert log.accepted(5.0, 5.0) == 0


def test_started_counts_every_start_in_a_half_open_range() -> None:
    log = log_of(0.0, 5.0, 10.0, limited=(5.0,), done=False)
    assert log.started(0.0, 10.0) == 2  # (0, 10]: 5 and 10, whatever their outcome
    assert log.started(-1.0, 0.0) == 1
    assert log.started(10.0, 20.0) == 0


# prune / forget -----------------------------------------------------------------------------


def test_prune_drops_the_starts_at_or_before_a_time() -> None:
    log = log_of(0.0, 5.0, 10.0)
    log.prune(5.0)
    assert [s.time for s in log] == [10.0]
    log.prune(4.0)  # nothing older left: nothing happens
    assert len(log) == 1


def test_forget_takes_back_exactly_that_start() -> None:
    log = StartLog()
    first, second = Start(1.0), Start(1.0)
    log.add(first)
    log.add(second)
    log.forget(second)
    assert list(log) == [first]
    assert log.allows(1, 1, 60.0) == 61.0


def test_forgetting_a_start_that_aged_out_is_a_no_op() -> None:
    log = log_of(0.0, 10.0)
    old = next(iter(log))
    log.prune(5.0)
    log.forget(old)  # no error: it is gone already
    assert [s.time for s in log] == [10.0]


def test_reversed_walks_newest_first() -> None:
    assert [s.time for s in reversed(log_of(0.0, 1.0, 2.0))] == [2.0, 1.0, 0.0]


# The guarantee, whatever the starts ------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    limit=st.integers(1, 6),
    lower=st.integers(0, 5),
    span=st.integers(1, 30),
    tries=st.lists(st.tuples(st.integers(0, 12), st.booleans()), min_size=1, max_size=80),
)
def test_no_span_ever_holds_more_than_limit_starts(
    limit: int, lower: int, span: int, tries: list[tuple[int, bool]]
) -> None:
    """Starts admitted only when ``allows(...) <= t``: every half-open interval of one span
    holds at most ``limit`` starts, and, lowered, at most ``rate`` the server took, spaced
    at least ``span / rate`` apart. (Integer times: the bounds are exact.)"""
    rate = max(1, limit - lower)
    log = StartLog()
    t = 0
    for gap, refused in tries:
        t += gap
        if log.allows(limit, rate, span) <= t:
            start = Start(float(t))
            start.limited = start.done = refused
            log.add(start)
    times = [s.time for s in log]
    taken = [s.time for s in log if not s.limited]
    for end in times:
        assert sum(1 for x in times if end - span < x <= end) <= limit
    if rate < limit:
        for end in taken:
            assert sum(1 for x in taken if end - span < x <= end) <= rate
        assert all(b - a >= span / rate for a, b in itertools.pairwise(taken))
