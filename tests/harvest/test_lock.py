"""One harvest at a time per state and per output, from the library: a second one is
refused at once naming the first, and the lock files go when the holder lets go."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from magisterium_async import OutputFileError, StateError
from magisterium_async._harvest import HarvestLock, JsonlWriter, harvest
from tests.helpers.harvest_fakes import FakeClient


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def test_a_second_harvest_of_a_state_is_refused_naming_the_first(tmp_path: Path) -> None:
    state = tmp_path / "s.sqlite"
    first = harvest(FakeClient(), ["a", "b"], state=state)
    async with first:
        await anext(first)  # the first document asked for: the state is held
        second = harvest(FakeClient(), ["c"], state=state)
        with pytest.raises(StateError) as refused:
            await anext(second)
        await second.aclose()
        message = str(refused.value)
        assert f"s.sqlite is in use by another harvest (pid {os.getpid()} on " in message
        assert socket.gethostname() in message and ", since 20" in message
        assert refused.value.path == str(state)
    assert names(tmp_path) == ["s.sqlite"]  # the lock and its .info are gone with it
    rest = [d.id async for d in harvest(FakeClient(), ["a", "b"], state=state)]
    assert rest  # held no longer: the next harvest runs


async def test_a_second_writer_of_an_output_is_refused_and_reads_nothing(tmp_path: Path) -> None:
    out = tmp_path / "docs.jsonl"
    async with JsonlWriter(out) as writer:
        with pytest.raises(
            OutputFileError, match=rf"in use by another harvest \(pid {os.getpid()}"
        ):
            await JsonlWriter(out).open()
        assert writer.mark is not None
    assert names(tmp_path) == ["docs.jsonl"]


async def test_a_state_with_a_second_name_is_refused_as_a_second_harvest_could_use_it(
    tmp_path: Path,
) -> None:
    state = tmp_path / "s.sqlite"
    done = [d.id async for d in harvest(FakeClient(), ["a"], state=state)]
    os.link(state, tmp_path / "h.sqlite")  # a hard link: its lock would be h.sqlite.lock
    before = state.read_bytes()
    first = harvest(FakeClient(), ["a", "b"], state=state)
    with pytest.raises(StateError, match=r"s\.sqlite has 2 names \(hard links\)"):
        await anext(first)
    await first.aclose()
    second = harvest(FakeClient(), ["a", "b"], state=tmp_path / "h.sqlite")
    with pytest.raises(StateError, match=r"h\.sqlite has 2 names"):
        await anext(second)
    await second.aclose()
    assert done and state.read_bytes() == before  # nothing sent, nothing changed
    assert names(tmp_path) == ["h.sqlite", "s.sqlite"]


def test_a_symbolic_link_is_the_file_it_names(tmp_path: Path) -> None:
    (tmp_path / "docs.jsonl").write_bytes(b"")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "docs.jsonl")
    with (
        HarvestLock(tmp_path / "docs.jsonl", "output", OutputFileError),
        pytest.raises(OutputFileError, match=r"link\.jsonl is in use"),
    ):
        HarvestLock(tmp_path / "link.jsonl", "output", OutputFileError).acquire()


def test_a_lock_left_by_a_killed_holder_is_taken(tmp_path: Path) -> None:
    # What kill -9 leaves: the files, and no OS lock on them.
    (tmp_path / "s.sqlite.lock").write_bytes(b"")
    (tmp_path / "s.sqlite.lock.info").write_text('{"pid": 1, "host": "gone", "since": "x"}')
    lock = HarvestLock(tmp_path / "s.sqlite", "state", StateError)
    lock.acquire()
    assert f'"pid": {os.getpid()}' in (tmp_path / "s.sqlite.lock.info").read_text()
    lock.release()
    assert names(tmp_path) == []


def ended_pid() -> int:
    """The pid of a process of this host that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", ""])
    proc.wait()
    return proc.pid


def held(tmp_path: Path) -> tuple[HarvestLock, Path]:
    """A lock held by this process on ``s.sqlite``, and its ``.info``."""
    holder = HarvestLock(tmp_path / "s.sqlite", "state", StateError)
    holder.acquire()
    return holder, tmp_path / "s.sqlite.lock.info"


def test_a_refusal_never_names_the_killed_holder_before_the_new_one_wrote_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After kill -9, the next harvest takes the lock, then writes itself into the .info the
    # killed one left: a harvest refused in between must wait for that, not name the dead.
    holder, info = held(tmp_path)
    mine = info.read_text()
    dead = {"pid": ended_pid(), "host": socket.gethostname(), "since": "2026-12-05T17:11:02"}
    info.write_text(json.dumps(dead))
    monkeypatch.setattr(
        "magisterium_async._harvest._lock.time.sleep", lambda _: info.write_text(mine)
    )
    with pytest.raises(StateError, match=rf"in use by another harvest \(pid {os.getpid()} on "):
        HarvestLock(tmp_path / "s.sqlite", "state", StateError).acquire()
    holder.release()


def test_a_holder_that_looks_ended_is_named_as_one_that_may_have_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing newer came: what the .info says is all there is (a container's process, of
    # another PID namespace, looks ended from here while it runs).
    holder, info = held(tmp_path)
    pid = ended_pid()
    info.write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "since": "x"}))
    monkeypatch.setattr("magisterium_async._harvest._lock._HOLDER_WAIT", 0.0)
    with pytest.raises(StateError, match=rf"\(pid {pid} on .*that process may have ended\)"):
        HarvestLock(tmp_path / "s.sqlite", "state", StateError).acquire()
    info.unlink()
    with pytest.raises(StateError, match=r"another harvest \(which one, it does not say\)"):
        HarvestLock(tmp_path / "s.sqlite", "state", StateError).acquire()
    holder.release()


@pytest.mark.skipif(not os.path.exists("/proc/version"), reason="Linux's /proc and /sys")
def test_a_lock_file_that_cannot_be_made_is_named_not_blamed_on_another_harvest() -> None:
    # filelock reports a lock file it cannot create beside /proc/version as a timeout, as
    # it does one held; in /sys (not writable, even by root), as a PermissionError.
    with pytest.raises(OutputFileError, match=r"cannot make its lock file /proc/version\.lock"):
        HarvestLock("/proc/version", "output", OutputFileError).acquire()
    with pytest.raises(StateError, match=r"cannot make its lock file /sys/s\.sqlite\.lock"):
        HarvestLock("/sys/s.sqlite", "state", StateError).acquire()
