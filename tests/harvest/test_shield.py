"""``to_the_end``: the harvest's writes run to their end whatever cancels their caller,
``Task.cancel()`` included (which an anyio shield does not hold off), and the cancellation
is then delivered as anyio's would be: at the caller's next ``await``."""

from __future__ import annotations

import asyncio
import sys
import threading

import anyio
import anyio.to_thread
import pytest

from magisterium_async._harvest._shield import to_the_end


async def test_cancelled_three_times_the_work_ends_and_the_cancellation_comes_next() -> None:
    started, go_on = threading.Event(), threading.Event()
    seen: list[str] = []

    def work() -> str:
        started.set()
        go_on.wait()
        return "written"

    async def caller() -> None:
        seen.append(await to_the_end(anyio.to_thread.run_sync(work)))
        await asyncio.sleep(0)  # the next await: the cancellation
        seen.append("not reached")

    task = asyncio.ensure_future(caller())
    await anyio.to_thread.run_sync(started.wait)
    for _ in range(3):  # Ctrl-C three times
        task.cancel()
        await asyncio.sleep(0)
    go_on.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["written"]


async def test_a_timeout_that_expires_during_the_work_is_a_timeout_still() -> None:
    if sys.version_info < (3, 11):
        pytest.skip("asyncio.timeout")
    release = asyncio.Event()

    async def work() -> str:
        await release.wait()
        return "written"

    seen: list[str] = []
    with pytest.raises(TimeoutError):  # not a CancelledError: one cancellation, counted once
        async with asyncio.timeout(0):  # expired: the task is cancelled in the work
            asyncio.get_running_loop().call_soon(release.set)
            seen.append(await to_the_end(work()))
            await asyncio.sleep(0)
            seen.append("not reached")
    assert seen == ["written"]
