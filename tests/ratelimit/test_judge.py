"""The judge alone: what one 429 means for the rest of its pool (pure: times are given)."""

from __future__ import annotations

from magisterium_async._ratelimit import Judge, Start
from magisterium_async._ratelimit._tuning import PROOF_429S, PROOF_429S_WHOLE_SECONDS


def sent(t: float) -> Start:
    return Start(t)


def refused(judge: Judge, start: Start, now: float, wait: float, **kw: bool) -> list[str]:
    """A 429 to ``start`` at ``now``; the kinds of the verdicts it brings."""
    start.limited, start.wait, start.done = True, wait, True
    verdicts = judge.on_429(
        start, now, wait, paused=kw.get("paused", False), stepping_up=kw.get("stepping_up", False)
    )
    return [v.kind for v in verdicts]


def answered(judge: Judge, start: Start) -> bool:
    start.done = True
    return judge.on_answer(start)


# Proof ----------------------------------------------------------------------------------


def test_an_isolated_429_is_a_suspect_and_pauses_nobody() -> None:
    judge = Judge()
    first = sent(10.0)
    verdicts = judge.on_429(first, 10.5, 49.5, paused=False, stepping_up=False)
    assert [v.kind for v in verdicts] == ["suspect"]
    assert not verdicts[0].pause
    assert verdicts[0].window_end == 60.0
    assert judge.suspect is first and judge.suspect_until == 60.0


def test_a_second_429_pointing_at_the_same_window_end_proves_it() -> None:
    judge = Judge()
    assert refused(judge, sent(10.0), 10.5, 49.5) == ["suspect"]
    second = sent(12.0)
    verdicts = judge.on_429(second, 12.5, 47.5, paused=False, stepping_up=False)
    assert [v.kind for v in verdicts] == ["proven"]
    assert verdicts[0].pause and verdicts[0].window_end == 60.0
    assert verdicts[0].start is second
    assert judge.suspect is None  # the evidence is used up
    assert PROOF_429S == 2


def test_whole_second_waits_take_three_429s_to_prove() -> None:
    judge = Judge()
    kinds = [
        refused(judge, sent(9.9), 10.0, 50.0),
        refused(judge, sent(11.9), 12.0, 48.0),
        refused(judge, sent(13.9), 14.0, 46.0),
    ]
    assert kinds == [["suspect"], ["agreeing"], ["proven"]]
    assert PROOF_429S_WHOLE_SECONDS == 3


def test_429s_with_a_fixed_wait_moving_with_the_clock_prove_nothing() -> None:
    """A server that answers every 429 "wait 5.5 s" says nothing of a window's end."""
    judge = Judge()
    kinds = [refused(judge, sent(t - 0.5), t, 5.5) for t in (10.0, 12.0, 14.0, 16.0)]
    assert kinds == [["suspect"]] * 4


def test_a_429_while_stepping_up_answers_the_step_up() -> None:
    judge = Judge()
    verdicts = judge.on_429(sent(10.0), 10.5, 49.5, paused=False, stepping_up=True)
    assert [v.kind for v in verdicts] == ["step_up_refused"]
    assert verdicts[0].pause
    assert judge.suspect is None  # nothing to check: it answered the step up


def test_a_429_while_paused_is_late() -> None:
    judge = Judge()
    verdicts = judge.on_429(sent(10.0), 10.5, 49.5, paused=True, stepping_up=True)
    assert [v.kind for v in verdicts] == ["late"]
    assert verdicts[0].pause
    assert judge.suspect is None


# Clearing -------------------------------------------------------------------------------


def test_a_success_sent_no_earlier_than_the_suspect_clears_it() -> None:
    judge = Judge()
    suspect = sent(10.0)
    refused(judge, suspect, 10.5, 49.5)
    assert answered(judge, sent(10.0))
    assert judge.suspect is None


def test_a_success_sent_earlier_than_the_suspect_clears_nothing() -> None:
    judge = Judge()
    suspect = sent(10.0)
    refused(judge, suspect, 10.5, 49.5)
    assert not answered(judge, sent(9.9))
    assert judge.suspect is suspect


def test_without_a_suspect_an_answer_says_nothing() -> None:
    assert not answered(Judge(), sent(1.0))


# The check ------------------------------------------------------------------------------


def test_the_check_goes_alone_until_answered() -> None:
    judge = Judge()
    refused(judge, sent(10.0), 10.5, 49.5)
    assert judge.holds(11.0) == (False, None)  # the next start may go: it is the check
    check = sent(11.0)
    judge.started(check)
    judge.started(sent(11.0))  # (had another gone too, it would not be the check)
    assert judge.check is check
    assert judge.holds(11.0) == (True, None)  # everyone else waits for it
    assert answered(judge, check)  # it got through: the suspect is cleared
    assert judge.holds(12.0) == (False, None)


def test_a_check_that_gets_a_429_frees_the_next_start_to_check() -> None:
    judge = Judge()
    refused(judge, sent(10.0), 10.5, 5.5)
    check = sent(11.0)
    judge.started(check)
    assert refused(judge, check, 14.0, 5.5) == ["suspect"]  # pointing elsewhere
    assert not answered(judge, check)
    assert judge.holds(14.0) == (False, None)
    assert judge.check is None


def test_the_check_holds_the_others_no_longer_than_the_window_end() -> None:
    judge = Judge()
    refused(judge, sent(10.0), 10.5, 49.5)
    judge.started(sent(11.0))  # the check hangs
    assert judge.holds(59.9) == (True, None)
    assert judge.holds(60.0) == (False, None)  # not proven: its check is still out
    assert judge.suspect is None


def test_a_suspect_expiring_with_its_check_not_out_is_proven_by_silence() -> None:
    judge = Judge()
    suspect = sent(10.0)
    refused(judge, suspect, 10.5, 49.5)
    held, verdict = judge.holds(60.0)
    assert not held
    assert verdict is not None and verdict.kind == "expired"
    assert verdict.start is suspect and verdict.at == 10.5 and verdict.window_end == 60.0
    assert not verdict.pause  # the window is over: nobody waits for it
    assert judge.suspect is None


def test_an_expired_suspect_comes_first_when_a_later_429_finds_it() -> None:
    judge = Judge()
    refused(judge, sent(10.0), 10.5, 49.5)
    assert refused(judge, sent(70.0), 70.5, 49.5) == ["expired", "suspect"]
