"""The harvest's pipeline: backpressure between its stages, deliveries committed once,
tasks in proportion to the work (the rest through harvest())."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import pytest

from magisterium_async._harvest import HarvestState, OutputMark, harvest
from magisterium_async._harvest._pipeline import Deliveries, _Backlog
from tests.helpers.harvest_fakes import FakeClient


async def test_backlog_wakes_every_waiter_when_room_frees() -> None:
    backlog = _Backlog(2)
    backlog.add(2)
    woke: list[str] = []

    async def wait(name: str) -> None:
        await backlog.room()
        woke.append(name)

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait, "claim")
        tg.start_soon(wait, "resume")
        await anyio.wait_all_tasks_blocked()
        backlog.take()
        await anyio.wait_all_tasks_blocked()
    assert sorted(woke) == ["claim", "resume"]


async def test_a_delivery_is_committed_once_and_then_nothing_waits(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    await (await HarvestState.open(path)).aclose()
    deliveries = Deliveries()
    assert not deliveries.pending
    mark = OutputMark(device=1, inode=2, offset=10, fingerprint="f")
    deliveries.note(["a"], mark)
    assert deliveries.pending
    await deliveries.commit_to(path)  # the pipeline is gone: the state is reopened
    assert not deliveries.pending
    state = await HarvestState.open(path, new_run=False)
    try:
        assert await state.output() == mark
    finally:
        await state.aclose()


async def test_without_a_state_file_what_waits_is_dropped() -> None:
    deliveries = Deliveries()
    deliveries.note(["a"])
    await deliveries.commit_to(None)
    assert not deliveries.pending


@pytest.mark.parametrize("concurrency", [1, 1000])
async def test_the_tasks_alive_follow_the_work_not_the_concurrency_asked(concurrency: int) -> None:
    # One query, three documents: whatever the concurrency, a handful of tasks, never
    # 2 x concurrency made up front.
    peak = 0

    class Counting(FakeClient):
        async def fetch(self, document_id: str):  # type: ignore[no-untyped-def]
            nonlocal peak
            peak = max(peak, len(asyncio.all_tasks()))
            return await super().fetch(document_id)

    async with harvest(Counting(), ["a"], concurrency=concurrency) as h:
        ids = [d.id async for d in h]
    assert sorted(ids) == ["a/0", "a/1", "a/2"]
    assert peak < 30


@pytest.mark.parametrize("value", [0, 1001, 99_999_999_999])
def test_a_concurrency_out_of_range_is_refused_naming_it(value: int) -> None:
    with pytest.raises(ValueError, match=rf"^concurrency must be from 1 to 1000, got {value}"):
        harvest(FakeClient(), ["a"], concurrency=value)
