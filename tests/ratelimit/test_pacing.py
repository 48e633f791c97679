"""Pacing alone: when a pool's starts are spread over the window, and the next paced start
(hand-built logs and times; it has no clock)."""

from __future__ import annotations

import math

import pytest

from magisterium_async._ratelimit import Start, StartLog
from magisterium_async._ratelimit._pacing import paced_start, paces
from magisterium_async._ratelimit._tuning import PACE_INTERVALS

RATE, WINDOW, SPAN = 10, 1.0, 1.02  # 10 a second, a 20 ms safety margin
INTERVAL = PACE_INTERVALS * WINDOW / RATE


def log_of(*times: float) -> StartLog:
    return StartLog([Start(t) for t in times])


def paced(log: StartLog, now: float, waiting: int, rate: int = RATE) -> float:
    return paced_start(log, now, waiting=waiting, rate=rate, window=WINDOW, span=SPAN)


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
    assert paced(log_of(0.0), 0.0, waiting=1000, rate=5) == pytest.approx(WINDOW / 5)


def test_an_empty_log_is_never_paced() -> None:
    assert paced(StartLog(), 0.0, waiting=1000) == -math.inf
