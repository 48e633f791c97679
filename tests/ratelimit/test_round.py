"""The first round: starts wait for its answers once the first is in, a bounded time."""

from __future__ import annotations

import math

from magisterium_async._ratelimit._log import Start
from magisterium_async._ratelimit._round import FirstRound
from magisterium_async._ratelimit._tuning import ROUND_HOLD_ROUND_TRIPS


def round_of(*times: float) -> tuple[FirstRound, list[Start]]:
    first = FirstRound()
    starts = [Start(t) for t in times]
    for start in starts:
        first.started(start)
    return first, starts


def answer(first: FirstRound, start: Start, now: float) -> bool:
    start.done = True
    return first.answered(start.time, now)


def test_before_any_answer_nothing_is_held() -> None:
    first, _ = round_of(0.0, 0.0, 0.0)
    assert first.holds(5.0) is False
    assert first.held_until() == -math.inf


def test_after_the_first_answer_starts_wait_for_the_rest_of_the_round() -> None:
    first, starts = round_of(0.0, 0.0, 0.0)
    assert answer(first, starts[0], 0.1) is False
    assert first.held_until() == 0.1 + ROUND_HOLD_ROUND_TRIPS * 0.1
    assert first.holds(0.2) is True
    answer(first, starts[1], 0.2)
    assert answer(first, starts[2], 0.25) is True  # every answer in: the round is over
    assert first.holds(0.26) is None


def test_one_slow_request_holds_the_pool_a_few_round_trips_at_most() -> None:
    first, starts = round_of(0.0, 0.0)
    answer(first, starts[0], 0.1)
    ends = 0.1 + ROUND_HOLD_ROUND_TRIPS * 0.1
    assert first.holds(ends - 0.001) is True
    assert first.holds(ends) is None  # the slow one is still out, but the hold is over
