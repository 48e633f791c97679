"""JsonlWriter's timer: a document written is on disk within ``max_delay``, whatever follows.

Run in virtual time: the writer's clock is a VirtualClock, so "2 s later" takes no time; the
fsync itself runs in a real thread, which the tests wait for through ``on_durable``.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from magisterium_async import Document, JsonlWriter, MagisteriumError, OutputFileError
from magisterium_async.testing import VirtualClock


def document(document_id: str) -> Document:
    return Document(id=document_id, title="T", author=None, ref=None, text="x")


def ids_in(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines()]


class Durable:
    """``on_durable`` that a test can wait on."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self._changed = asyncio.Event()

    def __call__(self, ids: list[str]) -> None:
        self.batches.append(ids)
        self._changed.set()

    async def batch(self) -> list[str]:
        with anyio.fail_after(30):  # the real fsync thread, on a loaded machine
            while not self._changed.is_set():
                await self._changed.wait()
        self._changed.clear()
        return self.batches[-1]


async def test_a_lone_document_is_on_disk_after_max_delay(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    clock = VirtualClock()
    durable = Durable()
    async with JsonlWriter(path, max_delay=2.0, on_durable=durable, clock=clock) as out:
        await out.write(document("a"))
        await clock.advance(1.9)
        assert durable.batches == [] and ids_in(path) == []
        await clock.advance(0.1)
        assert await durable.batch() == ["a"]
        assert ids_in(path) == ["a"]
        # The next batch waits from its own first document, not from the last flush.
        await out.write(document("b"))
        await clock.advance(1.5)
        await out.write(document("c"))
        await clock.advance(0.5)
        assert await durable.batch() == ["b", "c"]
        assert ids_in(path) == ["a", "b", "c"]
        assert clock.sleepers == 0  # the timer sleeps only while lines wait
    assert durable.batches == [["a"], ["b", "c"]]


async def test_a_full_batch_is_written_at_once_and_the_timer_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    clock = VirtualClock()
    durable = Durable()
    async with JsonlWriter(
        path, batch_size=2, max_delay=5.0, on_durable=durable, clock=clock
    ) as out:
        await out.write(document("a"))
        await out.write(document("b"))
        assert durable.batches == [["a", "b"]]  # the second write flushed, no waiting
        await clock.advance(5.0)
        assert durable.batches == [["a", "b"]]
    assert ids_in(path) == ["a", "b"]


async def test_a_write_its_task_is_cancelled_in_is_counted_and_acknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Task.cancel()`` (the command line's Ctrl-C, twice; ``asyncio.timeout``) during a
    write in its thread: the write ends and is counted as made (written, the mark past it,
    ``on_durable`` told), then the cancellation is raised. Counted short, the file would
    look changed under the writer, and the state would not know the documents are there."""
    path = tmp_path / "out.jsonl"
    in_fsync, go_on = threading.Event(), threading.Event()
    fsync = os.fsync

    def held_fsync(fd: int) -> None:
        in_fsync.set()
        go_on.wait()
        fsync(fd)

    monkeypatch.setattr(os, "fsync", held_fsync)
    durable = Durable()
    async with JsonlWriter(path, batch_size=2, on_durable=durable) as out:
        await out.write(document("a"))
        writing = asyncio.ensure_future(out.write(document("b")))  # a full batch: written
        await anyio.to_thread.run_sync(in_fsync.wait)
        writing.cancel()
        writing.cancel()
        go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await writing
        assert out.written == 2 and durable.batches == [["a", "b"]]
        assert out.mark is not None and out.mark.offset == path.stat().st_size
    assert out.changed is None
    assert ids_in(path) == ["a", "b"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
async def test_a_full_disk_is_a_magisterium_error_and_a_failed_timed_write_is_raised_next(
    tmp_path: Path,
) -> None:
    clock = VirtualClock()
    durable = Durable()
    out = JsonlWriter("/dev/full", max_delay=1.0, clock=clock, on_durable=durable)
    await out.open()
    await out.write(document("a"))
    await clock.advance(1.0)  # the timer's write fails
    with pytest.raises(OutputFileError, match=r"^cannot write /dev/full: the disk is full"):
        await out.aclose()  # waits for the timer's write, and raises what it met
    assert durable.batches == []  # nothing on disk: nothing acknowledged
    async with JsonlWriter("/dev/full", batch_size=1, on_durable=durable) as full:
        with pytest.raises(MagisteriumError, match="the disk is full"):
            await full.write(document("b"))  # a full batch, written at once
    assert durable.batches == []


def test_max_delay_must_be_seconds(tmp_path: Path) -> None:
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="max_delay"):
            JsonlWriter(tmp_path / "out.jsonl", max_delay=bad)
    with pytest.raises(TypeError, match="max_delay must be a number, not str"):
        JsonlWriter(tmp_path / "out.jsonl", max_delay="1")  # type: ignore[arg-type]


def test_batch_size_must_be_a_whole_number(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        JsonlWriter(tmp_path / "out.jsonl", batch_size=0)
    with pytest.raises(TypeError, match="batch_size must be an int, not float"):
        JsonlWriter(tmp_path / "out.jsonl", batch_size=2.0)  # type: ignore[arg-type]
