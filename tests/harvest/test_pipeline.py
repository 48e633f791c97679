"""The harvest's pipeline: backpressure between its stages (the rest through harvest())."""

from __future__ import annotations

import anyio

from magisterium_async._harvest._pipeline import _Backlog


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
