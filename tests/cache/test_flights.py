"""Identical calls in flight share one piece of work; cancelling one waiter cancels no one
else's; a failure reaches each waiter as an exception of its own."""

from __future__ import annotations

import asyncio
import traceback

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


async def test_fifty_identical_calls_do_the_work_once_and_all_get_its_answer() -> None:
    flights: Flights[object] = Flights()
    work = Work()
    calls = [asyncio.create_task(flights.run("k", work())) for _ in range(50)]
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
    calls = [asyncio.create_task(flights.run(k, w())) for k, w in (("a", a), ("b", b))]
    await settle()
    a.release.set()
    b.release.set()
    assert [r for r, _ in await asyncio.gather(*calls)] == ["a", "b"]
    again = Work("again")
    again.release.set()
    assert await flights.run("a", again()) == ("again", False)


async def test_a_cancelled_waiter_leaves_and_the_work_goes_on_for_the_others() -> None:
    flights: Flights[object] = Flights()
    work = Work()
    first, second, third = (asyncio.create_task(flights.run("k", work())) for _ in range(3))
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
    calls = [asyncio.create_task(flights.run("k", work())) for _ in range(3)]
    await settle()
    for call in calls:
        call.cancel()
    await settle()
    assert all(call.cancelled() for call in calls)
    assert (work.started, work.cancelled) == (1, 1)
    assert len(flights) == 0
    fresh = Work("fresh")
    fresh.release.set()
    assert await flights.run("k", fresh()) == ("fresh", False)  # not the cancelled one


async def test_a_waiter_joining_after_another_left_is_served_by_the_same_work() -> None:
    flights: Flights[object] = Flights()
    work = Work()
    early = asyncio.create_task(flights.run("k", work()))
    await settle()
    late = asyncio.create_task(flights.run("k", work()))
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
    calls = [asyncio.create_task(flights.run("k", work())) for _ in range(10)]
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
    result, joined = await flights.run("k", work())
    assert result is work.result
    assert not joined


async def test_the_first_caller_cancelled_after_a_second_joined_leaves_the_work_to_it() -> None:
    flights: Flights[object] = Flights()
    work = Work()
    first = asyncio.create_task(flights.run("k", work()))
    await settle()  # the work has started, for the first caller alone
    second = asyncio.create_task(flights.run("k", work()))
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
    call = asyncio.create_task(flights.run("k", work()))
    await settle()
    call.cancel()
    await settle()
    assert call.cancelled()
    assert (work.started, work.cancelled) == (1, 1)
    assert len(flights) == 0
    again = Work("again")
    again.release.set()
    assert await flights.run("k", again()) == ("again", False)


async def test_a_caller_joining_after_the_work_ended_but_before_its_callers_woke_shares_it() -> (
    None
):
    flights: Flights[object] = Flights()
    work = Work()
    first = asyncio.create_task(flights.run("k", work()))
    await settle()
    (flight,) = flights._flights.values()
    work.release.set()
    for _ in range(10):  # a turn at a time, to stop between the work's end and its callback
        if flight.task.done():
            break
        await asyncio.sleep(0)
    assert len(flights) == 1  # the work is over; its callback has not run yet
    # Awaited here, not in a task: it joins in this very turn of the loop.
    assert await flights.run("k", work()) == ("answer", True)
    assert await first == ("answer", False)
    assert work.started == 1
    assert len(flights) == 0


async def test_work_cancelled_by_another_hand_cancels_every_caller() -> None:
    flights: Flights[object] = Flights()
    work = Work()
    calls = [asyncio.create_task(flights.run("k", work())) for _ in range(3)]
    await settle()
    (flight,) = flights._flights.values()
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
    call = asyncio.create_task(flights.run("k", work()))
    await settle()
    work.release.set()
    await asyncio.sleep(0)  # the work fails; its caller is woken in a later turn
    call.cancel()  # and leaves before it reads the failure
    await asyncio.gather(call, return_exceptions=True)
    del call, flights, work
    import gc

    gc.collect()
    assert "never retrieved" not in caplog.text
