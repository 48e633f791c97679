"""within(): a deadline on the client's clock, in the caller's task."""

from __future__ import annotations

import asyncio
import math

import pytest

from magisterium_async._deadline import within
from magisterium_async.testing import VirtualClock


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
