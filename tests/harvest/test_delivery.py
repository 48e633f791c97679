"""Deliveries: every path to the state commits what waits, once."""

from __future__ import annotations

from pathlib import Path

from magisterium_async._harvest._delivery import Deliveries
from magisterium_async._harvest._jsonl import OutputMark
from magisterium_async._harvest._state import HarvestState


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
