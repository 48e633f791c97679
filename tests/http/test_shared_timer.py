"""The shared timer: every request cut at its own deadline, none early, none twice; a
cancellation from outside passes; ended requests are forgotten."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import pytest

from magisterium_async._http._shared_timer import Entry, SharedTimer


async def bounded(
    timer: SharedTimer,
    seconds: float,
    work: Any,
    joined: Callable[[Entry], object] | None = None,
) -> Any:
    """A request as the transport makes one: joined, awaited, left (``joined`` hears the
    request's entry)."""
    entry = timer.join(seconds)
    if joined is not None:
        joined(entry)
    try:
        return await work
    except asyncio.CancelledError:
        if not timer.timed_out(entry):
            raise
        raise asyncio.TimeoutError from None
    finally:
        timer.leave(entry, seconds)


async def test_a_request_past_its_deadline_is_cut_and_not_before() -> None:
    loop = asyncio.get_running_loop()
    timer = SharedTimer(loop)
    started = loop.time()
    with pytest.raises(asyncio.TimeoutError):
        await bounded(timer, 0.05, loop.create_future())
    assert loop.time() - started >= 0.05
    assert (timer.waiting, timer.held) == (0, 0)


async def test_requests_that_end_in_time_are_left_alone_and_forgotten() -> None:
    loop = asyncio.get_running_loop()
    timer = SharedTimer(loop)

    async def answer(value: int) -> int:
        await asyncio.sleep(0)
        return value

    results = await asyncio.gather(*(bounded(timer, 0.05, answer(i)) for i in range(100)))
    assert results == list(range(100))
    assert (timer.waiting, timer.held) == (0, 0)
    # The timer still fires for the deadline it was armed at: it must cut nothing.
    never = loop.create_future()
    with pytest.raises(asyncio.TimeoutError):
        await bounded(timer, 0.2, never)
    assert repr(timer) == "<SharedTimer 0 waiting, 0 held>"


async def test_a_short_timeout_behind_long_ones_is_cut_at_its_own_deadline() -> None:
    loop = asyncio.get_running_loop()
    timer = SharedTimer(loop)
    slow = loop.create_future()
    long_one = asyncio.ensure_future(bounded(timer, 30.0, slow))
    await asyncio.sleep(0)
    started = loop.time()
    short = asyncio.ensure_future(bounded(timer, 0.05, loop.create_future()))
    shorter_than_long = asyncio.ensure_future(bounded(timer, 0.1, loop.create_future()))
    with pytest.raises(asyncio.TimeoutError):
        await short
    # Cut at its own deadline, not at the long one's (30 s): however slow the machine.
    assert 0.05 <= loop.time() - started < 30.0
    # After that cut, the earliest deadline left in any line is the one the timer keeps.
    with pytest.raises(asyncio.TimeoutError):
        await shorter_than_long
    assert loop.time() - started < 30.0
    assert not long_one.done()  # its own deadline is far off
    slow.set_result("late but in time")
    assert await long_one == "late but in time"


async def test_each_request_is_cut_once_and_the_others_go_on() -> None:
    loop = asyncio.get_running_loop()
    timer = SharedTimer(loop)
    finishing = loop.create_future()
    tasks = [
        asyncio.ensure_future(bounded(timer, 0.05, loop.create_future())),
        asyncio.ensure_future(bounded(timer, 0.06, loop.create_future())),
        asyncio.ensure_future(bounded(timer, 5.0, finishing)),
    ]
    done, _ = await asyncio.wait(tasks[:2])
    assert all(isinstance(t.exception(), asyncio.TimeoutError) for t in done)
    finishing.set_result(3)
    assert await tasks[2] == 3
    assert timer.waiting == 0


async def test_a_cancellation_from_outside_passes_as_it_is() -> None:
    loop = asyncio.get_running_loop()
    timer = SharedTimer(loop)
    task = asyncio.ensure_future(bounded(timer, 5.0, loop.create_future()))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert timer.waiting == 0


async def test_ended_requests_behind_a_slow_one_do_not_pile_up() -> None:
    loop = asyncio.get_running_loop()
    timer = SharedTimer(loop)
    slow = loop.create_future()
    stuck = asyncio.ensure_future(bounded(timer, 30.0, slow))
    await asyncio.sleep(0)

    async def quick() -> None:
        await asyncio.sleep(0)

    for _ in range(20):
        await asyncio.gather(*(bounded(timer, 30.0, quick()) for _ in range(50)))
    # A thousand ended behind the one still waiting: the line keeps a bounded few.
    assert timer.waiting == 1
    assert timer.held <= 2 * 1 + 64
    slow.set_result(None)
    await stuck
    assert (timer.waiting, timer.held) == (0, 0)


async def test_a_request_that_ended_in_time_is_never_cut_later() -> None:
    loop = asyncio.get_running_loop()
    timer = SharedTimer(loop)
    head = asyncio.ensure_future(bounded(timer, 0.05, loop.create_future()))
    await asyncio.sleep(0)  # joined first: the line's head
    release = loop.create_future()

    async def answer_then_go_on() -> str:
        await bounded(timer, 0.05, asyncio.sleep(0))
        return await release  # the task's own business: no deadline of the timer's

    behind = asyncio.ensure_future(answer_then_go_on())
    with pytest.raises(asyncio.TimeoutError):
        await head
    # Past the deadline the ended request had too: the timer has fired for it.
    with pytest.raises(asyncio.TimeoutError):
        await bounded(timer, 0.1, loop.create_future())
    release.set_result("untouched")
    assert await behind == "untouched"


async def test_lines_of_timeouts_no_longer_in_use_are_forgotten() -> None:
    loop = asyncio.get_running_loop()
    timer = SharedTimer(loop)
    # Each call with a timeout of its own: a line each, while they are in flight.
    await asyncio.gather(*(bounded(timer, 0.01 + i / 1000, asyncio.sleep(0)) for i in range(100)))
    assert timer.lines == 100
    with pytest.raises(asyncio.TimeoutError):
        await bounded(timer, 0.2, loop.create_future())
    assert timer.lines <= 1


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 has no Task.uncancel()")
async def test_a_cancellation_from_outside_at_the_deadline_passes_too() -> None:
    loop = asyncio.get_running_loop()
    timer = SharedTimer(loop)
    never = loop.create_future()
    # The caller cancels the task in the same turn of the loop as the timer cuts it.
    request = bounded(timer, 0.05, never, lambda e: loop.call_at(e.deadline, e.task.cancel))
    with pytest.raises(asyncio.CancelledError):
        await asyncio.ensure_future(request)
    assert timer.waiting == 0
