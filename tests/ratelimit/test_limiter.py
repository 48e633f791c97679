"""The local limiter alone: the log and the rule on one pool, and the one mapping of the
judge's verdicts to what the rule learns."""

from __future__ import annotations

import math

import pytest

from magisterium_async._ratelimit import Start, Verdict, VerdictKind, WindowLimiter


def limiter(limit: int = 10, margin: float = 1.0, *, adaptive: bool = True) -> WindowLimiter:
    return WindowLimiter("default", limit, 60.0, margin, adaptive=adaptive)


def full(lim: WindowLimiter, taken: int) -> Start:
    """``taken`` successes at 0..taken-1, then a 429'd start at ``taken``."""
    for t in range(taken):
        s = Start(float(t))
        s.done = True
        lim.start(s)
    refused = Start(float(taken))
    refused.limited = refused.done = True
    lim.start(refused)
    return refused


def test_never_more_than_the_limit_in_one_window_plus_margin() -> None:
    lim = limiter(limit=2)
    assert lim.next_start(0.0) <= 0.0
    first, second = Start(0.0), Start(0.0)
    lim.start(first)
    lim.start(second)
    assert lim.next_start(0.0) == 61.0
    lim.forget(second)  # given back before anything was sent
    assert lim.next_start(0.0) <= 0.0


@pytest.mark.parametrize("kind", ["proven", "expired"])
def test_a_window_proven_by_429s_or_by_silence_lowers_the_rate(kind: VerdictKind) -> None:
    lim = limiter()
    refused = full(lim, 4)
    lim.learn(Verdict(kind, refused, 4.5, 60.0, 55.5))
    assert lim.rate == 4.0
    assert not lim.stepping_up


@pytest.mark.parametrize("kind", ["suspect", "late", "agreeing"])
def test_what_proves_nothing_moves_no_rate(kind: VerdictKind) -> None:
    lim = limiter()
    refused = full(lim, 4)
    lim.learn(Verdict(kind, refused, 4.5, 60.0, 55.5))
    assert lim.rate == 10.0 and lim.rule.span == 61.0


def test_a_refused_step_up_goes_back_to_what_the_server_allowed() -> None:
    lim = limiter()
    refused = full(lim, 4)
    lim.learn(Verdict("proven", refused, 4.5, 60.0, 55.5))
    lim.rule.step_up(lim.log, 200.0)
    assert lim.rate == 5.0 and lim.stepping_up
    again = Start(200.0)
    again.limited = again.done = True
    lim.start(again)
    lim.learn(Verdict("step_up_refused", again, 200.5, 240.0, 39.5))
    assert lim.rate == 4.0 and not lim.stepping_up


def test_without_adaptive_nothing_is_learned() -> None:
    lim = limiter(adaptive=False)
    refused = full(lim, 4)
    for kind in ("proven", "expired", "step_up_refused"):
        lim.learn(Verdict(kind, refused, 4.5, 5.5, 1.0))  # type: ignore[arg-type]
    assert (lim.rate, lim.rule.span) == (10.0, 61.0)


def test_the_rate_is_per_period() -> None:
    lim = WindowLimiter("expensive", 1, 120.0, 0.0, period=60.0)
    assert lim.rate == 0.5
    assert math.isinf(lim.rule.state.step_up_at)
