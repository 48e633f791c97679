"""Identical calls in flight share one piece of work; cancelling one waiter cancels no one
else's; a failure reaches each waiter as an exception of its own; a leader cancelled while
it readies the work leaves it, afresh, to those who joined."""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Coroutine
from typing import Any

import pytest

from magisterium_async._cache import Flights
from magisterium_async._cache._flights import own_copy
from magisterium_async._errors import APIConnectionError, RateLimitError


class Work:
    """Work that waits to be released, counting its starts and cancellations."""

    def __init__(self, result: object = "answer") -> None:
        self.release = asyncio.Event()
        self.started = 0
        self.cancelled = 0
        self.result = result
        self.error: BaseException | None = None

    async def __call__(self) -> object:
        self.started += 1
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if self.error is not None:
            raise self.error
        return self.result


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def share(
    flights: Flights[object], key: str, work: Coroutine[Any, Any, object]
) -> tuple[object, bool]:
    """What a cache does with a call: join the flight in progress, else lead one, start
    ``work`` at once and wait for it; the result, and whether it was joined."""
    flight = flights.get(key)
    if flight is not None:
        work.close()
        return await flight.wait(), True
    flight = flights.lead(key)
    flight.start(work, None)
    return await flight.wait(), False


async def test_fifty_identical_calls_do_the_work_once_and_all_get_its_answer() -> None:
    flights: Flights[object] = Flights()
    work = Work()
    calls = [asyncio.create_task(share(flights, "k", work())) for _ in range(50)]
    await settle()
    work.release.set()
    results = await asyncio.gather(*calls)
    assert work.started == 1
    assert [r for r, _ in results] == ["answer"] * 50
    assert sorted(joined for _, joined in results) == [False] + [True] * 49
    assert len(flights) == 0


async def test_other_keys_are_not_shared_and_a_landed_flight_is_not_joined() -> None:
    flights: Flights[object] = Flights()
    a, b = Work("a"), Work("b")
    calls = [asyncio.create_task(share(flights, k, w())) for k, w in (("a", a), ("b", b))]
    await settle()
    a.release.set()
    b.release.set()
    assert [r for r, _ in await asyncio.gather(*calls)] == ["a", "b"]
    again = Work("again")
    again.release.set()
    assert await share(flights, "a", again()) == ("again", False)


async def test_a_cancelled_waiter_leaves_and_the_work_goes_on_for_the_others() -> None:
    flights: Flights[object] = Flights()
    work = Work()
    first, second, third = (asyncio.create_task(share(flights, "k", work())) for _ in range(3))
    await settle()
    first.cancel()  # the one that started the work
    await settle()
    assert first.cancelled()
    work.release.set()
    assert await second == ("answer", True)
    assert await third == ("answer", True)
    assert (work.started, work.cancelled) == (1, 0)


async def test_the_work_is_cancelled_when_every_waiter_has_gone() -> None:
    flights: Flights[object] = Flights()
    work = Work()
    calls = [asyncio.create_task(share(flights, "k", work())) for _ in range(3)]
    await settle()
    for call in calls:
        call.cancel()
    await settle()
    assert all(call.cancelled() for call in calls)
    assert (work.started, work.cancelled) == (1, 1)
    assert len(flights) == 0
    fresh = Work("fresh")
    fresh.release.set()
    assert await share(flights, "k", fresh()) == ("fresh", False)  # not the cancelled one


async def test_a_waiter_joining_after_another_left_is_served_by_the_same_work() -> None:
    flights: Flights[object] = Flights()
    work = Work()
    early = asyncio.create_task(share(flights, "k", work()))
    await settle()
    late = asyncio.create_task(share(flights, "k", work()))
    await settle()
    early.cancel()
    await settle()
    work.release.set()
    assert await late == ("answer", True)
    assert (work.started, work.cancelled) == (1, 0)


def _depth(error: BaseException) -> int:
    return len(traceback.extract_tb(error.__traceback__))


async def test_a_failure_reaches_every_waiter_as_its_own_exception() -> None:
    flights: Flights[object] = Flights()
    work = Work()
    cause = OSError("connection reset")
    original = APIConnectionError("the service did not answer")
    original.__cause__ = cause
    work.error = original
    calls = [asyncio.create_task(share(flights, "k", work())) for _ in range(10)]
    await settle()
    work.release.set()
    errors = await asyncio.gather(*calls, return_exceptions=True)
    assert work.started == 1
    assert all(type(e) is APIConnectionError for e in errors)
    assert all(str(e) == "the service did not answer" for e in errors)
    assert len({id(e) for e in errors}) == 10
    assert all(e is not original for e in errors)
    assert all(e.__cause__ is cause for e in errors)
    # Each holds the work's frames under its own: no traceback grows with the waiters.
    depths = {_depth(e) for e in errors}
    assert len(depths) == 1
    assert depths.pop() >= 2
    assert any("__call__" in f.name for f in traceback.extract_tb(errors[-1].__traceback__))


def test_a_copy_keeps_the_class_args_and_attributes() -> None:
    error = RateLimitError("Rate limit exceeded", data={"retryAfter": 7})
    copy = own_copy(error)
    assert copy is not error
    assert type(copy) is RateLimitError
    assert copy.args == error.args
    assert copy.__dict__ == error.__dict__
    assert copy.retry_after == 7
    assert copy.data == {"retryAfter": 7}


def test_an_exception_that_cannot_be_copied_is_raised_as_it_is() -> None:
    class Stubborn(Exception):
        def __new__(cls, *args: object) -> Stubborn:
            if args:
                raise RuntimeError("no")
            return super().__new__(cls)

    error = Stubborn()
    error.args = ("x",)
    assert own_copy(error) is error


@pytest.mark.parametrize("n", [1, 2])
async def test_a_single_call_gets_the_work_s_answer_unchanged(n: int) -> None:
    flights: Flights[object] = Flights()
    work = Work([n])
    work.release.set()
    result, joined = await share(flights, "k", work())
    assert result is work.result
    assert not joined


async def test_the_first_caller_cancelled_after_a_second_joined_leaves_the_work_to_it() -> None:
    flights: Flights[object] = Flights()
    work = Work()
    first = asyncio.create_task(share(flights, "k", work()))
    await settle()  # the work has started, for the first caller alone
    second = asyncio.create_task(share(flights, "k", work()))
    await settle()
    first.cancel()
    await settle()
    assert first.cancelled()  # it left at once, not when the work ended
    assert (work.started, work.cancelled) == (1, 0)
    assert len(flights) == 1  # still in flight: a third call would join it too
    work.release.set()
    assert await second == ("answer", True)
    assert (work.started, work.cancelled) == (1, 0)
    assert len(flights) == 0


async def test_a_lone_caller_cancelled_cancels_its_work_and_a_later_call_starts_afresh() -> None:
    flights: Flights[object] = Flights()
    work = Work()
    call = asyncio.create_task(share(flights, "k", work()))
    await settle()
    call.cancel()
    await settle()
    assert call.cancelled()
    assert (work.started, work.cancelled) == (1, 1)
    assert len(flights) == 0
    again = Work("again")
    again.release.set()
    assert await share(flights, "k", again()) == ("again", False)


async def test_a_caller_joining_after_the_work_ended_but_before_its_callers_woke_shares_it() -> (
    None
):
    flights: Flights[object] = Flights()
    work = Work()
    first = asyncio.create_task(share(flights, "k", work()))
    await settle()
    flight = flights.get("k")
    assert flight is not None and flight.task is not None
    work.release.set()
    for _ in range(10):  # a turn at a time, to stop between the work's end and its callback
        if flight.task.done():
            break
        await asyncio.sleep(0)
    assert len(flights) == 1  # the work is over; its callback has not run yet
    # Awaited here, not in a task: it joins in this very turn of the loop.
    assert await share(flights, "k", work()) == ("answer", True)
    assert await first == ("answer", False)
    assert work.started == 1
    assert len(flights) == 0


async def test_work_cancelled_by_another_hand_cancels_every_caller() -> None:
    flights: Flights[object] = Flights()
    work = Work()
    calls = [asyncio.create_task(share(flights, "k", work())) for _ in range(3)]
    await settle()
    flight = flights.get("k")
    assert flight is not None and flight.task is not None
    flight.task.cancel()  # as the loop's end cancels every task
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
    assert len(flights) == 0


async def test_a_failure_nobody_waits_for_any_more_is_not_logged_as_never_retrieved(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flights: Flights[object] = Flights()
    work = Work()
    work.error = RuntimeError("boom")
    call = asyncio.create_task(share(flights, "k", work()))
    await settle()
    work.release.set()
    await asyncio.sleep(0)  # the work fails; its caller is woken in a later turn
    call.cancel()  # and leaves before it reads the failure
    await asyncio.gather(call, return_exceptions=True)
    del call, flights, work
    import gc

    gc.collect()
    assert "never retrieved" not in caplog.text


# A leader readying the work (its turn in the pool's line) before the work's task ------------


async def lead_after(
    flights: Flights[object], ready: asyncio.Event, work: Work, cleanups: list[str]
) -> object:
    """A leader that waits for ``ready`` (its turn) before it starts ``work``; cancelled
    while it waits, it leaves the work afresh to those who joined, as the cache does."""
    flight = flights.lead("k")
    try:
        await ready.wait()
    except BaseException:
        if flight.waiters:
            flight.start(work(), lambda: cleanups.append("afresh"))
        else:
            flight.land()
        raise
    flight.start(work(), lambda: cleanups.append("leader"))
    return await flight.wait()


async def join(flights: Flights[object]) -> object:
    flight = flights.get("k")
    assert flight is not None
    return await flight.wait()


async def test_callers_joining_a_leader_still_waiting_for_its_turn_share_its_work() -> None:
    flights: Flights[object] = Flights()
    ready, work, cleanups = asyncio.Event(), Work(), []
    leader = asyncio.create_task(lead_after(flights, ready, work, cleanups))
    await settle()
    joiners = [asyncio.create_task(join(flights)) for _ in range(3)]
    await settle()
    assert work.started == 0  # no task, no work while the leader waits
    ready.set()
    await settle()
    work.release.set()
    assert await asyncio.gather(leader, *joiners) == ["answer"] * 4
    assert work.started == 1
    assert cleanups == ["leader"]
    assert len(flights) == 0


async def test_a_leader_cancelled_in_line_leaves_the_work_afresh_to_those_who_joined() -> None:
    flights: Flights[object] = Flights()
    ready, work, cleanups = asyncio.Event(), Work(), []
    leader = asyncio.create_task(lead_after(flights, ready, work, cleanups))
    await settle()
    joiner = asyncio.create_task(join(flights))
    await settle()
    leader.cancel()
    await settle()
    assert leader.cancelled()
    assert work.started == 1  # started for the joiner, in a task of its own
    work.release.set()
    assert await joiner == "answer"
    assert cleanups == ["afresh"]
    assert len(flights) == 0


async def test_a_lone_leader_cancelled_in_line_lands_its_flight_and_starts_nothing() -> None:
    flights: Flights[object] = Flights()
    ready, work, cleanups = asyncio.Event(), Work(), []
    leader = asyncio.create_task(lead_after(flights, ready, work, cleanups))
    await settle()
    leader.cancel()
    await settle()
    assert leader.cancelled()
    assert (work.started, cleanups, len(flights)) == (0, [], 0)


async def test_a_joiner_leaving_while_the_leader_waits_cancels_nothing() -> None:
    flights: Flights[object] = Flights()
    ready, work, cleanups = asyncio.Event(), Work(), []
    leader = asyncio.create_task(lead_after(flights, ready, work, cleanups))
    await settle()
    joiner = asyncio.create_task(join(flights))
    await settle()
    joiner.cancel()
    await settle()
    ready.set()
    await settle()
    work.release.set()
    assert await leader == "answer"
    assert (work.started, work.cancelled) == (1, 0)


async def test_work_cancelled_before_its_first_step_still_has_its_cleanup_called() -> None:
    flights: Flights[object] = Flights()
    work, cleanups = Work(), []
    flight = flights.lead("k")
    flight.start(work(), lambda: cleanups.append("given back"))
    assert flight.task is not None
    flight.task.cancel()  # before the work's coroutine ran a line (the turn it held)
    with pytest.raises(asyncio.CancelledError):
        await flight.wait()
    assert work.started == 0
    assert cleanups == ["given back"]


async def test_a_leader_s_found_answer_settles_the_flight_for_those_who_joined() -> None:
    flights: Flights[object] = Flights()
    flight = flights.lead("k")
    joiner = asyncio.create_task(join(flights))
    await settle()
    flight.settle("found")
    assert await joiner == "found"
    assert len(flights) == 0
