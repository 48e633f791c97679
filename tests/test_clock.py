"""The clocks: the loop's real time, and virtual time that jumps to the next deadline when
the loop is idle (or, with ``autojump=False``, only moves when a test says so)."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

import magisterium_async as m
from magisterium_async._clock import Clock, LoopClock, within
from magisterium_async.testing import MockRequest, MockResponse, MockTransport, VirtualClock
from tests.conftest import artifact, data, task_json


async def test_loop_clock_reads_the_loop_time_and_sleeps() -> None:
    clock: Clock = LoopClock()
    loop = asyncio.get_running_loop()
    earlier = loop.time()
    before = clock.now()
    assert earlier <= before <= loop.time()  # the loop's time, bracketed: no bound on speed
    await clock.sleep(0)
    await clock.sleep(-1)
    assert clock.now() >= before


def test_loop_clock_outside_a_loop_is_monotonic() -> None:
    earlier = time.monotonic()
    now = LoopClock().now()
    assert earlier <= now <= time.monotonic()


async def test_time_stands_still_until_advanced() -> None:
    clock = VirtualClock(start=100.0)
    task = asyncio.create_task(clock.sleep(5))
    await asyncio.sleep(0)
    assert clock.now() == 100.0
    assert clock.sleepers == 1
    await clock.advance(4.999)
    assert not task.done()
    await clock.advance(0.001)
    assert task.done()
    assert clock.now() == 105.0
    assert clock.sleepers == 0


async def test_sleepers_wake_in_deadline_order_ties_in_arrival_order() -> None:
    clock = VirtualClock()
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append((name, clock.now()))

    tasks = [
        asyncio.create_task(sleeper(name, seconds))
        for name, seconds in [("c", 3), ("a", 1), ("b1", 2), ("b2", 2)]
    ]
    await clock.run_until_idle()
    assert woke == [("a", 1), ("b1", 2), ("b2", 2), ("c", 3)]
    await asyncio.gather(*tasks)


async def test_each_wakeup_settles_before_the_next() -> None:
    """A woken sleeper's follow-up work (through other tasks) is done before time moves on."""
    clock = VirtualClock()
    seen: list[tuple[str, float]] = []
    queue: asyncio.Queue[float] = asyncio.Queue()

    async def producer() -> None:
        await clock.sleep(1)
        await queue.put(clock.now())

    async def consumer() -> None:
        value = await queue.get()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        seen.append(("consumed", value))

    async def late() -> None:
        await clock.sleep(1.5)
        seen.append(("late", clock.now()))

    tasks = [asyncio.create_task(f()) for f in (producer, consumer, late)]
    await clock.run_until_idle()
    assert seen == [("consumed", 1.0), ("late", 1.5)]
    await asyncio.gather(*tasks)


async def test_advance_wakes_sleepers_that_go_back_to_sleep_within_the_interval() -> None:
    clock = VirtualClock()
    ticks: list[float] = []

    async def ticker() -> None:
        for _ in range(5):
            await clock.sleep(1)
            ticks.append(clock.now())

    task = asyncio.create_task(ticker())
    await clock.advance(3.5)
    assert ticks == [1, 2, 3]
    assert clock.now() == 3.5
    assert clock.next_wakeup == 4.0
    await clock.run_until_idle()
    assert ticks == [1, 2, 3, 4, 5]
    await task


async def test_a_cancelled_sleeper_is_forgotten() -> None:
    clock = VirtualClock()
    task = asyncio.create_task(clock.sleep(10))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert clock.sleepers == 0
    assert clock.next_wakeup is None
    await clock.run_until_idle()
    assert clock.now() == 0.0


async def test_zero_sleep_only_yields_and_infinite_sleep_never_wakes() -> None:
    clock = VirtualClock()
    await clock.sleep(0)
    forever = asyncio.create_task(clock.sleep(math.inf))
    await clock.run_until_idle()
    assert clock.now() == 0.0
    assert not forever.done()
    forever.cancel()
    with pytest.raises(asyncio.CancelledError):
        await forever


async def test_bad_advance_and_endless_sleepers_are_reported() -> None:
    clock = VirtualClock()
    with pytest.raises(ValueError, match="backwards"):
        await clock.advance(-1)

    async def forever() -> None:
        while True:
            await clock.sleep(1)

    task = asyncio.create_task(forever())
    with pytest.raises(RuntimeError, match="still busy"):
        await clock.run_until_idle(max_wakeups=50)
    assert clock.now() == 50.0
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_repr() -> None:
    assert repr(LoopClock()) == "LoopClock()"
    assert repr(VirtualClock(2.0)) == "VirtualClock(now=2.0, sleepers=0)"
    assert repr(VirtualClock(autojump=False)) == "VirtualClock(now=0.0, sleepers=0, autojump=False)"


async def idle_loop_for_a_moment() -> None:
    """Leave the loop with nothing ready for a while: only a real timer is pending."""
    done = asyncio.Event()
    asyncio.get_running_loop().call_later(0.02, done.set)
    await done.wait()


async def test_autojump_moves_to_the_next_deadline_when_the_loop_is_idle() -> None:
    clock = VirtualClock(start=10.0)
    assert clock.autojump
    woke: list[float] = []

    async def sleeper(seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(clock.now())

    await asyncio.gather(sleeper(30), sleeper(5), sleeper(3600))
    assert woke == [15.0, 40.0, 3610.0]  # each at its own deadline, in order
    assert clock.now() == 3610.0
    assert clock.sleepers == 0


async def test_autojump_waits_while_other_tasks_can_run() -> None:
    """Work that is busy on the loop (yielding, no sleep) finishes before time moves."""
    clock = VirtualClock()
    seen: list[tuple[str, float]] = []

    async def busy() -> None:
        for _ in range(200):
            await asyncio.sleep(0)
        seen.append(("busy", clock.now()))

    async def sleeper() -> None:
        await clock.sleep(1)
        seen.append(("slept", clock.now()))

    await asyncio.gather(sleeper(), busy())
    assert seen == [("busy", 0.0), ("slept", 1.0)]


async def test_without_autojump_time_stands_still_while_the_loop_idles() -> None:
    clock = VirtualClock(autojump=False)
    task = asyncio.create_task(clock.sleep(5))
    await idle_loop_for_a_moment()
    assert clock.now() == 0.0 and not task.done()
    await clock.advance(5)
    assert task.done()


async def test_autojump_and_advance_together() -> None:
    """A test may still look at a moment on the way: time only jumps when the loop idles."""
    clock = VirtualClock()
    ticks: list[float] = []

    async def ticker() -> None:
        for _ in range(3):
            await clock.sleep(1)
            ticks.append(clock.now())

    task = asyncio.create_task(ticker())
    await clock.advance(1.5)
    assert ticks == [1.0] and clock.now() == 1.5
    await task
    assert ticks == [1.0, 2.0, 3.0]


async def test_sleeping_forever_is_no_deadline_to_jump_to() -> None:
    clock = VirtualClock()
    forever = asyncio.create_task(clock.sleep(math.inf))
    await idle_loop_for_a_moment()
    assert clock.now() == 0.0 and not forever.done()
    forever.cancel()
    with pytest.raises(asyncio.CancelledError):
        await forever


async def test_a_client_retrying_and_rate_limited_finishes_in_virtual_time() -> None:
    """A 502 then a 200, and a 429 asking for 30 s: both calls finish, nobody moves the clock."""
    answers = {
        "502": [MockResponse(status=502, content="<html>Bad Gateway</html>")],
        "429": [
            MockResponse(
                status=429,
                json={
                    "jsonrpc": "2.0",
                    "id": 0,
                    "error": {"code": -32003, "message": "Rate limit", "data": {"retryAfter": 30}},
                },
            )
        ],
    }

    def handler(request: MockRequest) -> MockResponse:
        query = "502" if b'"502"' in request.content else "429"
        if answers[query]:
            scripted = answers[query].pop(0)
            if scripted.json is not None:  # echo the request's id
                echoed = scripted.json | {"id": request.json["id"]}
                scripted = MockResponse(status=scripted.status, json=echoed)
            return scripted
        hits = artifact("search_results", data({"results": [{"id": query, "title": query}]}))
        return MockResponse.result(request, task_json(artifacts=[hits]))

    clock = VirtualClock()
    transport = MockTransport(handler)
    async with m.AsyncMagisterium(
        token="t", transport=transport, clock=clock, rate_limits=m.RateLimits.unlimited()
    ) as client:
        retried, limited = await asyncio.gather(client.search("502"), client.search("429"))
    assert [hit.id for hit in retried] == ["502"]
    assert [hit.id for hit in limited] == ["429"]
    assert len(transport.requests) == 4
    assert 30 <= clock.now() < 60  # the retryAfter, in virtual seconds; no real wait


# within(): a deadline on the client's clock, in the caller's task
# --------------------------------------------------------------------------------


class Expired(Exception):
    pass


async def test_work_that_ends_first_returns_its_result() -> None:
    clock = VirtualClock()

    async def work() -> str:
        await clock.sleep(2)
        return "done"

    call = asyncio.ensure_future(within(clock, 3, work(), Expired))
    await clock.run_until_idle()
    assert await call == "done"
    assert clock.now() == 2 and clock.sleepers == 0


async def test_work_that_outlasts_the_deadline_is_cancelled() -> None:
    clock = VirtualClock()
    cancelled = []

    async def work() -> None:
        try:
            await clock.sleep(math.inf)
        except asyncio.CancelledError:
            cancelled.append(clock.now())
            raise

    call = asyncio.ensure_future(within(clock, 3, work(), Expired))
    await clock.run_until_idle()
    with pytest.raises(Expired) as info:
        await call
    assert cancelled == [3.0]
    assert info.value.__context__ is None and info.value.__cause__ is None
    if hasattr(call, "cancelling"):  # Python 3.11+: our cancellation was taken back
        assert call.cancelling() == 0


async def test_a_cancellation_from_outside_passes_through() -> None:
    clock = VirtualClock()
    call = asyncio.ensure_future(within(clock, 3, clock.sleep(math.inf), Expired))
    await clock.advance(1)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await clock.run_until_idle()
    assert clock.now() == 1 and clock.sleepers == 0


async def test_errors_of_the_work_are_its_own() -> None:
    async def work() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        await within(VirtualClock(), 3, work(), Expired)


async def test_a_deadline_that_ends_just_after_the_work_never_cancels_the_caller_later() -> None:
    """The work ends and the deadline's timer ends in the same turn of the loop, the work
    first (two timers due together on a busy loop): the result is returned, and the
    caller goes on uncancelled."""
    wake = asyncio.get_running_loop().create_future()

    class Manual(VirtualClock):
        async def sleep(self, seconds: float) -> None:
            await wake

    work: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    after: list[str] = []

    async def caller() -> str:
        got = await within(Manual(), 5, work, Expired)
        await asyncio.sleep(0)  # the caller goes on with its own work
        await asyncio.sleep(0)
        after.append(got)
        return got

    task = asyncio.ensure_future(caller())
    for _ in range(3):
        await asyncio.sleep(0)
    asyncio.get_running_loop().call_soon(work.set_result, "permit")
    wake.set_result(None)
    assert await task == "permit"
    assert after == ["permit"]


# within() on the loop's clock: asyncio.wait_for without losing a cancellation
# --------------------------------------------------------------------------------


async def test_a_task_cancelled_as_its_bounded_wait_ends_is_cancelled() -> None:
    """``asyncio.wait_for`` before Python 3.12 returned the result here, and the task went
    on as if never cancelled (a cancelled call went on to send its request)."""
    work: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    went_on = []

    async def caller() -> None:
        await within(LoopClock(), 5, work, asyncio.TimeoutError)
        await asyncio.sleep(0)
        went_on.append(True)

    task = asyncio.ensure_future(caller())
    await asyncio.sleep(0)
    work.set_result(1)
    task.cancel()  # in the same turn of the loop
    with pytest.raises(asyncio.CancelledError):
        await task
    assert went_on == []


async def test_a_bounded_wait_times_out_and_returns_in_time() -> None:
    assert await within(LoopClock(), 5, asyncio.sleep(0, "done"), asyncio.TimeoutError) == "done"
    with pytest.raises(asyncio.TimeoutError):
        never = asyncio.get_running_loop().create_future()
        await within(LoopClock(), 0, never, asyncio.TimeoutError)
