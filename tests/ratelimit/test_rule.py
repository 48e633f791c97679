"""The rate rule, pure: times and outcomes in, decisions out (no clock, no task).

Each test drives one :class:`Rule` the way a pool does: it asks when the next start may go,
records starts, and hands on each answer; a verdict a round returns is applied as a local
pool applies it.
"""

from __future__ import annotations

import math

import pytest

from magisterium_async._ratelimit import Rule, Start, Verdict

WINDOW, MARGIN = 60.0, 1.0


def rule(limit: int = 10, **kwargs: bool) -> Rule:
    return Rule(limit, WINDOW, MARGIN, **kwargs)


def burst(r: Rule, now: float, n: int) -> list[Start]:
    """``n`` starts at ``now``, each allowed by the rule."""
    starts = []
    for _ in range(n):
        assert r.next_start(now) <= now
        starts.append(r.start(now))
    return starts


def answer(
    r: Rule, starts: list[Start], now: float, refused: int = 0, wait: float = 50.0
) -> Verdict | None:
    """The first ``refused`` of ``starts`` get a 429 (window ends ``wait`` from ``now``),
    the rest are answered; the verdict of the round, applied."""
    verdict = None
    for i, start in enumerate(starts):
        got = r.refused(start, now, wait) if i < refused else r.answered(start, now)
        if got is not None:
            verdict = got
            r.apply(got)
    return verdict


def test_a_burst_of_the_limit_goes_at_once_and_no_more_in_a_span() -> None:
    r = rule()
    answer(r, burst(r, 0.0, 10), 0.1)
    assert r.next_start(0.2) == WINDOW + MARGIN  # the span after the first of them
    assert r.next_start(WINDOW + MARGIN) == WINDOW + MARGIN


def test_a_start_that_spent_nothing_leaves_the_log() -> None:
    r = rule(limit=2)
    first, second = burst(r, 0.0, 2)
    r.answered(first, 0.1)
    r.unsent(second, 0.1)  # the connection was refused: nothing reached the server
    assert r.next_start(0.2) <= 0.2


def test_the_first_round_is_answered_before_more_go() -> None:
    r = rule(limit=1000)
    starts = burst(r, 0.0, 16)
    r.answered(starts[0], 0.05)  # the first answer closes the first round
    assert r.held and r.next_start(0.05) == math.inf
    for start in starts[1:]:
        r.answered(start, 0.06)
    assert not r.held and r.next_start(0.07) <= 0.07


def test_told_far_more_learns_what_the_window_took_and_pauses_to_its_end() -> None:
    r = rule(limit=1000)
    verdict = answer(r, burst(r, 0.0, 16), 0.05, refused=6, wait=59.95)
    assert verdict is not None and verdict.kind == "ran_out"
    assert r.rate == 10 and r.paused_until == pytest.approx(60.0)
    assert r.next_start(30.0) == WINDOW + MARGIN  # the ten leave the span together


def test_a_few_random_429s_of_many_lower_the_rate_by_as_many_and_pause_nothing() -> None:
    r = rule(limit=100)
    starts = burst(r, 0.0, 40)
    verdict = answer(r, starts, 0.05, refused=2, wait=12.0)  # 2 of 40: a proxy's flukes
    assert verdict is not None and verdict.kind == "fell_short"
    assert r.rate == 98 and r.paused_until == -math.inf


def test_someone_else_spent_the_window_pause_only() -> None:
    r = rule()
    verdict = answer(r, burst(r, 0.0, 10), 0.05, refused=10, wait=30.0)
    assert verdict is not None and verdict.kind == "ran_out"
    assert r.rate == 10  # none of ours was taken: it says nothing of our share
    assert r.next_start(1.0) == pytest.approx(30.05)


def test_a_429_while_paused_only_says_so_again() -> None:
    r = rule()
    answer(r, burst(r, 0.0, 1), 0.1)
    start = burst(r, 1.0, 1)[0]
    r.paused_until = 30.0  # paused (another process of a shared quota learned it)
    assert r.refused(start, 0.1, 29.9) is None and not r.held


def test_the_way_back_up_is_one_more_then_what_the_window_before_took() -> None:
    r = rule()
    answer(r, burst(r, 0.0, 10), 0.1)  # a window that took 10
    answer(r, burst(r, 61.0, 10), 61.1, refused=6, wait=58.9)  # then only 4
    assert r.rate == 4
    t = r.step_at  # two windows after the pause
    assert t == pytest.approx(120.0 + 2 * WINDOW)
    answer(r, burst(r, t, 4), t + 0.1)
    assert r.next_start(t + 1) <= t + 1 and r.rate == 5  # one more, once the log holds
    answer(r, burst(r, t + 1, 1), t + 1.1)
    later = t + WINDOW + 2  # a window on, the five it took left the span
    answer(r, burst(r, later, 5), later + 0.1)
    assert r.next_start(later + 1) <= later + 1 and r.rate == 10  # the quota it had


def test_a_refused_step_goes_back_and_waits_longer_next_time() -> None:
    r = rule()
    answer(r, burst(r, 0.0, 10), 0.1)
    answer(r, burst(r, 61.0, 10), 61.1, refused=6, wait=58.9)
    t = r.step_at
    answer(r, burst(r, t, 4), t + 0.1)
    assert r.next_start(t + 1) <= t + 1 and r.rate == 5
    step = burst(r, t + 1, 1)
    verdict = r.refused(step[0], t + 1.1, 30.0)
    assert verdict is not None and verdict.kind == "step_refused"
    r.apply(verdict)
    assert r.rate == 4 and r.step_at == pytest.approx(t + 1.1 + 30.0 + 2 * WINDOW)


def test_not_adaptive_pauses_and_never_moves_the_rate() -> None:
    r = rule(limit=1000, adaptive=False)
    answer(r, burst(r, 0.0, 16), 0.05, refused=6, wait=59.95)
    assert r.rate == 1000 and r.paused_until == pytest.approx(60.0)


def test_bulk_is_paced_while_an_interactive_call_came_lately() -> None:
    r = rule()
    answer(r, burst(r, 0.0, 10), 0.1)
    now = 2 * WINDOW + 10
    r.contended_at = now  # a person's call arrived
    first = burst(r, now, 1)
    assert r.next_start(now, paced=True) == pytest.approx(now + WINDOW / 10)  # one interval
    assert r.next_start(now, paced=False) <= now  # an interactive call is not paced
    answer(r, first, now + 0.1)


def test_while_contended_bulk_leaves_the_last_free_start_until_the_next_is_near() -> None:
    r = rule()
    r.contended_at = 0.0  # a person's call arrived
    for k in range(9):  # a lumpy log: nine starts close together, one start still free
        t = k * WINDOW / 10
        assert r.next_start(t, paced=True) <= t
        r.start(t)
    now = 9 * WINDOW / 10
    frees = WINDOW + MARGIN  # when the first of the nine leaves the span
    assert r.next_start(now, paced=False) <= now  # a person's next call takes it at once
    # Bulk would take it too and leave the next call a wait of the span's gap: it waits
    # until the next start is only an interval away.
    assert r.next_start(now, paced=True) == pytest.approx(frees - WINDOW / 10)


def test_a_long_bulk_run_is_paced_and_a_short_one_bursts() -> None:
    r = rule()
    t = 0.0
    for _ in range(3):  # three windows of bursts: a run of more than two windows
        answer(r, burst(r, t, 10), t + 0.1)
        t += WINDOW + MARGIN
    assert r.contended(t)
    burst(r, t, 1)
    assert r.next_start(t, paced=True) == pytest.approx(t + WINDOW / 10)  # paced
    fresh = rule()
    assert not fresh.contended(0.0)
    assert len(burst(fresh, 0.0, 10)) == 10  # a batch alone bursts


def test_a_short_pause_paces_the_window_after_it() -> None:
    r = rule(limit=1000)
    # A token bucket: the wait is one token's, a share of the window.
    answer(r, burst(r, 0.0, 16), 0.05, refused=6, wait=6.0)
    assert r.rate == 10
    t = r.next_start(10.0)
    assert t == WINDOW + MARGIN
    burst(r, t, 1)
    assert r.next_start(t) == pytest.approx(t + WINDOW / 10)  # paced: the bucket refills so


def test_usage_reads_the_log_without_changing_it() -> None:
    r = rule()
    burst(r, 0.0, 4)
    assert r.usage(1.0) == (4, 6, 1.0)
    assert r.usage(1.0) == (4, 6, 1.0)


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_below_one_is_refused(limit: int) -> None:
    with pytest.raises(ValueError, match="limit"):
        Rule(limit, WINDOW, MARGIN)
